// Package failovermon is the engine of package failover: the monitor of
// one cluster's topology and writer (monitor.go), which the engine
// (internal/conn) shares between the pools on the cluster; the failover
// and reader layer of each pool, which routes it by the monitor
// (layer.go, readers.go); and failover.Config's validation, defaults and
// aliases (config.go). Package failover holds what users touch: Config,
// Status, Event, the errors, Rule and the Monitor interface.
package failovermon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/internal/cfgerr"
	"github.com/holdfast-db/holdfast/internal/topology"
)

// Monitor watches one cluster's topology and publishes where its writer
// is. It runs one goroutine, started by Start and joined by Close, which
// also runs the probes of a failover on goroutines it joins within each
// step. Pools read its routing with one atomic load (Snapshot).
type Monitor struct {
	cfg       failover.Config
	monConfig *pgx.ConnConfig
	connHook  func(context.Context, *pgx.ConnConfig) error
	lookup    func(context.Context, string) ([]string, error)
	template  string // "?.domain", the first label replaced by a server id
	port      uint16 // the instances' port
	// regions are, for an Aurora Global Database, each Region's instance
	// template ("?.domain"): derived from the pool's endpoint (its own
	// Region's) and from Config.Global.Regions. A Region without one has
	// instances that cannot be named: they are not probed or routed to.
	regions map[string]string
	peer    string // the cluster's other cluster endpoint (reader ↔ writer), or ""
	// scope is where the cluster's instances may lie: the pool's host, its
	// endpoint (after Config.Aliases) and peer, their account and Region
	// domain, and the template's domain. A topology row naming a host
	// outside it is dropped: never resolved, dialed, routed to or given a
	// password or token.
	scope topology.Scope

	snap        atomic.Pointer[Snapshot]
	poke        chan struct{}
	readerPools atomic.Int32 // pools with reader routing (ServeReaders): readers pinged each step
	lastChange  atomic.Int64 // unix nanos of the last event other than a suspicion

	mu        sync.Mutex
	listeners []func(Change)
	downWatch []func(down bool) // WatchDown
	standBy   []func() bool     // StandDownWhile: a blue/green switchover routes a pool of the cluster
	idleFns   []func() bool     // IdleWhile: a pool of the cluster holds no connection
	writers   map[string]bool   // host names of the writer endpoint(s) whose DNS is checked
	status    failover.Status
	statusErr error         // the error behind status.Error (guarded by mu)
	statusCh  chan struct{} // closed when status changes (Changed)
	closed    bool
	cancel    context.CancelFunc
	startOnce sync.Once
	done      chan struct{}

	// The monitor goroutine's own state.
	engine    topology.Engine
	conn      *pgx.Conn                     // to the writer (else the pool's host, at first)
	connID    string                        // the server id conn reaches, once known
	probes    map[string]*pgx.Conn          // by server id: the probes of a failover, and the readers' health pings
	down      map[string]string             // readers found down, by server id: what their probe saw
	guards    map[*pgx.Conn]*topology.Guard // abandon a connection at once (closeConn)
	dialFails map[string]dialFail           // hosts whose last dial failed (guarded by mu)
	instances map[string]instance           // by server id
	writer    string                        // server id
	fastUntil time.Time
	refreshed time.Time
	offUntil  time.Time // the topology cannot be read (no function, no grant): look again then
	stoodDown bool      // a switchover is under way: no decision until it ends (standDown)
	resting   bool      // every pool of the cluster is idle: no connection held (rest)
	warned    map[string]bool
	outside   map[string]bool // hosts of rows outside the scope, logged once (at most topology.MaxRows)
	// A global cluster's (EngineGlobal): the secondary Regions' last
	// rpo_lag_in_msec, read on the writer at each heartbeat; and whether
	// the writer answered read-only since the last change of writer (a
	// switchover's first step: no data lost), not only stopped answering.
	rpo         map[string]time.Duration
	sawReadOnly bool
	awayWriter  string // the last writer named outside AccessibleRegions, said once (noteAway)
}

type instance struct {
	id, host, addr string
	region         string // a global cluster's: the instance's Region
	writer         bool
	lag            time.Duration // the topology's replica lag, when hasLag
	hasLag         bool
}

// Snapshot is the routing a Monitor publishes, immutable: replaced, never
// changed.
type Snapshot struct {
	Writer     string // the writer's server id; "" when unknown
	WriterAddr string // its "ip:port"
	// Redirect: the writer endpoint's DNS does not lead to WriterAddr
	// (yet): new connections by it go to WriterAddr.
	Redirect bool
	// Down: the writer stopped answering and no other is known yet: new
	// connections by the writer endpoint are held.
	Down     bool
	DownAddr string
	// Readers are the other instances' addresses: a connection by the
	// writer endpoint that reaches one is refused.
	Readers map[string]bool
	// Lag is the readers' replication lag by address, as the last
	// topology read reported it (absent: not reported).
	Lag map[string]time.Duration
	// ReadersDown are the addresses of the Readers that stopped
	// answering (a fresh connection refused, reset or timed out after
	// their probe failed): no new connection goes there.
	ReadersDown map[string]bool
	// Off: routing is off (the topology cannot be read).
	Off bool
	// Global: the cluster is an Aurora Global Database (EngineGlobal);
	// WriterRegion is the writer's Region, and Regions the Region of each
	// instance by address.
	Global       bool
	WriterRegion string
	Regions      map[string]string
	// Changed is closed when the snapshot is replaced.
	Changed chan struct{}
}

// Normal reports whether the snapshot routes nothing.
func (s *Snapshot) Normal() bool { return !s.Redirect && !s.Down }

// ChangeKind is what a Change reports.
type ChangeKind int

// The kinds of Change.
const (
	WriterDown     ChangeKind = iota + 1 // the writer stopped answering (OldAddr)
	WriterChanged                        // a new writer (OldWriter, OldAddr → NewWriter, NewAddr)
	InstancesLeft                        // instances left the topology (Gone)
	ReadersJoined                        // readers joined the topology (Joined)
	ReadersDown                          // readers stopped answering (Gone, GoneIDs, Why)
	ReadersBack                          // readers down answer again, or lagging ones caught up (Joined)
	ReadersLagging                       // readers lag beyond Readers.MaxLag (Gone, GoneIDs)
)

// Change is given to the listeners of a Monitor.
type Change struct {
	Kind                 ChangeKind
	OldWriter, NewWriter string
	OldAddr, NewAddr     string
	Gone                 []string // addresses
	GoneIDs              []string // their server ids, in the same order
	Joined               []string // addresses
	Why                  []string // ReadersDown: what each probe saw, in the order of Gone
}

// New returns a Monitor of the cluster that cc's host belongs to,
// not yet started. The monitor connects with a copy of cc (without
// target_session_attrs or tracer, application_name
// "holdfast-failover-monitor"), to the writer's instance endpoint once
// known, calling connHook (when not nil) before each connect, to set a
// fresh password for the host connected to. It resolves names through
// cc.LookupFunc (the system resolver when nil).
func New(cc *pgx.ConnConfig, c failover.Config, connHook func(context.Context, *pgx.ConnConfig) error) (*Monitor, error) {
	if cc == nil {
		return nil, &cfgerr.Error{Pkg: "failover", Field: "pgx.ConnConfig", Why: "nil: build the config with pgxpool.ParseConfig"}
	}
	c, err := WithDefaults(c)
	if err != nil {
		return nil, err
	}
	ep := Endpoint(c.Aliases, cc.Host)
	tmpl, port, err := TemplateFor(ep, cc.Port, c.InstanceTemplate)
	if err != nil {
		return nil, err
	}
	regions, err := RegionTemplates(c, ep, tmpl)
	if err != nil {
		return nil, err
	}
	domains := []string{tmpl}
	for _, t := range regions {
		domains = append(domains, t)
	}
	m := &Monitor{
		cfg: c, connHook: connHook, template: tmpl, port: port, peer: topology.PeerEndpoint(ep), regions: regions,
		scope:     topology.NewScope([]string{cc.Host, ep, topology.PeerEndpoint(ep)}, domains...),
		monConfig: topology.MonitorConfig(cc, "holdfast-failover-monitor", c.ConnectTimeout),
		lookup:    cc.LookupFunc,
		poke:      make(chan struct{}, 1),
		writers:   map[string]bool{},
		instances: map[string]instance{},
		probes:    map[string]*pgx.Conn{},
		down:      map[string]string{},
		guards:    map[*pgx.Conn]*topology.Guard{},
		dialFails: map[string]dialFail{},
		done:      make(chan struct{}),
		statusCh:  make(chan struct{}),
	}
	if m.lookup == nil {
		m.lookup = net.DefaultResolver.LookupHost
	}
	m.snap.Store(&Snapshot{Changed: make(chan struct{})})
	return m, nil
}

