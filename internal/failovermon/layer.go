package failovermon

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/internal/compose"
	"github.com/holdfast-db/holdfast/internal/topology"
)

// This file is the writer-failover layer of a pool (holdfast's
// WithFailover): the engine keeps one Monitor per cluster, shared by the
// pools on it; each pool's Layer routes by the monitor's snapshot, learns
// of the pool's connections through its hooks (compose.Layer) and acts on
// the monitor's changes. It stands down while a blue/green switchover
// routes the pool (compose.Precedence).
//
//	BeforeConnect  by the writer endpoint: held while the writer is down
//	               and no other is known (Monitor.Hold)
//	Route          by the writer endpoint, each dial (the connector's
//	               retries too): held while the writer is down, then to
//	               the new writer's address while its DNS lags (TLS still
//	               verifies the endpoint name)
//	Validate       by the writer endpoint: a server that is not the writer
//	               (in hot standby, or a reader of the topology) is refused,
//	               and the attempt retried — to the writer
//	PgError        57P01/57P02/57P03, and 25006 by the writer endpoint, wake
//	               the monitor; a 25006 from a standby or read-only server
//	               closes the connection
//	PrepareConn    a connection to a writer that is down is destroyed (lazy:
//	               only while the writer is down)
//	Failed         network errors and refused dials wake the monitor (a
//	               reader pool's too: the probes judge the readers)
//	Dialed/Closed  the pool's connections, from their dial on (reader
//	               routing's counts); on a new writer, every connection to
//	               the old one is cut (failover.CutError, through the
//	               eviction layer's compose.Composition.Cut), handshakes
//	               included, and idle ones closed at once

// Layer is one pool's failover layer, on its cluster's Monitor. Build it
// with NewLayer; Leave ends it with its pool.
type Layer struct {
	m *Monitor
	// writer: the pool is routed as a pool on the writer endpoint — its
	// host is one, or an instance endpoint with failover.FollowWriter
	// (follow).
	writer bool
	follow bool
	comp   *compose.Composition // the pool's: its pool, and the events to the other layers

	// A pool on a name of your own that Config.Aliases does not list:
	// the first 25006 from a standby by it logs a hint (it may be a name
	// for the writer endpoint, which holdfast cannot see).
	custom bool
	host   string
	log    *slog.Logger
	hinted atomic.Bool

	rd *readerRouting // reader routing: a pool on the reader endpoint (readers.go)
	// region is the Region a pool on a Region's cluster endpoint names
	// (topology.RegionOf): on an Aurora Global Database, while the writer
	// is in another Region, the endpoint is inactive (it leads to a
	// read-only instance); the pool is then a reader pool of its Region,
	// or, with across, follows the writer there (failover.FollowWriter).
	region string
	across bool
	// pinned: a pool on an instance endpoint kept on its instance
	// (failover.Pinned), whatever the instance's role.
	pinned bool

	mu   sync.Mutex
	live map[compose.Conn]struct{} // the pool's connections, from their dial on (reader routing counts them)
	left bool                      // the pool closed: changes are ignored
}

// ClusterKey is the identity of the cluster that a pool on endpoint ep
// (an alias already replaced by its endpoint) belongs to, as far as names
// tell: the pools of one cluster share its monitor, and no two clusters
// ever share one. The writer and reader endpoints of a cluster name it
// (its name, the domain of its instance endpoints, the port): two clusters
// in one account and region share the domain and differ by name. Any
// other host (an instance or custom endpoint, an IP address or a name of
// your own with InstanceTemplate) names no cluster: its pools get a
// monitor of their own, keyed by the host itself.
func ClusterKey(ep, tmpl string, port uint16) string {
	p := strconv.Itoa(int(port))
	if name, domain := topology.ClusterName(ep); name != "" {
		return "cluster " + name + "." + domain + " " + tmpl + ":" + p
	}
	return "host " + topology.NormHost(ep) + " " + tmpl + ":" + p
}

// RoutedKind reports whether failover routing applies to a pool on
// endpoint ep under c, and why not when it does not: an RDS Proxy follows
// the writer itself, and an Aurora global writer endpoint names no
// Region's instance endpoints: it is routed only when
// c.Global.Regions names some.
func RoutedKind(ep string, c failover.Config) (bool, string) {
	switch topology.KindOf(topology.NormHost(ep)) {
	case topology.KindProxy:
		return false, "failover: an RDS Proxy endpoint follows the cluster's writer itself; failover routing is off for this pool (holdfast's retries still apply)"
	case topology.KindGlobal:
		if len(c.Global.Regions) == 0 {
			return false, "failover: an Aurora global database writer endpoint names no Region's instance endpoints; failover routing is off for this pool (holdfast's retries still apply): set failover.Config.Global.Regions to each Region's cluster endpoint to route it across Regions"
		}
	}
	return true, ""
}

