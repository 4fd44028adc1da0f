package holdfast

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/internal/topology"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// This file is the writer-failover layer (WithFailover): the factory keeps
// one failover.Monitor per cluster, shared by the pools on it; each pool's
// layers route by the monitor's snapshot and act on its changes.
//
//	BeforeConnect  by the writer endpoint: held while the writer is down
//	               and no other is known (failover.Monitor.Hold)
//	DialFunc       by the writer endpoint, each dial (the connect layer's
//	               retries too): held while the writer is down, then to
//	               the new writer's address while its DNS lags (TLS still
//	               verifies the endpoint name)
//	ValidateConnect by the writer endpoint: a server that is not the writer
//	               (in hot standby, or a reader of the topology) is refused,
//	               and the attempt retried — to the writer
//	OnPgError      57P01/57P02/57P03, and 25006 by the writer endpoint, wake
//	               the monitor; a 25006 from a standby or read-only server
//	               closes the connection
//	PrepareConn    a connection to a writer that is down is destroyed
//	network errors wake the monitor; on a new writer, every connection to
//	               the old one is cut (failover.CutError) and idle ones
//	               closed at once

// foState is a pool's failover layer.
type foState struct {
	m      *failover.Monitor
	writer bool // the pool's host is the writer endpoint

	// A pool on a name of your own that Config.Aliases does not list:
	// the first 25006 from a standby by it logs a hint (it may be a name
	// for the writer endpoint, which holdfast cannot see).
	custom bool
	host   string
	log    *slog.Logger
	hinted atomic.Bool

	mu   sync.Mutex
	live map[*attempt]struct{} // the pool's connections, from their dial on
	cuts []cutRecord           // the latest cuts (at most maxCutRecords), for a dial they crossed
}

// cutRecord is one cut of the pool's connections to addr.
type cutRecord struct {
	addr string
	at   time.Time
	err  *failover.CutError
}

// maxCutRecords bounds the cuts a pool remembers: a dial lasts at most the
// policy's AttemptTimeout, and a failover cuts one or two addresses.
const maxCutRecords = 8

// failoverMonitor returns the factory's monitor of the cluster of cc's
// host, creating it. f.mu is held.
func (f *Factory) failoverMonitor(cc *pgx.ConnConfig, connHook func(context.Context, *pgx.ConnConfig) error) (*failover.Monitor, error) {
	ep := f.failover.Endpoint(cc.Host)
	tmpl, port, err := failover.TemplateFor(ep, cc.Port, f.failover.InstanceTemplate)
	if err != nil {
		return nil, err
	}
	key := clusterKey(ep, tmpl, port)
	if m := f.monitors[key]; m != nil {
		return m, nil
	}
	m, err := failover.NewMonitor(cc, *f.failover, connHook)
	if err != nil {
		return nil, err
	}
	if f.monitors == nil {
		f.monitors = map[string]*failover.Monitor{}
	}
	f.monitors[key] = m
	return m, nil
}

// clusterKey is the identity of the cluster that a pool on endpoint ep
// (an alias already replaced by its endpoint) belongs to, as far as names
// tell: the pools of one cluster share its monitor, and no two clusters
// ever share one. The writer and reader endpoints of a cluster name it
// (its name, the domain of its instance endpoints, the port): two clusters
// in one account and region share the domain and differ by name. Any
// other host (an instance or custom endpoint, an IP address or a name of
// your own with InstanceTemplate) names no cluster: its pools get a
// monitor of their own, keyed by the host itself.
func clusterKey(ep, tmpl string, port uint16) string {
	p := strconv.Itoa(int(port))
	if name, domain := topology.ClusterName(ep); name != "" {
		return "cluster " + name + "." + domain + " " + tmpl + ":" + p
	}
	return "host " + topology.NormHost(ep) + " " + tmpl + ":" + p
}

// routedKind reports whether failover routing applies to a pool on
// endpoint ep, and why not when it does not: an RDS Proxy follows the
// writer itself, and an Aurora global database's endpoint is a DNS name
// of the primary cluster's writer whose instance endpoints it does not
// name.
func routedKind(ep string) (bool, string) {
	switch topology.KindOf(topology.NormHost(ep)) {
	case topology.KindProxy:
		return false, "failover: an RDS Proxy endpoint follows the cluster's writer itself; failover routing is off for this pool (holdfast's retries still apply)"
	case topology.KindGlobal:
		return false, "failover: an Aurora global database endpoint follows the primary cluster's writer by DNS; failover routing is off for this pool (holdfast's retries still apply); for routing, use the primary region's cluster endpoint"
	}
	return true, ""
}