// TemplateFor returns the instance-endpoint template ("?.domain") and port
// of the cluster host belongs to: template when set, else derived from an
// RDS endpoint. It returns the key that the monitors of one cluster share.
func TemplateFor(host string, port uint16, template string) (string, uint16, error) {
	if template != "" {
		h, p, why := topology.ParseTemplate(template)
		if why != "" {
			return "", 0, &cfgerr.Error{Pkg: "failover", Field: "Config.InstanceTemplate", Why: why}
		}
		if p == 0 {
			p = port
		}
		return h, p, nil
	}
	if topology.KindOf(topology.NormHost(host)) == topology.KindGlobal {
		return "", port, nil // each Region's: RegionTemplates
	}
	d := topology.InstanceDomain([]string{topology.NormHost(host)})
	if d == "" {
		return "", 0, &cfgerr.Error{Pkg: "failover", Field: "Config.InstanceTemplate",
			Why: "the pool's host " + strconv.Quote(host) + " is not an RDS endpoint: set the instance endpoints' template, e.g. \"?.abc123.us-east-1.rds.amazonaws.com\""}
	}
	return "?." + d, port, nil
}

// IsWriterEndpoint reports whether host is an Aurora or RDS writer
// (cluster) endpoint, or an Aurora global writer endpoint.
func IsWriterEndpoint(host string) bool {
	k := topology.KindOf(topology.NormHost(host))
	return k == topology.KindWriterCluster || k == topology.KindGlobal
}

// RegionTemplates returns each Region's instance template ("?.domain",
// with the port when the entry has one) of a global cluster: from the
// pool's endpoint ep (its Region's, when it names one: tmpl) and from
// Config.Global.Regions (a Region's cluster, reader or instance endpoint,
// or a template). Validate checked the entries.
func RegionTemplates(c failover.Config, ep, tmpl string) (map[string]string, error) {
	out := map[string]string{}
	if r := topology.RegionOf(ep); r != "" && tmpl != "" {
		out[r] = tmpl
	}
	for region, v := range c.Global.Regions {
		t, err := regionTemplate(v)
		if err != nil {
			return nil, configError("Config.Global.Regions", fmt.Sprintf("%q: %v", region, err))
		}
		out[strings.ToLower(strings.TrimSpace(region))] = t
	}
	return out, nil
}

// regionTemplate returns the instance template of a Config.Global.Regions
// value: a template as given ("?.domain"), or derived from an RDS
// endpoint of the Region.
func regionTemplate(v string) (string, error) {
	if strings.Contains(v, "?") {
		h, _, why := topology.ParseTemplate(v)
		if why != "" {
			return "", errors.New(why)
		}
		return h, nil
	}
	h := topology.NormHost(v)
	if topology.KindOf(h) == topology.KindGlobal || topology.KindOf(h) == topology.KindProxy {
		return "", errors.New("want a Region's cluster endpoint or an instance template, e.g. \"orders.cluster-abc123.us-west-2.rds.amazonaws.com\" or \"?.abc123.us-west-2.rds.amazonaws.com\"")
	}
	d := topology.InstanceDomain([]string{h})
	if d == "" {
		return "", errors.New("not an RDS endpoint: give the Region's instance template, e.g. \"?.db.us-west-2.example.internal\"")
	}
	return "?." + d, nil
}

// Watch registers a listener of the monitor's changes, called on the
// monitor's goroutine; it must not block. writerHost, when not "", is a
// writer endpoint whose DNS the monitor checks against the writer.
func (m *Monitor) Watch(writerHost string, l func(Change)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l != nil {
		m.listeners = append(m.listeners, l)
	}
	if writerHost != "" {
		m.writers[topology.NormHost(writerHost)] = true
	}
}

// WatchDown calls f at once with whether the writer is down (Snapshot.Down),
// and again at each change of it, under the monitor's lock: f must not
// block (a layer's switch of its lazy PrepareConn).
func (m *Monitor) WatchDown(f func(down bool)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.downWatch = append(m.downWatch, f)
	f(m.snap.Load().Down)
}

// StandDownWhile makes the monitor stand down while active reports true:
// a blue/green switchover routes a pool of the cluster (holdfast's
// factory passes its pools' bluegreen.Router.Routing). A switchover moves
// the writer on purpose — blue turns read-only, green takes its names —
// which the monitor would otherwise take for a writer that went down.
// Meanwhile it takes no decision (holds, redirects, cuts nothing), and
// once no switchover routes any longer it forgets the cluster it knew and
// reads the topology afresh, by the pools' endpoint, as at its start. It
// polls active every HeartbeatInterval; active must be cheap and must not
// block.
func (m *Monitor) StandDownWhile(active func() bool) {
	if active == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.standBy = append(m.standBy, active)
}

// IdleWhile makes the monitor hold no connection while every function
// given reports true (holdfast.WithServerlessV2 passes, for each pool of
// the cluster, whether it holds no connection): an instance that pauses
// when it has no connection (Aurora Serverless v2 at 0 ACU) may then
// pause. Meanwhile the monitor closes its connection and its probes, and
// reads and decides nothing; the routing it knew stays. Once a pool holds
// a connection again it follows the cluster again, reading its topology
// at once. It polls idle every HeartbeatInterval; idle must be cheap and
// must not block.
func (m *Monitor) IdleWhile(idle func() bool) {
	if idle == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.idleFns = append(m.idleFns, idle)
}

// idle reports whether every pool of the cluster that said how is idle
// (IdleWhile); false when none did.
func (m *Monitor) idle() bool {
	m.mu.Lock()
	fns := slices.Clone(m.idleFns)
	m.mu.Unlock()
	for _, f := range fns {
		if !f() {
			return false
		}
	}
	return len(fns) > 0
}

// rest closes the monitor's connections while the cluster's pools are
// idle (IdleWhile); the routing it knew stays.
func (m *Monitor) rest() {
	m.resting = true
	m.closeProbes()
	if m.conn != nil {
		m.closeConn(m.conn)
		m.conn, m.connID = nil, ""
	}
	m.fastUntil = time.Time{}
	m.cfg.Logger.Debug("failover: every pool on the cluster is idle; the monitor holds no connection until one connects again",
		slog.String("server.address", m.monConfig.Host))
	m.setStatus(func(s *failover.Status) {
		if s.Off == "" {
			s.Off = "idle"
		}
	})
}

// unrest ends a rest: a pool connected again; the topology is read at
// the next connect.
func (m *Monitor) unrest() {
	m.resting = false
	m.refreshed = time.Time{}
	m.cfg.Logger.Debug("failover: a pool on the cluster connected again; the monitor follows it again",
		slog.String("server.address", m.monConfig.Host))
	m.setStatus(func(s *failover.Status) {
		if s.Off == "idle" {
			s.Off = ""
		}
	})
}

// switchover reports whether a switchover routes a pool of the cluster.
func (m *Monitor) switchover() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, active := range m.standBy {
		if active() {
			return true
		}
	}
	return false
}

// standDown stops following the cluster while a switchover routes its
// pools: probes and the monitor's connection closed, nothing held or
// redirected.
func (m *Monitor) standDown() {
	m.stoodDown = true
	m.closeProbes()
	if m.conn != nil {
		m.closeConn(m.conn)
		m.conn, m.connID = nil, ""
	}
	m.fastUntil = time.Time{}
	m.cfg.Logger.Info("failover: a blue/green switchover is under way; failover routing stands down until it ends",
		slog.String("server.address", m.monConfig.Host), slog.String("writer", m.writer))
	m.publish(func(s *Snapshot) { s.Down, s.DownAddr, s.Redirect = false, "", false })
	m.setStatus(func(s *failover.Status) { s.Off = "switchover" })
}

// standUp ends a stand-down: the switchover renamed the cluster's
// instances and moved its endpoints, so what the monitor knew is
// forgotten — the writer, the instances, the failing hosts — and the
// topology is read again by the pools' endpoint. A writer found so is
// adopted as at the start: nothing is cut.
func (m *Monitor) standUp() {
	m.stoodDown = false
	m.writer, m.instances, m.refreshed, m.offUntil, m.fastUntil = "", map[string]instance{}, time.Time{}, time.Time{}, time.Time{}
	clear(m.down)
	clear(m.outside) // the rows of the topology before the switchover
	m.mu.Lock()
	clear(m.dialFails)
	m.mu.Unlock()
	m.cfg.Logger.Info("failover: the switchover ended; reading the cluster's topology again",
		slog.String("server.address", m.monConfig.Host))
	m.publish(func(s *Snapshot) { *s = Snapshot{} })
	m.setStatus(func(s *failover.Status) { s.Off, s.Writer, s.WriterAddr, s.Error = "", "", "", "" })
}

// Snapshot returns the routing in force: one atomic load.
func (m *Monitor) Snapshot() *Snapshot { return m.snap.Load() }

// Trouble tells the monitor that a pool saw a sign of a failover (a
// network error, 57P01/57P02/57P03, 25006 on a connection meant for
// writes, a refused connect): it probes the cluster at once and every
// FastInterval for FastFor. It never blocks.
func (m *Monitor) Trouble() {
	select {
	case m.poke <- struct{}{}:
	default:
	}
}