// NewLayer returns the failover layer of a pool of cc on m, its cluster's
// monitor: ep is cc's host with an alias replaced by its endpoint (what
// RoutedKind accepted), mode what a pool on an instance endpoint does (the
// pool's PoolInstanceMode, else Config.InstancePools), readers the
// factory's reader routing, comp the pool's composition, log the pool's
// logger. It watches m from now on: Leave ends it with its pool.
func NewLayer(m *Monitor, comp *compose.Composition, cc *pgx.ConnConfig, ep string, mode failover.InstanceMode, readers failover.ReaderConfig, log *slog.Logger) *Layer {
	fo := &Layer{m: m, comp: comp, live: map[compose.Conn]struct{}{}, host: cc.Host, log: log}
	fo.writer = IsWriterEndpoint(ep)
	fo.custom = ep == cc.Host && !topology.IsIP(cc.Host) && !isSocket(cc.Host) &&
		topology.InstanceDomain([]string{topology.NormHost(cc.Host)}) == ""
	// An instance endpoint (or an IP address, or a name of your own) with
	// FollowWriter is routed as the writer endpoint, but its DNS is not
	// checked against the writer: it names one instance, never the writer
	// of the moment, so its dials by a reader's address are what Route
	// sends to the writer.
	fo.follow = !fo.writer && mode == failover.FollowWriter && !isSocket(cc.Host) &&
		topology.KindOf(topology.NormHost(ep)) == topology.KindInstance
	host := ""
	if fo.writer {
		host = cc.Host // the monitor checks its DNS against the writer
	}
	fo.writer = fo.writer || fo.follow
	fo.pinned = !fo.writer && topology.KindOf(topology.NormHost(ep)) == topology.KindInstance
	if !fo.writer && !isSocket(cc.Host) && topology.KindOf(topology.NormHost(ep)) == topology.KindReaderCluster &&
		readers.Strategy != failover.ByDNS {
		fo.rd = newReaderRouting(readers)
		fo.rd.region = topology.RegionOf(ep) // on a global cluster: its Region's readers only
	}
	if topology.KindOf(topology.NormHost(ep)) == topology.KindWriterCluster {
		fo.region, fo.across = topology.RegionOf(ep), mode == failover.FollowWriter
	}
	for _, fb := range cc.Fallbacks {
		if fb.Host != cc.Host {
			fo.writer, fo.follow, host, fo.rd, fo.region = false, false, "", nil, "" // several hosts: pgx chooses among them
		}
	}
	if fo.rd != nil {
		fo.m.ServeReaders(1) // its readers are pinged each HeartbeatInterval (Leave counts it out)
	}
	fo.m.Watch(host, fo.onChange)
	return fo
}

// isSocket reports whether host is a Unix socket directory.
func isSocket(host string) bool { return len(host) > 0 && host[0] == '/' }

// Readers reports whether the layer routes a reader pool (the cluster's
// reader endpoint, balanced over the topology's readers).
func (fo *Layer) Readers() bool { return fo.rd != nil }

// Pinned reports whether the pool is on an instance endpoint and kept on
// its instance (failover.Pinned), whatever the instance's role: not a
// pool meant for the writer.
func (fo *Layer) Pinned() bool { return fo.pinned }

// Keeping reports whether the layer keeps the pool on its instance now,
// whatever the instance's role: a pinned pool (Pinned) while the monitor
// follows the cluster's topology (it knows the writer, or holds for one),
// which tells, and cuts, when the instance stops being the writer. While
// the cluster publishes no topology (a name of your own on a server with
// none), failover routing is off and the pool is kept on nothing: the
// outage layer checks its servers' role as it would without WithFailover
// (a demoted primary is left). One atomic load.
func (fo *Layer) Keeping() bool {
	if !fo.pinned {
		return false
	}
	s := fo.m.Snapshot()
	return !s.Off && (s.Writer != "" || s.Down)
}

// Monitor returns the cluster's monitor the layer routes by.
func (fo *Layer) Monitor() *Monitor { return fo.m }