// installFailover adds cfg's pool to the cluster's monitor. f.mu is held.
func (ph *poolHooks) installFailover(cc *pgx.ConnConfig) error {
	ep := ph.f.failover.Endpoint(cc.Host)
	if ok, why := routedKind(ep); !ok {
		ph.f.logger.LogAttrs(context.Background(), slog.LevelInfo, why,
			slog.String("server.address", cc.Host), slog.String("holdfast.endpoint.kind", topology.KindOf(topology.NormHost(ep)).String()))
		return nil
	}
	// The monitor dials once per attempt, through the integration's (or
	// the config's) dial but not the retry loop: a probe of a dead writer
	// must fail fast, and never spend the pools' retry budget.
	mc := cc.Copy()
	mc.DialFunc = ph.base
	m, err := ph.f.failoverMonitor(mc, ph.monitorConnect)
	if err != nil {
		return &ConfigError{Field: "WithFailover", Why: "cannot install failover routing", Err: err}
	}
	fo := &foState{m: m, live: map[*attempt]struct{}{}, host: cc.Host, log: ph.f.logger}
	fo.writer = failover.IsWriterEndpoint(ep)
	fo.custom = ep == cc.Host && !topology.IsIP(cc.Host) && !isSocket(cc.Host) &&
		topology.InstanceDomain([]string{topology.NormHost(cc.Host)}) == ""
	for _, fb := range cc.Fallbacks {
		if fb.Host != cc.Host {
			fo.writer = false // several hosts: pgx chooses among them
		}
	}
	host := ""
	if fo.writer {
		host = cc.Host
	}
	ph.fo = fo
	m.Watch(host, ph.onFailover)
	if ph.bg != nil {
		m.StandDownWhile(ph.bg.Routing) // a switchover moves the writer on purpose
	}
	return nil
}

// hold is the failover layer of BeforeConnect.
func (ph *poolHooks) hold(ctx context.Context, cc *pgx.ConnConfig) error {
	fo := ph.fo
	fo.m.Start() // with the pool's first connection (idempotent)
	if !fo.writer || ph.bg.Routing() {
		return nil
	}
	return fo.m.Hold(ctx, cc.Host)
}

// redirect returns where a dial of the pool's host goes: the writer's
// address while the writer endpoint's DNS lags a failover, or when the
// address it gave is one of the topology's readers (a client-side cache
// older than the monitor's); else addr.
func (ph *poolHooks) redirect(addr string) string {
	if fo := ph.fo; fo != nil && fo.writer {
		if s := fo.m.Snapshot(); s.WriterAddr != "" && (s.Redirect || s.Readers[addr]) && !ph.bg.Routing() {
			return s.WriterAddr
		}
	}
	return addr
}

// routeDial returns where one dial of a connect by the pool's host goes — the
// first and each retry: held while the writer is down and no other is
// known (BeforeConnect holds only the connect's start; a writer can go
// down while the connect layer retries its dials), then redirect(addr).
func (ph *poolHooks) routeDial(ctx context.Context, host, addr string) (string, error) {
	if fo := ph.fo; fo != nil && fo.writer && !ph.bg.Routing() {
		if err := fo.m.Hold(ctx, host); err != nil {
			return "", err
		}
	}
	return ph.redirect(addr), nil
}

// trouble wakes the monitor.
func (ph *poolHooks) trouble() {
	if ph != nil && ph.fo != nil {
		ph.fo.m.Trouble()
	}
}

// validateWriter refuses a connection by the writer endpoint that reached
// a server that is not the writer.
func (ph *poolHooks) validateWriter(host string, pc *pgconn.PgConn) error {
	if ph.bg.Routing() {
		return nil // a blue/green switchover routes the pool: its servers change roles on purpose
	}
	fo := ph.fo
	addr := pc.Conn().RemoteAddr().String()
	why := ""
	switch s := fo.m.Snapshot(); {
	case pc.ParameterStatus("in_hot_standby") == "on":
		why = "in hot standby"
	case s.Readers[addr] && s.WriterAddr != addr:
		why = "a reader in the topology"
	case pc.ParameterStatus("default_transaction_read_only") == "on":
		why = "read-only"
	default:
		return nil
	}
	fo.m.Trouble()
	return &failover.NotWriterError{Host: host, Addr: addr, Why: why}
}

// onPgError wakes the monitor on the server errors of a failover. It
// closes a connection by the writer endpoint that answered 25006 from a
// server in hot standby or read-only by default (not a transaction the
// application made read-only itself).
func (fo *foState) onPgError(pc *pgconn.PgConn, pe *pgconn.PgError) bool {
	switch pe.Code {
	case "57P01", "57P02", "57P03":
		fo.m.Trouble()
	case "25006":
		if fo.writer {
			fo.m.Trouble()
			return pc.ParameterStatus("in_hot_standby") != "on" && pc.ParameterStatus("default_transaction_read_only") != "on"
		}
		if fo.custom && pc.ParameterStatus("in_hot_standby") == "on" && fo.hinted.CompareAndSwap(false, true) {
			fo.log.LogAttrs(context.Background(), slog.LevelWarn,
				"holdfast: a write by a name of your own reached a standby (25006); if it is a name for the cluster (writer) endpoint, list it in failover.Config.Aliases, so that holdfast refuses standbys by it and routes it through failovers",
				slog.String("server.address", fo.host), slog.String("addr", pc.Conn().RemoteAddr().String()))
		}
	}
	return true
}