// Start starts the monitor's goroutine (idempotent; nothing after Close).
func (m *Monitor) Start() {
	m.startOnce.Do(func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.closed {
			close(m.done)
			return
		}
		ctx, cancel := context.WithCancel(context.Background())
		m.cancel = cancel
		go func() {
			defer close(m.done)
			m.run(ctx)
		}()
	})
}

// Close stops the monitor and joins its goroutine, waiting at most
// ConnectTimeout (a dial function that ignores its context is left to end
// by itself), and releases held connects. Idempotent.
func (m *Monitor) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	cancel := m.cancel
	m.mu.Unlock()
	if cancel == nil {
		m.Start() // never started: Start closes done
	} else {
		cancel()
	}
	t := time.NewTimer(m.cfg.ConnectTimeout)
	defer t.Stop()
	select {
	case <-m.done:
	case <-t.C:
		m.cfg.Logger.Warn("failover: the monitor did not stop within ConnectTimeout; Close returns without it (a dial function that ignores its context?)")
	}
	m.publish(func(s *Snapshot) { s.Down, s.Redirect = false, false })
}

func (m *Monitor) run(ctx context.Context) {
	defer m.disconnectAll()
	for ctx.Err() == nil {
		m.step(ctx)
		interval := m.cfg.HeartbeatInterval
		if time.Now().Before(m.fastUntil) {
			interval = min(interval, m.cfg.FastInterval)
			if m.engine == topology.EngineGlobal && m.Snapshot().Down {
				// A global switchover or failover holds the pools' writes
				// until a promoted instance takes them: look for it four
				// times as often, only while they are held.
				interval = max(interval/globalDownDivisor, minGlobalDownInterval)
			}
		} else if len(m.probes) > 0 {
			m.closeSpareProbes() // trouble is over
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
		case <-m.poke:
			if !m.stoodDown && !m.resting { // a switchover's own trouble (57P01 at IN_PROGRESS) is not a failover
				m.goFast("a pool saw trouble")
			}
		case <-t.C:
		}
		t.Stop()
	}
}

// While a global cluster's writer is down (its pools' writes held), the
// probes run every FastInterval/globalDownDivisor, at least every
// minGlobalDownInterval apart.
const (
	globalDownDivisor     = 4
	minGlobalDownInterval = 10 * time.Millisecond
)

// goFast starts, or extends, fast polling.
func (m *Monitor) goFast(why string) {
	now := time.Now()
	if !now.Before(m.fastUntil) {
		m.event(EventSuspect, m.writer)
		m.cfg.Logger.Debug("failover: trouble; probing the cluster", slog.String("why", why), slog.String("writer", m.writer))
	}
	m.fastUntil = now.Add(m.cfg.FastFor)
}

// step is one round: heartbeat (or connect), topology when due, probes
// while fast, the routing.
func (m *Monitor) step(ctx context.Context) {
	switch sw := m.switchover(); {
	case sw && !m.stoodDown:
		m.standDown()
		return
	case sw:
		return
	case m.stoodDown:
		m.standUp()
	}
	switch idle := m.idle(); {
	case idle && !m.resting:
		m.rest()
		return
	case idle:
		return
	case m.resting:
		m.unrest()
	}
	if m.conn == nil && time.Now().Before(m.offUntil) {
		return // no topology to read here: nothing to follow, nothing to probe
	}
	if m.conn == nil {
		to := m.cfg.ConnectTimeout
		if m.fast() {
			to = m.cfg.FailureTimeout
		}
		if err := m.connectMain(ctx, to); err != nil {
			if ctx.Err() != nil {
				return
			}
			var off *offError
			if errors.As(err, &off) {
				m.routingOff(off)
				return
			}
			m.setStatus(func(s *failover.Status) { s.Error, m.statusErr = m.redact(err.Error()), err })
			if m.writer == "" && !errors.Is(err, errDialBackoff) {
				m.warnOnce("failover: the monitor cannot connect to read the topology; failover routing waits for it", err)
			}
			m.goFast("monitor connect failed") // and probe the others below
		} else if !m.offUntil.IsZero() {
			m.offUntil = time.Time{}
			m.setStatus(func(s *failover.Status) { s.Off, s.Error = "", "" })
			if m.Snapshot().Off {
				m.publish(func(s *Snapshot) { s.Off = false })
			}
			m.cfg.Logger.Info("failover: the cluster's topology can be read again; failover routing is on")
		}
	} else {
		pctx, cancel := context.WithTimeout(ctx, m.cfg.FailureTimeout)
		err := m.heartbeat(pctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			m.closeConn(m.conn)
			m.conn, m.connID = nil, ""
			m.goFast("heartbeat failed")
		}
	}
	if m.conn != nil && !m.fast() && time.Since(m.refreshed) >= m.refreshInterval() {
		// While fast, the probes read every instance, the writer too.
		if err := m.refresh(ctx); err != nil {
			var off *offError
			if errors.As(err, &off) {
				m.routingOff(off)
				return
			}
		}
	}
	if m.fast() {
		m.probeAll(ctx) // the readers too
	} else {
		m.pingReaders(ctx)
	}
	m.checkDNS(ctx)
}

func (m *Monitor) fast() bool { return time.Now().Before(m.fastUntil) }

// heartbeat pings the writer on the monitor's connection. On a global
// cluster it reads aurora_global_db_status() instead, in the same round
// trip: the secondaries' rpo_lag_in_msec (what a failover with data loss
// would lose, kept for its event) and whether the writer refuses writes
// (a switchover's first step), which starts the probes at once.
func (m *Monitor) heartbeat(ctx context.Context) error {
	if m.engine != topology.EngineGlobal {
		return m.conn.Ping(ctx)
	}
	lags, readOnly, err := topology.ReadGlobalStatus(ctx, m.conn)
	if err != nil {
		return err
	}
	if m.connID != m.writer || m.writer == "" {
		return nil
	}
	if readOnly {
		// The writer itself says it refuses writes: a global switchover's
		// first step. Connects are held from now on (rather than refused
		// and retried against it) until the probes find the writer that
		// takes writes, or this one again.
		m.sawReadOnly = true
		if !m.fast() {
			m.goFast("the writer refuses writes (a global switchover?)")
		}
		m.writerDown()
		return nil
	}
	if m.rpo == nil {
		m.rpo = map[string]time.Duration{}
	}
	for _, l := range lags {
		if l.Known && !l.Primary {
			m.rpo[l.Region] = l.RPO
		}
	}
	return nil
}

// connectMain connects the monitor's own connection: to the writer's
// instance endpoint when known, else to the pool's host — or, when that
// does not answer, to the cluster's other endpoint: a writer endpoint
// whose DNS still leads to a writer that is down (the service started, or
// its monitor lost its first connection, during a failover) leaves the
// reader endpoint to read the topology from.
func (m *Monitor) connectMain(ctx context.Context, timeout time.Duration) error {
	host := ""
	if w, ok := m.instances[m.writer]; ok {
		host = w.host
	}
	conn, err := m.dial(ctx, host, timeout)
	viaPeer := false
	if err != nil && host == "" && m.peer != "" && ctx.Err() == nil {
		if c, perr := m.dial(ctx, m.peer, timeout); perr == nil {
			conn, err, viaPeer = c, nil, true
		}
	}
	if err != nil {
		return err
	}
	m.conn, m.connID = conn, ""
	if m.engine == topology.EngineNone {
		qctx, cancel := context.WithTimeout(ctx, timeout)
		m.engine, err = topology.Detect(qctx, conn)
		cancel()
		if err != nil || m.engine == topology.EngineNone {
			m.closeConn(conn)
			m.conn = nil
			switch {
			case errors.Is(err, topology.ErrUntrusted):
				m.engine = topology.EngineNone // looked up again next time
				err = &offError{why: "untrusted", err: err}
			case err == nil:
				err = &offError{why: "no-topology", err: errNoTopology}
			}
			return err
		}
		if m.engine == topology.EngineAurora {
			if err := m.detectGlobal(ctx, conn, timeout); err != nil {
				return err
			}
		}
	}
	if err := m.refresh(ctx); err != nil { // adopts the writer the topology names, when the first
		return err
	}
	if viaPeer {
		// After the first read: the probes now find out whether that
		// writer answers, and hold or route as in any failover.
		m.goFast("the pool's endpoint does not answer")
	}
	return nil
}