// Layer returns the layer's part of the pool's hooks. It stands down
// while a blue/green switchover routes the pool (compose.Precedence: a
// switchover moves the writer on purpose), and so does the monitor.
func (fo *Layer) Layer() compose.Layer {
	l := compose.Layer{
		BeforeConnect:  fo.hold,
		PrepareConn:    fo.prepareConn,
		Route:          fo.route,
		Dialed:         fo.dialed,
		Validate:       fo.validate,
		PgError:        fo.pgError,
		Failed:         fo.failed,
		Closed:         fo.closed,
		Routing:        fo.routing,
		StandDownWhile: fo.m.StandDownWhile,
	}
	if fo.rd != nil {
		// A reader pool's connections to a writer that went down (with
		// ReaderConfig.Hold false) are cut by the failover that follows;
		// its Acquire pays for no check of its own.
		l.PrepareConn = nil
	} else {
		// Lazy: it runs only while the writer is down.
		l.Arm = fo.m.WatchDown
	}
	return l
}

// routing reports whether the layer routes the pool by its cluster's
// topology now: the pool is routed (by the writer endpoint, or a reader
// pool) and the monitor knows the writer or holds for one. The outage
// layer stands down meanwhile (compose.Precedence): the topology knows
// where a new writer is. One atomic load.
func (fo *Layer) routing() bool {
	if !fo.writer && fo.rd == nil {
		return false
	}
	s := fo.m.Snapshot()
	return !s.Off && (s.Writer != "" || s.Down)
}

// hold is the layer's BeforeConnect.
func (fo *Layer) hold(ctx context.Context, c compose.Conn, cc *pgx.ConnConfig, next compose.ConnectFunc) error {
	fo.m.Start() // with the pool's first connection (idempotent)
	if fo.writer && !fo.reading(fo.m.Snapshot()) {
		if err := fo.m.Hold(ctx, cc.Host); err != nil {
			return err
		}
		if err := fo.holdHome(ctx, cc.Host); err != nil {
			return err
		}
	}
	return next(ctx, c, cc)
}

// prepareConn destroys a connection to a writer that stopped answering: a
// new connection is held until one is known. Lazy (compose.Layer.Arm): it
// runs only while the monitor finds the writer down.
func (fo *Layer) prepareConn(_ context.Context, c *pgx.Conn) (bool, error) {
	if s := fo.m.Snapshot(); s.Down && !fo.reading(s) && c.PgConn().Conn().RemoteAddr().String() == s.DownAddr {
		return false, nil
	}
	return true, nil
}

// route returns where one dial of a connect by the pool's host goes — the
// first and each retry: held while the writer is down and no other is
// known (BeforeConnect holds only the connect's start; a writer can go
// down while the connector retries its dials), then to the writer's
// address while the writer endpoint's DNS lags a failover, or when the
// address it gave is one of the topology's readers (a client-side cache
// older than the monitor's), and always for a pool on an instance endpoint
// with FollowWriter (once the writer is known); else addr.
func (fo *Layer) route(ctx context.Context, c compose.Conn, host, addr string, _ bool) (string, error) {
	if fo.rd != nil {
		return fo.routeReader(ctx, c, host, addr)
	}
	if !fo.writer || fo.reading(fo.m.Snapshot()) {
		return addr, nil // (a pool on an inactive endpoint: a reader pool of its Region, not held)
	}
	if err := fo.m.Hold(ctx, host); err != nil {
		return "", err
	}
	if err := fo.holdHome(ctx, host); err != nil {
		return "", err
	}
	s := fo.m.Snapshot()
	if fo.outOfHome(s) == failover.OutOfHomeReadOnly {
		if a := fo.homeReader(s); a != "" {
			return a, nil
		}
		return "", &failover.WriterRegionError{Host: host, Region: fo.m.cfg.Global.HomeRegion, WriterRegion: s.WriterRegion, Writer: s.Writer, OutOfHome: true}
	}
	if fo.inactive(s) {
		if fo.across && s.WriterAddr != "" {
			return s.WriterAddr, nil
		}
		return addr, nil // a reader pool of its Region: the endpoint's own instance
	}
	if s.WriterAddr != "" && (s.Redirect || s.Readers[addr] || fo.follow) {
		return s.WriterAddr, nil // FollowWriter: the instance's address is the writer's only while it is the writer
	}
	return addr, nil
}

// inactive reports whether the pool is on a secondary Region's cluster
// endpoint of an Aurora Global Database: the writer is in another Region
// (s). One snapshot's fields: no lock, no allocation.
func (fo *Layer) inactive(s *Snapshot) bool {
	return fo.region != "" && s.Global && s.WriterRegion != "" && s.WriterRegion != fo.region
}