// track keeps a connection of the pool from its dial to addr on, for the
// cut; untrack forgets it. A cut of addr made after the dial started and
// before track reaches it here: whatever moment its handshake ends, no
// connection to a server that a cut left behind survives the cut.
func (fo *foState) track(a *attempt, addr string, dialStart time.Time) {
	fo.mu.Lock()
	fo.live[a] = struct{}{}
	var crossed *failover.CutError
	for _, c := range fo.cuts {
		if c.addr == addr && !c.at.Before(dialStart) {
			crossed = c.err
		}
	}
	fo.mu.Unlock()
	if crossed != nil {
		a.abort(crossed)
	}
}

func (fo *foState) untrack(a *attempt) {
	fo.mu.Lock()
	delete(fo.live, a)
	fo.mu.Unlock()
}

// onFailover acts on the monitor's changes, on its goroutine.
func (ph *poolHooks) onFailover(c failover.Change) {
	switch c.Kind {
	case failover.WriterChanged:
		if c.OldAddr != "" && c.OldAddr != c.NewAddr {
			ph.cut(c.OldAddr, &failover.CutError{OldWriter: c.OldWriter, NewWriter: c.NewWriter, Addr: c.OldAddr})
		}
	case failover.InstancesLeft:
		for i, addr := range c.Gone {
			ph.cut(addr, &failover.CutError{Left: c.GoneIDs[i], Addr: addr})
		}
	}
}

// cut closes every connection of the pool to addr: their next read or
// write fails at once with err (nothing is sent), idle ones are closed
// now, and the next Acquire of one destroys it.
func (ph *poolHooks) cut(addr string, err *failover.CutError) {
	ph.evictHost(addr)
	fo := ph.fo
	fo.mu.Lock()
	fo.cuts = append(fo.cuts, cutRecord{addr: addr, at: time.Now(), err: err})
	if len(fo.cuts) > maxCutRecords {
		fo.cuts = append(fo.cuts[:0:0], fo.cuts[len(fo.cuts)-maxCutRecords:]...)
	}
	var hit []*attempt
	for a := range fo.live {
		if d := a.dialed.Load(); d != nil && *d == addr {
			hit = append(hit, a)
		}
	}
	fo.mu.Unlock()
	for _, a := range hit {
		a.abort(err)
	}
	if pool := ph.attached.Load(); pool != nil {
		sweepIdle(pool, addr)
	}
}

// sweepIdle closes the pool's idle connections to addr.
func sweepIdle(pool *pgxpool.Pool, addr string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, c := range pool.AcquireAllIdle(ctx) {
		if pc := c.Conn().PgConn(); pc.Conn().RemoteAddr().String() == addr {
			cctx, ccancel := context.WithTimeout(ctx, 100*time.Millisecond)
			_ = c.Conn().Close(cctx) // the socket is cut already: fails fast
			ccancel()
		}
		c.Release() // a closed connection is destroyed
	}
}

// abort cuts the connection: its socket's deadlines are set in the past,
// so a blocked read or write returns at once and every later one fails
// before sending anything, with err as the cause.
func (a *attempt) abort(err *failover.CutError) {
	e := *err
	if !a.cut.CompareAndSwap(nil, &e) {
		return
	}
	past := time.Unix(1, 0)
	a.clamp.Store(past.UnixNano())
	if wc := a.sock.Load(); wc != nil {
		_ = wc.Conn.SetDeadline(past) // the socket itself: during the handshake too
	}
}

// cutErr returns the error of an I/O on a cut connection, or err.
func (a *attempt) cutErr(err error) error {
	if ce := a.cut.Load(); ce != nil && (errors.Is(err, os.ErrDeadlineExceeded) || isTimeout(err)) {
		e := *ce
		e.Err = err
		return &e
	}
	return err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// cutFlag is attempt's cut state.
type cutFlag = atomic.Pointer[failover.CutError]

// Failover returns the writer-failover monitor of pool's cluster, or nil
// when WithFailover is off or pool was not built from a config this
// factory configured. The factory learns which pool a config became when
// Start (and so NewPool) makes the pool's first connection: for a pool
// built with pgxpool.NewWithConfig after Configure, call Start first.
func (f *Factory) Failover(pool *pgxpool.Pool) *failover.Monitor {
	if f == nil || pool == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ph := range f.pools {
		if ph.fo != nil && ph.attached.Load() == pool {
			return ph.fo.m
		}
	}
	return nil
}