// detectGlobal finds out whether the Aurora cluster is a Region of an
// Aurora Global Database (topology.DetectGlobal): the monitor then reads
// the global topology, every Region's instances. A server whose global
// functions are not owned by a superuser or rdsadmin turns routing off, as
// an untrusted aurora_replica_status() does; one that refuses the monitor
// the functions is followed as one cluster, with one WARN.
func (m *Monitor) detectGlobal(ctx context.Context, conn *pgx.Conn, timeout time.Duration) error {
	qctx, cancel := context.WithTimeout(ctx, timeout)
	global, err := topology.DetectGlobal(qctx, conn)
	cancel()
	switch {
	case errors.Is(err, topology.ErrUntrusted):
		m.closeConn(conn)
		m.conn, m.engine = nil, topology.EngineNone
		return &offError{why: "untrusted", err: err}
	case err != nil && unreadable(err):
		m.warnOnce("failover: the monitor's role cannot read the global cluster's status; it follows this Region's cluster only (check: GRANT EXECUTE ON FUNCTION aurora_global_db_instance_status(), aurora_global_db_status())", err)
		return nil
	case err != nil:
		m.closeConn(conn)
		m.conn, m.engine = nil, topology.EngineNone // detected again at the next connect
		return err
	case !global:
		return nil
	}
	m.engine = topology.EngineGlobal
	known := slices.Sorted(maps.Keys(m.regions))
	m.cfg.Logger.Info("failover: Aurora Global Database: following the writer across Regions by aurora_global_db_instance_status()",
		slog.String("server.address", m.monConfig.Host), slog.Any("regions_named", known))
	return nil
}

var errNoTopology = errors.New("failover: the server has neither aurora_replica_status() nor rds_tools.show_topology(): no topology to follow")

// offError is a topology that the monitor cannot read, and will not be
// able to read on its next try either: the server has no topology
// function, refuses the monitor's role the functions, or has functions of
// those names that a role other than a superuser or rdsadmin owns (a
// database owner's, not RDS's). The monitor turns routing off and looks
// again after RefreshInterval.
type offError struct {
	why string // Status.Off: "no-topology", "unreadable" or "untrusted"
	err error
}

func (e *offError) Error() string { return e.err.Error() }
func (e *offError) Unwrap() error { return e.err }