// outOfHome returns the out-of-home mode in force for the pool now: the
// pool is meant for writes (on the global writer endpoint, or following
// the writer across Regions), GlobalConfig.HomeRegion is set and the
// writer is known outside it; OutOfHomeFollow otherwise. One snapshot's
// fields and the immutable config: no lock, no allocation.
func (fo *Layer) outOfHome(s *Snapshot) failover.OutOfHomeMode {
	g := &fo.m.cfg.Global
	if !fo.writer || (fo.region != "" && !fo.across) || g.HomeRegion == "" || !s.Global ||
		s.WriterRegion == "" || s.WriterRegion == g.HomeRegion {
		return failover.OutOfHomeFollow
	}
	return g.OutOfHome
}

// holdHome waits while the pool's out-of-home mode is OutOfHomeHold, at
// most HoldTimeout and ctx: then a *failover.HoldError.
func (fo *Layer) holdHome(ctx context.Context, host string) error {
	s := fo.m.Snapshot()
	if fo.outOfHome(s) != failover.OutOfHomeHold {
		return nil
	}
	start := time.Now()
	t := time.NewTimer(fo.m.cfg.HoldTimeout)
	defer t.Stop()
	for fo.outOfHome(s) == failover.OutOfHomeHold {
		select {
		case <-s.Changed:
			s = fo.m.Snapshot()
		case <-ctx.Done():
			return &failover.HoldError{Host: host, Waited: time.Since(start), Err: ctx.Err()}
		case <-t.C:
			return &failover.HoldError{Host: host, Waited: time.Since(start), Err: context.DeadlineExceeded}
		}
	}
	return nil
}

// homeReader returns the home Region's reader with the least visibility
// lag (within Readers.MaxLag, when set) that is not down, "" when none.
func (fo *Layer) homeReader(s *Snapshot) string {
	home, maxLag := fo.m.cfg.Global.HomeRegion, fo.m.cfg.Readers.MaxLag
	best, bestLag := "", time.Duration(0)
	for a := range s.Readers {
		if s.Regions[a] != home || s.ReadersDown[a] || a == s.WriterAddr {
			continue
		}
		lag := s.Lag[a]
		if maxLag > 0 && lag > maxLag {
			continue
		}
		if best == "" || lag < bestLag || (lag == bestLag && a < best) {
			best, bestLag = a, lag
		}
	}
	return best
}

// reading reports whether the pool, on a writer endpoint, is a reader
// pool of its Region now: on a secondary Region's inactive cluster
// endpoint, not following the writer across Regions. It is not held while
// the writer is down.
func (fo *Layer) reading(s *Snapshot) bool { return !fo.across && fo.inactive(s) }

// Inactive reports whether the pool is on a secondary Region's inactive
// cluster endpoint now, and it does not follow the writer across Regions:
// a reader pool of its Region, where writes fail.
func (fo *Layer) Inactive() bool { return !fo.across && fo.inactive(fo.m.Snapshot()) }

// InactiveWrite returns err, a write's failure on one of the pool's
// connections, as a *failover.WriterRegionError when it is a 25006 and
// the pool is on a secondary Region's inactive cluster endpoint
// (Inactive) or read-only out of home; nil otherwise. On the failure
// path only.
func (fo *Layer) InactiveWrite(err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "25006" {
		return nil
	}
	s := fo.m.Snapshot()
	if fo.outOfHome(s) == failover.OutOfHomeReadOnly {
		return &failover.WriterRegionError{Host: fo.host, Region: fo.m.cfg.Global.HomeRegion, WriterRegion: s.WriterRegion, Writer: s.Writer, OutOfHome: true, Err: err}
	}
	if fo.across || !fo.inactive(s) {
		return nil
	}
	return &failover.WriterRegionError{Host: fo.host, Region: fo.region, WriterRegion: s.WriterRegion, Writer: s.Writer, Err: err}
}

// failed wakes the monitor: a refused connect or a broken connection may
// be a failover.
func (fo *Layer) failed(string, bool) { fo.m.Trouble() }