// unreadable reports whether a failed topology read will fail the same
// way until an administrator acts: a permission (42501), a function,
// table or schema that does not exist (42883, 42P01, 3F000), a function
// not owned by a superuser or rdsadmin (topology.ErrUntrusted).
func unreadable(err error) bool {
	if errors.Is(err, topology.ErrUntrusted) {
		return true
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Code {
	case "42501", "42883", "42P01", "3F000":
		return true
	}
	return false
}

// offWhy is Status.Off for a read that unreadable refused.
func offWhy(err error) string {
	if errors.Is(err, topology.ErrUntrusted) {
		return "untrusted"
	}
	return "unreadable"
}

// routingOff turns failover routing off until the topology can be read:
// no connection, no probe, until RefreshInterval has passed. It says why
// once at WARN (per reason and error text), with what to check, and in
// Status (Off, Error).
func (m *Monitor) routingOff(off *offError) {
	m.offUntil, m.fastUntil = time.Now().Add(m.cfg.RefreshInterval), time.Time{}
	msg, check := "failover: the cluster publishes no topology; failover routing is off until it does", ""
	if off.why == "untrusted" {
		msg = "failover: a function of the cluster's topology is not owned by a superuser or rdsadmin; its rows are not trusted, and failover routing is off until it is"
		check = "RDS's and Aurora's own functions are owned by rdsadmin: drop the function named in the error, which a database owner created"
	}
	if off.why == "unreadable" {
		msg, check = "failover: the monitor's role cannot read the cluster's topology; failover routing is off until it can", m.grantHint()
		var pe *pgconn.PgError
		if errors.As(off.err, &pe) && pe.Code != "42501" {
			msg = "failover: a function of the cluster's topology is missing; failover routing is off until it is there"
			check = "the server is an Aurora cluster or an RDS Multi-AZ DB cluster, and the function named in the error exists"
		}
	}
	text := m.redact(off.Error())
	if check != "" {
		text += " (check: " + check + ")"
	}
	m.setStatus(func(s *failover.Status) { s.Off, s.Error, m.statusErr = off.why, text, off })
	if !m.Snapshot().Off {
		m.publish(func(s *Snapshot) { s.Off = true })
	}
	if !m.Snapshot().Normal() {
		m.publish(func(s *Snapshot) { s.Down, s.DownAddr, s.Redirect = false, "", false }) // routing is off: nothing held or redirected
	}
	if m.warned == nil {
		m.warned = map[string]bool{}
	}
	if key := off.why + " " + text; !m.warned[key] && len(m.warned) < 16 {
		m.warned[key] = true
		attrs := []slog.Attr{slog.String("server.address", m.monConfig.Host), slog.String("error", m.redact(off.Error())),
			slog.Float64("retry_in_s", m.cfg.RefreshInterval.Seconds())}
		if check != "" {
			attrs = append(attrs, slog.String("check", check))
		}
		m.cfg.Logger.LogAttrs(context.Background(), slog.LevelWarn, msg, attrs...)
	}
}

// grantHint names what the monitor's role needs to read the topology.
func (m *Monitor) grantHint() string {
	role := pgx.Identifier{m.monConfig.User}.Sanitize()
	if m.engine == topology.EngineMultiAZ {
		return "GRANT USAGE ON SCHEMA rds_tools TO " + role + "; GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA rds_tools TO " + role
	}
	if m.engine == topology.EngineGlobal {
		return "GRANT EXECUTE ON FUNCTION aurora_global_db_instance_status(), aurora_global_db_status(), aurora_db_instance_identifier() TO " + role
	}
	return "GRANT EXECUTE ON FUNCTION aurora_replica_status(), aurora_db_instance_identifier() TO " + role
}

// dialFail is a host whose dials failed n times in a row: the next is not
// tried before next.
type dialFail struct {
	n    int
	next time.Time
}

// maxDialBackoff bounds the wait between two dials of a host that fails
// them: a writer that is down is tried about once a second (and its
// password or token fetched as often), not at every FastInterval.
const maxDialBackoff = time.Second

// errDialBackoff is the error of a dial skipped because the host's last
// dials failed.
var errDialBackoff = errors.New("failover: host not answering; next dial after a backoff")

// dial opens a monitor connection to host ("" = the pool's host). After a
// failed dial, the host's next is tried after FastInterval, doubling up to
// maxDialBackoff; until then dial fails at once.
func (m *Monitor) dial(ctx context.Context, host string, timeout time.Duration) (conn *pgx.Conn, err error) {
	m.mu.Lock()
	f, failing := m.dialFails[host]
	m.mu.Unlock()
	if failing && time.Now().Before(f.next) {
		return nil, errDialBackoff
	}
	defer func() { m.noteDial(host, err == nil || ctx.Err() != nil) }()
	cc := m.monConfig.Copy()
	if host != "" {
		if err := topology.Retarget(cc, host, m.port, m.scope); err != nil {
			return nil, err // (never: learn keeps only the instances in the scope)
		}
	}
	cc.ConnectTimeout = timeout
	guard := topology.Guarded(cc)
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if m.connHook != nil {
		if err := m.connHook(cctx, cc); err != nil {
			return nil, &hookError{err}
		}
	}
	conn, err = pgx.ConnectConfig(cctx, cc)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.guards[conn] = guard
	m.mu.Unlock()
	m.setStatus(func(s *failover.Status) { s.MonitorConnects++ })
	return conn, nil
}

// noteDial records the outcome of a dial of host: after a failure, the
// host's next dial is tried after FastInterval, doubling up to
// maxDialBackoff.
func (m *Monitor) noteDial(host string, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ok {
		delete(m.dialFails, host)
		return
	}
	f := m.dialFails[host]
	f.n++
	d := m.cfg.FastInterval
	for i := 1; i < f.n && d < maxDialBackoff; i++ {
		d *= 2
	}
	f.next = time.Now().Add(min(d, maxDialBackoff))
	m.dialFails[host] = f
}

// refresh reads the topology and the identity of the main connection's
// server. It returns an *offError when the server refuses the read in a
// way that the next read would meet too (routing is then off).
func (m *Monitor) refresh(ctx context.Context) error {
	qctx, cancel := context.WithTimeout(ctx, max(m.cfg.FailureTimeout, time.Second))
	defer cancel()
	res := m.read(qctx, m.conn)
	m.noteRead(res)
	if res.err != nil {
		if ctx.Err() != nil {
			return nil
		}
		m.closeConn(m.conn)
		m.conn, m.connID = nil, ""
		if unreadable(res.err) {
			return &offError{why: offWhy(res.err), err: res.err}
		}
		m.goFast("topology read failed")
		return nil
	}
	m.refreshed = time.Now()
	m.connID = res.self
	if res.awayWriter == "" {
		m.setStatus(func(s *failover.Status) { s.Error = "" }) // the topology was read: no error stands
	}
	m.learn(ctx, res.rows)
	if s := m.Snapshot(); m.engine == topology.EngineGlobal && m.writer == "" && res.writerRegion != "" && s.WriterRegion != res.writerRegion {
		// A writer in a Region whose instances cannot be named (or
		// reached): not adopted, but its Region is known, so that a pool
		// on another Region's cluster endpoint knows it is inactive.
		m.publish(func(s *Snapshot) { s.Global, s.WriterRegion = true, res.writerRegion })
	}
	if m.fast() {
		return nil // the probes decide
	}
	w := res.writerID()
	if m.engine == topology.EngineGlobal && res.writable && res.self != "" {
		// A global cluster's instance that takes writes is its writer:
		// every other instance of every Region is read-only, and a
		// promoted one takes writes before the status names it.
		w = res.self
	}
	switch {
	case w == "":
		return nil
	case m.writer == "" && res.self == w && !res.writable:
		// The first read, on a server that names itself the writer and
		// takes no writes: an old blue instance that DNS still names
		// after a switchover, a fenced writer. Not adopted: the pools'
		// endpoint is dialed again after a backoff (DNS moves on), and
		// the probes look for a writer that takes writes.
		m.closeConn(m.conn)
		m.conn, m.connID = nil, ""
		m.noteDial("", false)
		m.goFast("the writer the topology names takes no writes")
		return nil
	case m.writer == "":
		m.adopt(w) // the first topology read: nothing to move from
	case w != m.writer:
		// Another writer named between two heartbeats: the probes
		// confirm it (it says so and takes writes) before anything moves.
		m.goFast("the topology names another writer")
	}
	if res.self != w {
		m.closeConn(m.conn) // not on the writer: move there next step
		m.conn, m.connID = nil, ""
	}
	return nil
}

// readResult is what one server says.
type readResult struct {
	self     string
	writable bool
	rows     []topology.Row // those in the scope
	outside  []topology.Row // rows naming a host outside the scope: dropped
	cut      *topology.TooManyRowsError
	err      error
	// awayWriter: the rows name a writer in a Region outside
	// GlobalConfig.AccessibleRegions (awayRegion); its rows are dropped.
	awayWriter, awayRegion string
	// writerRegion: the Region of the writer the rows name, whether or not
	// its row is usable (a global cluster's); anyWriter its server id.
	writerRegion, anyWriter string
}

// writerID returns the writer the rows name: the newest when several do.
func (r readResult) writerID() string {
	id, at := "", time.Time{}
	for _, row := range r.rows {
		if row.Writer && (id == "" || row.Updated.After(at)) {
			id, at = row.ServerID, row.Updated
		}
	}
	return id
}

// confirmsWriter reports whether the server says it is the writer and is
// writable.
func (r readResult) confirmsWriter() bool {
	return r.err == nil && r.writable && r.self != "" && r.writerID() == r.self
}

// confirms reports whether res confirms its server as the writer: it
// says it is the writer and is writable — on a global cluster, it is
// writable: a promoted instance takes writes before the global status
// names it (Aurora updates it asynchronously), and no other instance of
// any Region takes writes.
func (m *Monitor) confirms(res readResult) bool {
	if m.engine == topology.EngineGlobal {
		return res.err == nil && res.writable && res.self != ""
	}
	return res.confirmsWriter()
}

// read reads what the server conn reaches says: its identity and the
// topology, the rows naming a host outside the scope set aside (they are
// never resolved, dialed, adopted as the writer or given a password). It
// runs on the probes' goroutines too: it logs nothing (noteRead does).
func (m *Monitor) read(ctx context.Context, conn *pgx.Conn) readResult {
	var res readResult
	res.self, res.writable, res.err = topology.Self(ctx, conn, m.engine)
	if res.err != nil {
		return res
	}
	rows, bad, err := topology.Read(ctx, conn, m.engine)
	if res.err = err; err != nil {
		return res
	}
	for _, e := range bad {
		errors.As(e, &res.cut)
	}
	for _, r := range rows {
		if r.Writer && r.Region != "" {
			res.writerRegion, res.anyWriter = r.Region, r.ServerID
		}
		if !m.accessible(r.Region) {
			if r.Writer {
				res.awayWriter, res.awayRegion = r.ServerID, r.Region
			}
			continue // a Region the service cannot reach (GlobalConfig.AccessibleRegions)
		}
		if host, _ := m.hostOf(r); !m.scope.Contains(host) {
			res.outside = append(res.outside, r)
			continue
		}
		res.rows = append(res.rows, r)
	}
	return res
}

// accessible reports whether region ("" outside a global cluster) may be
// reached: GlobalConfig.AccessibleRegions is empty or lists it.
func (m *Monitor) accessible(region string) bool {
	a := m.cfg.Global.AccessibleRegions
	return region == "" || len(a) == 0 || slices.Contains(a, region)
}

// noteAway says loudly, once per writer, that the topology names a writer
// in a Region outside GlobalConfig.AccessibleRegions: pools meant for
// writes are held meanwhile (no writer they can reach).
func (m *Monitor) noteAway(res readResult) {
	if res.awayWriter == "" {
		return
	}
	text := "the writer " + res.awayWriter + " is in " + res.awayRegion + ", outside AccessibleRegions"
	if m.Status().Error != text {
		m.setStatus(func(s *failover.Status) { s.Error = text })
	}
	if res.awayWriter == m.awayWriter {
		return
	}
	m.awayWriter = res.awayWriter
	m.cfg.Logger.Warn("failover: the global cluster's writer is in a Region outside failover.Config.Global.AccessibleRegions; pools meant for writes are held (HoldTimeout), then fail, until it moves back",
		slog.String("writer", res.awayWriter), slog.String("region", res.awayRegion),
		slog.Any("accessible_regions", m.cfg.Global.AccessibleRegions))
}

// hostOf returns the instance endpoint and port of a topology row: the
// row's own (RDS Multi-AZ DB clusters), else the template's with its
// server id.
func (m *Monitor) hostOf(r topology.Row) (string, uint16) {
	if r.Region != "" {
		t := m.regions[r.Region]
		if t == "" {
			return "", m.port // a Region whose names are unknown (noteRead)
		}
		return strings.Replace(t, "?", r.ServerID, 1), m.port
	}
	host := strings.Replace(m.template, "?", r.ServerID, 1)
	port := m.port
	if r.Endpoint != "" {
		host = topology.NormHost(r.Endpoint)
		if r.Port > 0 && r.Port <= 65535 {
			port = uint16(r.Port)
		}
	}
	return host, port
}

// noteRead logs, once each, the rows of res set aside for a host outside
// the scope (at most topology.MaxRows of them; the rest unnamed) and a
// read cut at topology.MaxRows rows. On the monitor's goroutine.
func (m *Monitor) noteRead(res readResult) {
	m.noteAway(res)
	if res.cut != nil && !m.warned["cut"] {
		if m.warned == nil {
			m.warned = map[string]bool{}
		}
		m.warned["cut"] = true
		m.cfg.Logger.Warn("failover: the cluster's topology has more rows than holdfast uses; the rest are ignored",
			slog.String("function", res.cut.Function), slog.Int("limit", res.cut.Limit), slog.Int("ignored", res.cut.Extra))
	}
	for _, r := range res.outside {
		host, port := m.hostOf(r)
		if m.outside == nil {
			m.outside = map[string]bool{}
		}
		if host == "" && r.Region != "" {
			key := "region " + r.Region
			if !m.outside[key] && len(m.outside) <= topology.MaxRows {
				m.outside[key] = true
				m.cfg.Logger.Warn("failover: the global cluster has instances in a Region whose instance endpoints holdfast cannot name; they are not probed or routed to (set failover.Config.Global.Regions for it to the Region's cluster endpoint)",
					slog.String("region", r.Region), slog.String("instance", r.ServerID), slog.Any("regions_named", slices.Sorted(maps.Keys(m.regions))))
			}
			continue
		}
		if m.outside[host] || len(m.outside) > topology.MaxRows {
			continue
		}
		m.outside[host] = true
		msg := "failover: topology row outside the cluster's domain ignored: its host is not connected to, routed to or given a password"
		if len(m.outside) > topology.MaxRows {
			msg = "failover: more topology rows outside the cluster's domain ignored; not logged further"
		}
		m.cfg.Logger.Warn(msg, slog.String("instance", topology.Truncate(r.ServerID, 64)),
			slog.String("endpoint", topology.Truncate(host, 128)), slog.Int("port", int(port)),
			slog.String("id", topology.Truncate(r.ResourceID, 64)), slog.String("domain", m.scope.String()))
	}
}

// learn updates the instances from topology rows and resolves their
// addresses; instances that left are reported.
func (m *Monitor) learn(ctx context.Context, rows []topology.Row) {
	if len(rows) == 0 {
		return
	}
	next := make(map[string]instance, len(rows))
	for _, r := range rows {
		host, port := m.hostOf(r)
		if !m.scope.Contains(host) {
			continue // (read set such rows aside already)
		}
		in := instance{id: r.ServerID, host: host, region: r.Region, writer: r.Writer, lag: r.Lag, hasLag: r.HasLag}
		if old, ok := m.instances[r.ServerID]; ok && old.host == host {
			in.addr = old.addr
		}
		if a := m.resolve(ctx, host, port); a != "" {
			in.addr = a
		}
		next[r.ServerID] = in
	}
	var gone, goneIDs []string
	for id, old := range m.instances {
		if _, ok := next[id]; !ok && old.addr != "" {
			gone, goneIDs = append(gone, old.addr), append(goneIDs, id)
		}
	}
	prev := m.instances
	m.instances = next
	hosts := map[string]bool{"": true, m.peer: true}
	for _, in := range next {
		hosts[in.host] = true
	}
	m.mu.Lock()
	maps.DeleteFunc(m.dialFails, func(h string, _ dialFail) bool { return !hosts[h] }) // hosts that left the topology
	m.mu.Unlock()
	if len(gone) > 0 {
		// The cut first, then the events and the line: whoever sees the
		// event finds the connections cut.
		m.notify(Change{Kind: InstancesLeft, Gone: gone, GoneIDs: goneIDs})
		for _, id := range goneIDs {
			m.emit(m.eventOf(EventLeft, id, prev[id].region))
		}
		m.cfg.Logger.Info("failover: instances left the cluster's topology; their connections are cut",
			slog.Any("instances", goneIDs), slog.Any("addrs", gone))
	}
	m.publishReaders()
}

// resolve returns host's first address as "ip:port", or "".
func (m *Monitor) resolve(ctx context.Context, host string, port uint16) string {
	lctx, cancel := context.WithTimeout(ctx, max(m.cfg.FailureTimeout, time.Second))
	addrs, err := m.lookup(lctx, host)
	cancel()
	if err != nil || len(addrs) == 0 {
		return ""
	}
	if _, _, err := net.SplitHostPort(addrs[0]); err == nil {
		return addrs[0]
	}
	return net.JoinHostPort(addrs[0], strconv.Itoa(int(port)))
}

// probe is one instance's probe in a round of probeAll or pingReaders:
// its probe connection (kept in m.probes between rounds; nil: none) and
// what it read (pingReaders: only whether it answered, res.err).
type probe struct {
	in   instance
	conn *pgx.Conn
	res  readResult
}

// eachProbe runs fn on every probe of a round, in parallel, at most
// topology.MaxConcurrent at once (each may log in), and returns when all
// have run.
func eachProbe(ps []*probe, fn func(p *probe)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, topology.MaxConcurrent) // at most that many logins at once
	for _, p := range ps {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			fn(p)
		})
	}
	wg.Wait()
}

// verdict is what the probe of a reader decided (readerVerdict), if it
// decided: up when it answered, down when it failed as readerDown says.
func (p *probe) verdict() (readerVerdict, bool) {
	if p.res.err == nil {
		return readerVerdict{in: p.in, up: true}, true
	}
	if why, down := readerDown(p.res.err); down {
		return readerVerdict{in: p.in, why: why}, true
	}
	return readerVerdict{}, false
}

// probeAll reads every instance (and the writer) on probe connections of
// its own, in parallel, each bounded by FailureTimeout, and routes by what
// they say. A reader whose kept probe connection fails is dialed again at
// once (a hung one is decided within the round): its answer, or its fresh
// connection's failure, is its health (judgeReaders).
func (m *Monitor) probeAll(ctx context.Context) {
	var ps []*probe
	for _, in := range m.instances {
		ps = append(ps, &probe{in: in, conn: m.probes[in.id]})
	}
	if len(ps) == 0 {
		return
	}
	writer := m.writer
	eachProbe(ps, func(p *probe) {
		if writer != "" && p.in.id != writer { // (no writer known yet: no reader either)
			var res readResult
			c, err := m.tryReader(ctx, p.in.host, p.conn, func(qctx context.Context, c *pgx.Conn) error {
				res = m.read(qctx, c)
				return res.err
			})
			if p.conn, p.res = c, res; err != nil {
				p.res = readResult{err: err}
			}
			return
		}
		if p.conn == nil {
			c, err := m.dial(ctx, p.in.host, m.cfg.FailureTimeout)
			if err != nil {
				p.res.err = err
				return
			}
			p.conn = c
		}
		qctx, cancel := context.WithTimeout(ctx, m.cfg.FailureTimeout)
		p.res = m.read(qctx, p.conn)
		cancel()
	})
	if ctx.Err() != nil {
		for _, p := range ps {
			if p.conn != m.probes[p.in.id] {
				m.closeConn(p.conn)       // (nil: nothing)
				delete(m.probes, p.in.id) // a reader's kept one failed: tryReader closed it
			}
		}
		return
	}
	var verdicts []readerVerdict
	for _, p := range ps {
		if writer == "" || p.in.id == writer {
			continue
		}
		if v, ok := p.verdict(); ok {
			verdicts = append(verdicts, v)
		}
	}
	defer m.judgeReaders(verdicts) // once the writer is decided: a reader promoted is no reader
	var cur, next *probe
	var rows []topology.Row
	var refused error // a server that refuses the monitor's role the topology
	read := 0
	for _, p := range ps {
		m.noteRead(p.res)
		if p.res.err != nil {
			if p.conn != nil {
				m.closeConn(p.conn)
			}
			if unreadable(p.res.err) {
				refused = p.res.err
			}
			delete(m.probes, p.in.id)
			continue
		}
		m.probes[p.in.id] = p.conn
		read++
		if len(p.res.rows) > len(rows) {
			rows = p.res.rows
		}
		if p.in.id == m.writer {
			cur = p
			if p.res.err == nil && !p.res.writable {
				m.sawReadOnly = true // it answers and refuses writes: a switchover's block, not a crash
			}
		} else if m.confirms(p.res) && p.res.self == p.in.id && (next == nil || p.in.id < next.in.id) {
			// (A server that answers to another instance's name is not
			// adopted under that name.)
			next = p
		}
	}
	switch {
	case cur != nil && m.confirms(cur.res):
		if m.Snapshot().Down {
			m.event(EventWriterBack, m.writer)
			m.publish(func(s *Snapshot) { s.Down, s.DownAddr = false, "" })
		}
	case next != nil:
		m.learn(ctx, next.res.rows)
		m.adopt(next.in.id)
	case read == 0 && refused != nil:
		// Not a writer down: the servers answer, and refuse the read.
		m.closeProbes()
		if m.conn != nil {
			m.closeConn(m.conn)
			m.conn, m.connID = nil, ""
		}
		m.routingOff(&offError{why: offWhy(refused), err: refused})
		return
	default:
		m.writerDown()
		m.writerUnreachable(ps)
	}
	if next == nil && cur != nil && m.confirms(cur.res) && len(cur.res.rows) > 0 {
		rows = cur.res.rows // the writer's rows: a reader's copy trails by its lag (and so does its lag column)
	}
	if next == nil && len(rows) > 0 {
		m.learn(ctx, rows)
	}
}

// writerUnreachable publishes, on a global cluster whose writer is down,
// the Region of a writer that the probed servers name and that cannot be
// adopted (its Region's instances cannot be named, or are outside
// AccessibleRegions): pools meant for writes stay held, but a pool on
// another Region's cluster endpoint knows it is inactive, a reader pool of
// its Region.
func (m *Monitor) writerUnreachable(ps []*probe) {
	if m.engine != topology.EngineGlobal {
		return
	}
	s := m.Snapshot()
	for _, p := range ps {
		r := p.res
		if r.err != nil || r.writerRegion == "" || r.writerRegion == s.WriterRegion {
			continue
		}
		if _, known := m.instances[r.anyWriter]; known {
			continue // adopted once it takes writes
		}
		m.publish(func(s *Snapshot) { s.WriterRegion = r.writerRegion })
		m.setStatus(func(st *failover.Status) { st.WriterRegion, st.OutOfHome = r.writerRegion, m.outOfHome(r.writerRegion) })
		return
	}
}

// writerDown holds the writer endpoint: the writer does not answer, or no
// longer writes, and no other writer is known.
func (m *Monitor) writerDown() {
	if m.Snapshot().Down || m.writer == "" {
		return
	}
	addr := m.instances[m.writer].addr
	m.event(EventWriterDown, m.writer)
	m.cfg.Logger.Info("failover: writer down; holding connections by the writer endpoint until a writer is known",
		slog.String("writer", m.writer), slog.String("addr", addr))
	m.publish(func(s *Snapshot) { s.Down, s.DownAddr = true, addr })
	m.notify(Change{Kind: WriterDown, OldWriter: m.writer, OldAddr: addr})
}