// validate refuses a connection by the writer endpoint that reached a
// server that is not the writer.
func (fo *Layer) validate(_ context.Context, _ compose.Conn, host string, pc *pgconn.PgConn) error {
	if !fo.writer {
		return nil
	}
	addr := pc.Conn().RemoteAddr().String()
	why := ""
	switch s := fo.m.Snapshot(); {
	case fo.inactive(s) && !fo.across:
		return nil // a reader pool of its Region while the writer is elsewhere
	case fo.outOfHome(s) == failover.OutOfHomeReadOnly:
		return nil // read-only on the home readers while the writer is away
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

// pgError wakes the monitor on the server errors of a failover. It closes
// a connection by the writer endpoint that answered 25006 from a server in
// hot standby or read-only by default (not a transaction the application
// made read-only itself).
func (fo *Layer) pgError(pc *pgconn.PgConn, pe *pgconn.PgError) bool {
	switch pe.Code {
	case "57P01", "57P02", "57P03":
		fo.m.Trouble()
	case "25006":
		if s := fo.m.Snapshot(); fo.writer && ((!fo.across && fo.inactive(s)) || fo.outOfHome(s) == failover.OutOfHomeReadOnly) {
			return true // a write through an inactive endpoint, or a pool read-only out of home: no failover to look for, the connection reads on
		}
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

// dialed keeps a connection of the pool from its dial on, for reader
// routing's counts. (A cut reaches it through the eviction layer, which
// follows every connection from its dial on: compose.Composition.Cut.)
func (fo *Layer) dialed(c compose.Conn, _ string, _ time.Time) {
	fo.mu.Lock()
	fo.live[c] = struct{}{}
	if fo.rd != nil {
		delete(fo.rd.pending, c)
	}
	fo.mu.Unlock()
}

// closed forgets a connection.
func (fo *Layer) closed(c compose.Conn) {
	fo.mu.Lock()
	delete(fo.live, c)
	if fo.rd != nil {
		delete(fo.rd.pending, c)
	}
	fo.mu.Unlock()
}

// onChange acts on the monitor's changes, on its goroutine.
func (fo *Layer) onChange(c Change) {
	switch c.Kind {
	case WriterChanged:
		if c.OldAddr != "" && c.OldAddr != c.NewAddr {
			fo.cut(c.OldAddr, &failover.CutError{OldWriter: c.OldWriter, NewWriter: c.NewWriter, Addr: c.OldAddr})
		}
		fo.backHome(c)
	case InstancesLeft:
		for i, addr := range c.Gone {
			fo.cut(addr, &failover.CutError{Left: c.GoneIDs[i], Addr: addr})
		}
	case ReadersDown:
		for i, addr := range c.Gone {
			fo.cut(addr, &failover.CutError{Down: c.GoneIDs[i], Why: c.Why[i], Addr: addr})
		}
	case ReadersLagging:
		if fo.rd != nil {
			fo.retire(c.Gone)
		}
	case ReadersJoined, ReadersBack:
		if fo.rd != nil {
			fo.rebalance()
		}
	}
}

// backHome cuts, when the writer came back into the home Region, the
// connections a pool read-only out of home (OutOfHomeReadOnly) holds on
// the home readers: its new ones go to the writer.
func (fo *Layer) backHome(c Change) {
	g := &fo.m.cfg.Global
	s := fo.m.Snapshot()
	if g.OutOfHome != failover.OutOfHomeReadOnly || g.HomeRegion == "" || !fo.writer || (fo.region != "" && !fo.across) ||
		s.WriterRegion != g.HomeRegion || s.Regions[c.OldAddr] == g.HomeRegion {
		return
	}
	for a := range s.Readers {
		if s.Regions[a] == g.HomeRegion {
			fo.cut(a, &failover.CutError{OldWriter: c.OldWriter, NewWriter: c.NewWriter, Addr: a})
		}
	}
}

// cut closes every connection of the pool to addr
// (compose.Composition.Cut, the eviction layer's): their next read or
// write fails at once with err (nothing is sent), a dial that crossed the
// cut too, idle ones are closed now, and the next Acquire of one
// destroys it.
func (fo *Layer) cut(addr string, err *failover.CutError) {
	fo.mu.Lock()
	left := fo.left
	fo.mu.Unlock()
	if left {
		fo.comp.Gone(addr)
		return
	}
	fo.comp.Cut(addr, cutWrap(err))
}

// cutWrap is the abortion of a cut: the I/O error it causes becomes a
// copy of err wrapping it.
func cutWrap(err *failover.CutError) func(error) error {
	return func(cause error) error {
		e := *err
		e.Err = cause
		return &e
	}
}

// Leave ends the layer with its pool: changes are ignored from now on
// (the engine closes the monitor with the last pool of the cluster).
func (fo *Layer) Leave() {
	fo.mu.Lock()
	was := fo.left
	fo.left = true
	fo.mu.Unlock()
	if !was && fo.rd != nil {
		fo.m.ServeReaders(-1)
	}
}