// adopt makes id the writer: the routing sends the writer endpoint there
// until its DNS agrees, and the listeners drop connections to the old one.
func (m *Monitor) adopt(id string) {
	old := m.writer
	if id == old {
		return
	}
	oldAddr, oldRegion := m.instances[old].addr, m.instances[old].region
	in := m.instances[id]
	m.writer = id
	global := m.engine == topology.EngineGlobal
	if old == "" {
		m.publish(func(s *Snapshot) { s.Writer, s.WriterAddr, s.Global, s.WriterRegion = id, in.addr, global, in.region })
		m.publishReaders()
		m.setStatus(func(s *failover.Status) {
			s.Writer, s.WriterAddr, s.WriterRegion, s.OutOfHome = id, in.addr, in.region, m.outOfHome(in.region)
		})
		return
	}
	m.event(EventNewWriter, id)
	m.cfg.Logger.Info("failover: new writer", slog.String("old", old), slog.String("new", id), slog.String("addr", in.addr))
	redirect := len(m.writerHosts()) > 0 // until checkDNS sees the endpoint agree
	m.publish(func(s *Snapshot) {
		s.Writer, s.WriterAddr, s.Down, s.DownAddr, s.Redirect = id, in.addr, false, "", redirect
		s.Global, s.WriterRegion = global, in.region
	})
	m.publishReaders()
	m.setStatus(func(s *failover.Status) {
		s.Writer, s.WriterAddr, s.WriterRegion, s.OutOfHome = id, in.addr, in.region, m.outOfHome(in.region)
		s.Failovers++
		if s.Error != "" && m.awayWriter != "" {
			s.Error = "" // the writer outside AccessibleRegions left
		}
	})
	if global && oldRegion != "" && in.region != "" && oldRegion != in.region {
		m.regionChanged(old, id, oldRegion, in.region)
	}
	m.sawReadOnly, m.awayWriter = false, ""
	if m.conn != nil && m.connID != id {
		m.closeConn(m.conn)
		m.conn, m.connID = nil, ""
	}
	m.notify(Change{Kind: WriterChanged, OldWriter: old, NewWriter: id, OldAddr: oldAddr, NewAddr: in.addr})
	m.goFast("failover")
	m.checkDNS(context.Background())
}

// outOfHome reports whether region, the writer's, is outside
// GlobalConfig.HomeRegion (when set).
func (m *Monitor) outOfHome(region string) bool {
	h := m.cfg.Global.HomeRegion
	return h != "" && region != "" && region != h
}

// regionChanged reports a global cluster's writer moving from Region from
// to Region to: a switchover when the old writer was seen refusing writes
// before it went (nothing lost), else a failover with data loss, whose
// event and WARN line name the Region that lost its unreplicated writes
// and the last rpo_lag_in_msec read for the promoted Region.
func (m *Monitor) regionChanged(old, id, from, to string) {
	if home := m.cfg.Global.HomeRegion; home != "" && (from == home || to == home) {
		what := map[failover.OutOfHomeMode]string{failover.OutOfHomeFollow: "follow it", failover.OutOfHomeReadOnly: "are read-only on the home Region's readers",
			failover.OutOfHomeHold: "are held"}[m.cfg.Global.OutOfHome]
		if to == home {
			what = "follow it again"
		}
		m.cfg.Logger.Warn("failover: the global cluster's writer moved "+map[bool]string{true: "back into", false: "out of"}[to == home]+" the home Region; pools meant for writes "+what,
			slog.String("home_region", home), slog.String("region", to), slog.String("writer", id))
	}
	e := failover.Event{Name: EventRegionSwitchover, Server: id, Region: to, FromRegion: from}
	if m.sawReadOnly {
		m.emit(e)
		m.cfg.Logger.Info("failover: the global cluster's writer moved to another Region after the old writer turned read-only (a switchover: nothing lost)",
			slog.String("from_region", from), slog.String("region", to), slog.String("old", old), slog.String("new", id))
		return
	}
	e.Name, e.RPOLag = EventRegionFailover, m.rpo[to]
	m.emit(e)
	m.cfg.Logger.Warn("failover: the global cluster failed over to another Region while its writer was down; the writes the old primary Region had not replicated are lost",
		slog.String("from_region", from), slog.String("region", to), slog.String("old", old), slog.String("new", id),
		slog.Float64("rpo_lag_s", e.RPOLag.Seconds()), slog.Bool("rpo_lag_known", m.rpo != nil))
}

// checkDNS ends the redirect once every writer endpoint resolves to the
// writer, and starts it when one does not (checked every step while
// redirecting or fast, else at each refresh).
func (m *Monitor) checkDNS(ctx context.Context) {
	s := m.Snapshot()
	if s.WriterAddr == "" || (!s.Redirect && !m.fast() && time.Since(m.refreshed) > m.cfg.HeartbeatInterval) {
		return
	}
	hosts := m.writerHosts()
	if len(hosts) == 0 {
		return
	}
	agree := true
	for _, h := range hosts {
		if r := topology.RegionOf(h); s.Global && r != "" && s.WriterRegion != "" && r != s.WriterRegion {
			continue // a secondary Region's cluster endpoint: inactive, it never leads to the writer
		}
		if a := m.resolve(ctx, h, m.port); a != s.WriterAddr {
			agree = false
		}
	}
	if agree == !s.Redirect {
		return
	}
	if agree {
		m.event(EventDNSAgrees, s.Writer)
	}
	m.publish(func(s *Snapshot) { s.Redirect = !agree })
}

func (m *Monitor) writerHosts() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.AppendSeq(make([]string, 0, len(m.writers)), maps.Keys(m.writers))
}

// publishReaders publishes the addresses of the instances other than the
// writer, and their lag; readers that joined are reported.
func (m *Monitor) publishReaders() {
	readers := map[string]bool{}
	lags := map[string]time.Duration{}
	ids := map[string]string{} // server id by address
	var regions map[string]string
	if m.engine == topology.EngineGlobal {
		regions = map[string]string{}
	}
	for id, in := range m.instances {
		if regions != nil && in.addr != "" {
			regions[in.addr] = in.region
		}
		if id != m.writer && in.addr != "" {
			readers[in.addr] = true
			ids[in.addr] = id
			if in.hasLag {
				lags[in.addr] = in.lag
			}
		}
	}
	if w, ok := m.instances[m.writer]; ok {
		delete(readers, w.addr) // one address, two names (a single-address setup)
		delete(lags, w.addr)
	}
	down := map[string]bool{}
	for id := range m.down {
		if in, ok := m.instances[id]; ok && id != m.writer && readers[in.addr] {
			down[in.addr] = true
		} else {
			delete(m.down, id) // it left the topology (its connections cut), or is the writer now
		}
	}
	old := m.Snapshot()
	if maps.Equal(readers, old.Readers) && maps.Equal(lags, old.Lag) && maps.Equal(down, old.ReadersDown) && maps.Equal(regions, old.Regions) {
		return // unchanged: no new snapshot, no waiter woken (every probe round learns the topology)
	}
	var joined []string
	if old.Readers != nil || old.Writer != "" {
		for a := range readers {
			if !old.Readers[a] {
				joined = append(joined, a)
			}
		}
	}
	// Readers crossing MaxLag, either way (a reader that joins lagging
	// has no connection to retire yet).
	var late, caught, lateIDs []string
	if maxLag := m.cfg.Readers.MaxLag; maxLag > 0 && (old.Readers != nil || old.Writer != "") {
		over := func(l map[string]time.Duration, a string) bool { d, ok := l[a]; return ok && d > maxLag }
		for a := range readers {
			switch now, before := over(lags, a), over(old.Lag, a) && old.Readers[a]; {
			case now && !before && old.Readers[a]:
				late = append(late, a)
			case !now && before:
				caught = append(caught, a)
			}
		}
		slices.Sort(late)
		slices.Sort(caught)
		for _, a := range late {
			lateIDs = append(lateIDs, ids[a])
		}
	}
	m.publish(func(s *Snapshot) { s.Readers, s.Lag, s.ReadersDown, s.Regions = readers, lags, down, regions })
	if len(joined) > 0 {
		slices.Sort(joined)
		m.notify(Change{Kind: ReadersJoined, Joined: joined})
	}
	for i, a := range late {
		m.event(EventReaderLagging, lateIDs[i])
		m.cfg.Logger.Info("failover: reader lagging beyond MaxLag; reader pools give it no new connection and retire theirs",
			slog.String("instance", lateIDs[i]), slog.String("addr", a),
			slog.Float64("lag_s", lags[a].Seconds()), slog.Float64("max_lag_s", m.cfg.Readers.MaxLag.Seconds()))
	}
	if len(late) > 0 {
		m.notify(Change{Kind: ReadersLagging, Gone: late, GoneIDs: lateIDs})
	}
	for _, a := range caught {
		m.event(EventReaderCaughtUp, ids[a])
		m.cfg.Logger.Info("failover: reader caught up; new connections go there again",
			slog.String("instance", ids[a]), slog.String("addr", a), slog.Float64("lag_s", lags[a].Seconds()))
	}
	if len(caught) > 0 {
		m.notify(Change{Kind: ReadersBack, Joined: caught})
	}
}

// refreshInterval is how often the topology is read while nothing is
// wrong: Readers.RefreshInterval while a reader pool is served, when it
// is shorter.
func (m *Monitor) refreshInterval() time.Duration {
	if r := m.cfg.Readers.RefreshInterval; r > 0 && r < m.cfg.RefreshInterval && m.readerPools.Load() > 0 {
		return r
	}
	return m.cfg.RefreshInterval
}

// publish replaces the snapshot with a changed copy, waking its waiters.
func (m *Monitor) publish(change func(*Snapshot)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.snap.Load()
	s := *old
	change(&s)
	s.Changed = make(chan struct{})
	m.snap.Store(&s)
	close(old.Changed)
	if s.Down != old.Down {
		for _, f := range m.downWatch {
			f(s.Down)
		}
	}
	m.status.Routing = routingName(&s)
	m.statusChanged()
}

func (m *Monitor) notify(c Change) {
	m.mu.Lock()
	ls := slices.Clone(m.listeners)
	m.mu.Unlock()
	for _, l := range ls {
		l(c)
	}
}

// closeSpareProbes closes the probes of a failover once it is over: those
// of the readers stay while a pool with reader routing is served (their
// health pings, pingReaders).
func (m *Monitor) closeSpareProbes() {
	keep := m.readerPools.Load() > 0
	for id, c := range m.probes {
		if _, ok := m.instances[id]; keep && ok && id != m.writer {
			continue
		}
		m.closeConn(c)
		delete(m.probes, id)
	}
}

func (m *Monitor) closeProbes() {
	for id, c := range m.probes {
		m.closeConn(c)
		delete(m.probes, id)
	}
}

func (m *Monitor) disconnectAll() {
	m.closeProbes()
	if m.conn != nil {
		m.closeConn(m.conn)
		m.conn = nil
	}
}

// Hold waits while the snapshot says the writer is down: a new connection
// by the writer endpoint host. It returns at once otherwise, and a
// *HoldError after HoldTimeout or when ctx ends.
func (m *Monitor) Hold(ctx context.Context, host string) error {
	s := m.snap.Load()
	if !s.Down {
		return nil
	}
	start := time.Now()
	t := time.NewTimer(m.cfg.HoldTimeout)
	defer t.Stop()
	for s.Down {
		select {
		case <-s.Changed:
			s = m.snap.Load()
		case <-ctx.Done():
			return &failover.HoldError{Host: host, Waited: time.Since(start), Err: ctx.Err()}
		case <-t.C:
			return &failover.HoldError{Host: host, Waited: time.Since(start), Err: context.DeadlineExceeded}
		}
	}
	m.setStatus(func(st *failover.Status) { st.Held++ })
	return nil
}

// closeConn closes a monitor connection at once: a server that stopped
// answering does not hold the monitor (see topology.Guard).
func (m *Monitor) closeConn(c *pgx.Conn) {
	if c == nil {
		return
	}
	m.mu.Lock()
	g := m.guards[c]
	delete(m.guards, c)
	m.mu.Unlock()
	if g != nil {
		g.Abandon()
	}
	topology.Close(c)
}

// redact removes the secrets Config.Redact knows from s.
func (m *Monitor) redact(s string) string {
	if m.cfg.Redact == nil {
		return s
	}
	return m.cfg.Redact(s)
}

// warnOnce logs msg with err at Warn the first time err's text is seen (at
// most 16 texts).
func (m *Monitor) warnOnce(msg string, err error) {
	if m.warned == nil {
		m.warned = map[string]bool{}
	}
	key := m.redact(err.Error())
	if m.warned[key] || len(m.warned) >= 16 {
		return
	}
	m.warned[key] = true
	m.cfg.Logger.Warn(msg, slog.String("error", key))
}

// ServeReaders counts a pool with reader routing in (delta 1) or out
// (delta -1). While one is served, the monitor pings every reader each
// HeartbeatInterval (pingReaders), not only while probing a failover.
func (m *Monitor) ServeReaders(delta int) { m.readerPools.Add(int32(delta)) }

// readerVerdict is what a probe of a reader decided: it answers (up), or
// it is down (why).
type readerVerdict struct {
	in  instance
	up  bool
	why string
}

// tryReader runs op on a reader's probe connection conn, bounded by
// FailureTimeout, or on a fresh one when conn is nil. When op fails on a
// kept connection, the reader is dialed again at once and op run on the
// fresh connection: the error returned is always a fresh connection's
// (its dial's or op's), so that a reader is judged down only when a new
// connection fails too. It returns the connection that answered, nil on
// error (conn is then closed).
func (m *Monitor) tryReader(ctx context.Context, host string, conn *pgx.Conn, op func(context.Context, *pgx.Conn) error) (*pgx.Conn, error) {
	run := func(c *pgx.Conn) error {
		qctx, cancel := context.WithTimeout(ctx, m.cfg.FailureTimeout)
		defer cancel()
		return op(qctx, c)
	}
	if conn != nil {
		err := run(conn)
		if err == nil {
			return conn, nil
		}
		m.closeConn(conn)
		if ctx.Err() != nil {
			return nil, err
		}
	}
	c, err := m.dial(ctx, host, m.cfg.FailureTimeout)
	if err != nil {
		return nil, err
	}
	if err := run(c); err != nil {
		m.closeConn(c)
		return nil, err
	}
	return c, nil
}

// readerDown reports whether err, a fresh connection's failure, means
// that the reader is down, and what the probe saw: a refused, reset or
// timed-out connection, another network error, an EOF, or SQLSTATE class
// 57 (shutting down, cannot connect now). An authentication error, a
// role refused the topology (unreadable), a password hook's failure or a
// dial skipped for its backoff do not.
func readerDown(err error) (string, bool) {
	var he *hookError
	if err == nil || errors.Is(err, errDialBackoff) || errors.As(err, &he) {
		return "", false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		if strings.HasPrefix(pe.Code, "57") {
			return "SQLSTATE " + pe.Code, true
		}
		return "", false
	}
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused", true
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "reset", true
	case errors.Is(err, context.DeadlineExceeded), pgconn.Timeout(err), errors.As(err, &ne) && ne.Timeout():
		return "timeout", true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "EOF", true
	case errors.As(err, &ne):
		return "network error", true
	}
	return "", false
}

// hookError is the failure of the connect hook (a password or token
// fetch): not the server's.
type hookError struct{ err error }

func (e *hookError) Error() string { return e.err.Error() }
func (e *hookError) Unwrap() error { return e.err }

// pingReaders pings every reader on its own probe connection, in
// parallel, each bounded by FailureTimeout (a kept connection that fails
// is redialed once, tryReader), and judges them: while a pool with reader
// routing is served, each step that does not probe a failover; otherwise
// only the readers down, to find them back. A hung reader is so found
// down within HeartbeatInterval + 2×FailureTimeout, a crashed one at
// once.
func (m *Monitor) pingReaders(ctx context.Context) {
	all := m.readerPools.Load() > 0
	if !all && len(m.down) == 0 {
		return
	}
	var ps []*probe
	for id, in := range m.instances {
		if _, down := m.down[id]; id == m.writer || in.addr == "" || (!all && !down) {
			continue
		}
		ps = append(ps, &probe{in: in, conn: m.probes[id]})
	}
	if len(ps) == 0 {
		return
	}
	ping := func(ctx context.Context, c *pgx.Conn) error { return c.Ping(ctx) }
	eachProbe(ps, func(p *probe) { p.conn, p.res.err = m.tryReader(ctx, p.in.host, p.conn, ping) })
	var verdicts []readerVerdict
	for _, p := range ps {
		if p.conn != nil {
			m.probes[p.in.id] = p.conn
		} else {
			delete(m.probes, p.in.id)
		}
		if v, ok := p.verdict(); ok {
			verdicts = append(verdicts, v)
		}
	}
	if ctx.Err() != nil {
		return // closing: the probes close with the monitor
	}
	m.judgeReaders(verdicts)
}

// judgeReaders records the readers' health: a reader found down is
// published (no new connection goes there) and its connections are cut
// (ReadersDown); a reader down that answers again is published too, and
// the reader pools rebalance onto it (ReadersBack).
func (m *Monitor) judgeReaders(vs []readerVerdict) {
	var gone, goneIDs, whys, back, backIDs []string
	for _, v := range vs {
		in, ok := m.instances[v.in.id]
		if !ok || v.in.id == m.writer || in.addr == "" {
			continue // it left, or is the writer now
		}
		_, was := m.down[in.id]
		switch {
		case v.up && was:
			delete(m.down, in.id)
			back, backIDs = append(back, in.addr), append(backIDs, in.id)
		case !v.up && !was:
			m.down[in.id] = v.why
			gone, goneIDs, whys = append(gone, in.addr), append(goneIDs, in.id), append(whys, v.why)
		}
	}
	if len(gone) == 0 && len(back) == 0 {
		return
	}
	// The snapshot first, then the events and lines: whoever sees the
	// event finds the snapshot that says so.
	m.publishReaders()
	for i, id := range backIDs {
		m.event(EventReaderBack, id)
		m.cfg.Logger.Info("failover: reader back", slog.String("instance", id), slog.String("addr", back[i]))
	}
	if len(gone) > 0 {
		// The cut before its events, as for instances that left.
		m.notify(Change{Kind: ReadersDown, Gone: gone, GoneIDs: goneIDs, Why: whys})
	}
	for i, id := range goneIDs {
		m.event(EventReaderDown, id)
		m.cfg.Logger.Info("failover: reader down; its connections are cut",
			slog.String("instance", id), slog.String("addr", gone[i]), slog.String("reason", whys[i]))
	}
	if len(back) > 0 {
		slices.Sort(back)
		m.notify(Change{Kind: ReadersBack, Joined: back})
	}
}
