package bgroute

import (
	"context"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/internal/bgroute/meta"
	"github.com/holdfast-db/holdfast/internal/bgroute/switchover"
	"github.com/holdfast-db/holdfast/internal/compose"
	"github.com/holdfast-db/holdfast/internal/pgxtrace"
	"github.com/holdfast-db/holdfast/internal/topology"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/multitracer"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Router routes one pool's connections through RDS and Aurora blue/green
// switchovers (bluegreen.Router is its public face). [New] builds it;
// its layer (Router.Layer) joins the pool's composition, its monitors
// start with the pool's first connection, and [Router.Close] stops them. A
// Router is safe for concurrent use.
//
// With no switchover under way (and during CREATED), the pool's hooks cost
// one atomic load each: no lock, no allocation, no I/O.
type Router struct {
	cfg       bluegreen.Config // defaults applied
	engine    meta.Engine      // the metadata cfg.Engine selects
	observer  Observer         // nil: none
	poolHosts []string
	base      pgconn.LookupFunc // the pool's own resolver

	// scope is where the deployment's endpoints may lie: the pool's hosts
	// (and the hosts Options.Trusted adds) and their account and Region
	// domain. A metadata or topology row outside it is ignored; names
	// outside it are never dialed, accepted in a certificate or given a
	// token (see bluegreen.Router's doc, "What the monitors trust").
	scope  topology.Scope
	redact func(string) string // cleans error texts of secrets (Options.Redact); never nil
	idle   func() bool         // Options.Idle; nil: never idle

	monitorConnect func(context.Context, *pgx.ConnConfig) error // run before each monitor connect
	monConfig      *pgx.ConnConfig                              // template for monitor connections
	now            func() time.Time

	snap atomic.Pointer[switchover.Snapshot]

	mu      sync.Mutex // guards the fields below
	st      *switchover.State
	mons    [3]bluegreen.MonitorStatus
	last    *bluegreen.Summary
	wake    chan struct{} // closed when the phase or generation changes
	closed  bool
	stopped chan struct{} // closed by Close

	statusMu sync.Mutex
	statusCh chan struct{} // closed when Status changes

	// linger is the identities kept after a completed switchover (see
	// switchover.State.Lingering), until lingerUntil; authFlip, by monitor
	// host, reverses a monitor's Auth names after a rejected token.
	linger      map[string]switchover.Identity
	lingerUntil time.Time
	authFlip    map[string]bool

	// rowWarnings are the metadata rows (and cuts) the monitors logged in
	// generation rowWarningsGen, at most maxRowWarnings: each is logged
	// once for both monitors, and again in a new generation.
	rowWarnings    map[string]bool
	rowWarningsGen uint64

	waiting                     atomic.Int64
	dropped, rejected, timedOut atomic.Int64
	aliasedCerts                atomic.Int64

	pool atomic.Pointer[pgxpool.Pool]

	cancel    context.CancelFunc // stops the monitors
	wg        sync.WaitGroup
	startOnce sync.Once
	closeOnce sync.Once
}

// Observer receives a Router's telemetry (holdfast's is internal/obs's
// BlueGreen). Phase and Finished are called with the Router's lock held,
// before [Router.Status] shows the change; Suspended on the goroutine of
// the caller that was held. None may block or call the Router.
type Observer interface {
	// Phase is called on every change of the merged phase, with its
	// ordinal (a bluegreen.Phase), its name, and whether a switchover is
	// under way.
	Phase(ctx context.Context, phase int, name string, active bool)
	// Suspended is called when a held connect, Acquire or statement
	// (point "connect", "acquire" or "query") stops waiting, with the
	// caller's context, the phase it was held for, how long it waited and
	// the error it ended with (nil: it went on).
	Suspended(ctx context.Context, point, reason string, waited time.Duration, err error)
	// Finished is called when a switchover ends, with the outcome
	// ("COMPLETED", "ROLLED BACK" or "TIMED OUT").
	Finished(ctx context.Context, outcome string)
}

// Options are what a Router gets from its engine besides the pool's
// config and the bluegreen.Config.
type Options struct {
	// MonitorConnect, when not nil, runs before each monitor connect (to
	// set a fresh password or token), told the names to issue it for
	// during a switchover (nil: the connection's host).
	MonitorConnect func(context.Context, *pgx.ConnConfig, []string) error
	// Observer, when not nil, receives the Router's telemetry.
	Observer Observer
	// Trusted are host names the configuration gives besides the pool's
	// hosts (failover.Config.Aliases' endpoints): their account and
	// Region domain is the deployment's too.
	Trusted []string
	// Redact cleans the error texts the Router logs and reports in
	// Status of the secrets the engine knows (nil: texts as they are).
	Redact func(string) string
	// Idle, when not nil, reports that the pool holds no connection
	// (holdfast.WithServerlessV2): meanwhile the monitors hold none
	// either and read nothing, so that an instance that pauses when idle
	// may; they read again at once when it reports false. It must be
	// cheap and must not block.
	Idle func() bool
}

// New builds a Router for the pools built from cc, which its Layer joins
// to the pool's composition; its monitors start with the pool's first
// connection. They connect with a copy of cc as it is now, without
// target_session_attrs, without its tracer, with application_name
// "holdfast-bluegreen-monitor" and Config.MonitorConnectTimeout; before
// each monitor connect they call o.MonitorConnect. They never run the
// pool's hooks. An invalid c is a *cfgerr.Error (Pkg "bluegreen"; the face reports it as a *holdfast.ConfigError).
func New(cc *pgx.ConnConfig, c bluegreen.Config, o Options) (*Router, error) {
	c, engine, err := withDefaults(c)
	if err != nil {
		return nil, err
	}
	cc = cc.Copy() // the monitors' template: the pool's settings, not its composed hooks
	cc.Tracer = nil
	r := newRouter(c, engine, cc, time.Now)
	r.observer = o.Observer
	r.monitorConnect = r.identifyMonitor(o.MonitorConnect)
	if len(o.Trusted) > 0 {
		r.scope = topology.NewScope(append(slices.Clone(r.poolHosts), o.Trusted...))
	}
	if o.Redact != nil {
		r.redact = o.Redact
	}
	r.idle = o.Idle
	return r, nil
}

// newRouter builds a Router that has no monitors yet (tests drive it); c
// has its defaults.
func newRouter(c bluegreen.Config, engine meta.Engine, cc *pgx.ConnConfig, now func() time.Time) *Router {
	r := &Router{
		cfg:      c,
		engine:   engine,
		now:      now,
		wake:     make(chan struct{}),
		stopped:  make(chan struct{}),
		statusCh: make(chan struct{}),
	}
	r.poolHosts = append(r.poolHosts, topology.NormHost(cc.Host))
	for _, fb := range cc.Fallbacks {
		r.poolHosts = append(r.poolHosts, topology.NormHost(fb.Host))
	}
	r.scope = topology.NewScope(r.poolHosts)
	r.redact = func(s string) string { return s }
	r.base = cc.LookupFunc
	if r.base == nil {
		r.base = net.DefaultResolver.LookupHost
	}
	// No target_session_attrs: the monitors must read green while it is
	// read-only.
	r.monConfig = topology.MonitorConfig(cc, "holdfast-bluegreen-monitor", c.MonitorConnectTimeout)
	r.st = switchover.New(c.ID, c.SwitchoverTimeout, 0, false)
	r.snap.Store(switchover.Idle(0, meta.NotCreated))
	for _, role := range []meta.Role{meta.RoleSource, meta.RoleTarget} {
		r.mons[role] = bluegreen.MonitorStatus{Role: role.String(), Host: cc.Host}
	}
	return r
}

// Layer is the Router's part of the pool's hooks (internal/compose):
//
//   - BeforeConnect: starts the monitors (with the pool's first
//     connection), suspends or rejects a new connection as the phase
//     requires, points the connection's LookupFunc at fixed addresses when
//     host names are substituted, gives its TLS configuration the names of
//     the server it reaches (bluegreen.Name), and tells the connection's
//     handle the names to issue its token for (compose.Conn.SetAuthHosts).
//   - Route: holds or refuses a retry's dial as BeforeConnect would.
//   - PrepareConn: holds Acquire during IN_PROGRESS and destroys idle
//     connections to the old blue instance.
//   - AfterRelease (installed only when the config has one): destroys
//     connections to the old blue instance.
//   - Tracer: holds statements on acquired connections during IN_PROGRESS
//     and refuses them on connections to the old blue instance.
//   - Attach: the pool, learnt at its first Acquire, whose idle
//     connections to the old blue instance are closed at once when
//     IN_PROGRESS begins.
//
// Outside a switchover each hook costs one atomic
// load. Its Route asks the routing again for each retry of a connection's
// dial (BeforeConnect routed its first), and its Routing is the signal
// that failover routing yields to (compose.Precedence).
func (r *Router) Layer() compose.Layer {
	return compose.Layer{
		BeforeConnect: func(ctx context.Context, c compose.Conn, cc *pgx.ConnConfig, next compose.ConnectFunc) error {
			r.startMonitors() // with the pool's first connection (idempotent)
			auth, err := r.route(ctx, cc)
			if err != nil {
				return err
			}
			if auth != nil {
				c.SetAuthHosts(auth) // the connect layer issues the token for them
			}
			return next(ctx, c, cc)
		},
		Route: func(ctx context.Context, _ compose.Conn, host, addr string, retry bool) (string, error) {
			if !retry {
				return addr, nil
			}
			return r.retryRoute(ctx, host, addr)
		},
		Routing: r.routing,
		PrepareConn: func(ctx context.Context, c *pgx.Conn) (bool, error) {
			if s := r.snap.Load(); !s.Normal {
				return r.prepareSlow(ctx, c, s)
			}
			return true, nil
		},
		AfterRelease: r.keepOnRelease,
		Tracer: func(next pgx.QueryTracer) pgx.QueryTracer {
			t := &pgxtrace.Set{Hooks: gate{r}}
			if next == nil {
				return t
			}
			return multitracer.New(t, next)
		},
		Attach:          r.attach,
		AttachOnAcquire: true, // idle connections to old blue are closed at once at IN_PROGRESS
	}
}

// attach tells the Router which pool it serves, so that it can close idle
// connections to the old blue instance at once when IN_PROGRESS begins and
// when the switchover ends, instead of when they are next acquired.
func (r *Router) attach(pool *pgxpool.Pool) {
	if r != nil && pool != nil {
		r.pool.CompareAndSwap(nil, pool)
	}
}

// startMonitors starts the Router's two monitors and its switchover
// timer, on goroutines that [Router.Close] stops and joins. It is
// idempotent, and does nothing after Close.
func (r *Router) startMonitors() {
	r.startOnce.Do(r.start)
}

func (r *Router) start() {
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		cancel()
		return
	}
	r.cancel = cancel
	r.mu.Unlock()
	for _, role := range []meta.Role{meta.RoleSource, meta.RoleTarget} {
		m := &monitor{r: r, role: role, warned: map[string]bool{}}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			m.run(ctx)
		}()
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.runTimer(ctx)
	}()
}

// Close stops and joins the monitors and the switchover timer, and returns
// the routing to plain host names, releasing every suspended caller. It
// waits at most Config.MonitorConnectTimeout (a monitor stuck in a dial
// function that ignores its context is left to end by itself). It is
// idempotent and safe to call at any time; the pool keeps working.
func (r *Router) Close() {
	if r == nil {
		return
	}
	r.closeOnce.Do(func() {
		r.mu.Lock()
		if r.cancel != nil {
			r.cancel()
		}
		r.closed = true
		close(r.stopped)
		r.publish(switchover.Idle(r.st.Gen, r.st.Phase))
		r.mu.Unlock()
		r.join()
		r.notifyStatus()
	})
}

// join waits for the monitors and the timer, which stop at once when their
// context is canceled, unless one is inside a dial function that ignores
// its context: Close then returns after MonitorConnectTimeout and the
// straggler ends when its dial does.
func (r *Router) join() {
	done := make(chan struct{})
	go func() { // ends when the monitors do
		r.wg.Wait()
		close(done)
	}()
	t := time.NewTimer(r.cfg.MonitorConnectTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		r.cfg.Logger.Warn("bluegreen: a monitor did not stop within MonitorConnectTimeout; Close returns without it (a dial function that ignores its context?)")
	}
}

// publish swaps in s if it routes differently, waking suspended callers.
// r.mu must be held.
func (r *Router) publish(s *switchover.Snapshot) {
	old := r.snap.Load()
	if old.Same(s) {
		return
	}
	r.snap.Store(s)
	close(old.Changed)
}

// report merges an observation and returns the polling interval the phase
// asks for and whether a switchover is active.
func (r *Router) report(o switchover.Observation, ms bluegreen.MonitorStatus) (time.Duration, bool) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return r.cfg.HighInterval, false
	}
	now := r.now()
	ms.LastPoll = now
	if o.Kind == switchover.KindNoConn && authRejected(o.Err) {
		// The monitor's next connect issues its token for the other name.
		if r.authFlip == nil {
			r.authFlip = map[string]bool{}
		}
		h := topology.NormHost(ms.Host)
		r.authFlip[h] = !r.authFlip[h]
	}
	for h := range r.authFlip { // forget the hosts no monitor reads from any more
		if !slices.Contains(r.poolHosts, h) && h != topology.NormHost(ms.Host) &&
			h != topology.NormHost(r.mons[o.Role.Other()].Host) {
			delete(r.authFlip, h)
		}
	}
	oldPhase, oldGen := r.st.Phase, r.st.Gen
	oldDrop := r.snap.Load().Drop
	fx := r.st.Apply(o, now)
	if o.Gen == r.st.Gen {
		ms.Phase = bluegreen.Phase(r.st.Current(o.Role))
		r.mons[o.Role] = ms
	}
	sweep := r.afterChange(fx, oldPhase, oldGen, oldDrop)
	interval, active := r.intervalLocked()
	// Log and observe before Status can show the change.
	r.emit(fx)
	r.mu.Unlock()
	r.sweep(sweep)
	r.notifyStatus()
	return interval, active
}

// tick evaluates the switchover timer.
func (r *Router) tick() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	oldPhase, oldGen := r.st.Phase, r.st.Gen
	oldDrop := r.snap.Load().Drop
	fx := r.st.Tick(r.now())
	sweep := r.afterChange(fx, oldPhase, oldGen, oldDrop)
	r.emit(fx)
	r.mu.Unlock()
	r.sweep(sweep)
	r.notifyStatus()
}

// afterChange starts a new generation when a switchover ended, publishes
// the routing and wakes the monitors on a phase change. It returns the
// addresses whose idle connections should be closed. r.mu must be held.
func (r *Router) afterChange(fx switchover.Effects, oldPhase meta.Phase, oldGen uint64, oldDrop map[string]bool) map[string]bool {
	var sweep map[string]bool
	if fx.Summary != nil {
		r.last = summaryOf(fx.Summary)
		sweep = oldDrop
		if fx.Summary.Outcome == switchover.OutcomeCompleted {
			// Green's certificate may not carry the blue names yet.
			r.linger, r.lingerUntil = r.st.Lingering(), r.now().Add(r.cfg.SwitchoverTimeout)
		}
		// The next generation ignores the switchover that just ended until
		// both roles have left it: a stuck status, or a server whose
		// metadata lags or stays frozen, must not start it again.
		r.st = switchover.New(r.cfg.ID, r.cfg.SwitchoverTimeout, r.st.Gen+1, true)
		for _, role := range []meta.Role{meta.RoleSource, meta.RoleTarget} {
			r.mons[role] = bluegreen.MonitorStatus{Role: role.String(), Host: r.monConfig.Host}
		}
	}
	s := switchover.Decide(r.st, r.poolHosts)
	switch {
	case r.st.Frozen:
		r.linger = nil // a new switchover
	case r.linger != nil && r.now().Before(r.lingerUntil):
		s.Names, s.NamesUntil = r.linger, r.lingerUntil
	default:
		r.linger = nil
	}
	if len(s.Drop) > 0 && len(oldDrop) == 0 {
		sweep = s.Drop
	}
	r.publish(s)
	if r.st.Phase != oldPhase || r.st.Gen != oldGen {
		close(r.wake)
		r.wake = make(chan struct{})
	}
	return sweep
}

func (r *Router) intervalLocked() (time.Duration, bool) {
	switch {
	case r.st.Frozen:
		return r.cfg.HighInterval, true
	case r.st.Phase == meta.Created || r.st.Stale:
		return r.cfg.IncreasedInterval, false
	}
	return r.cfg.BaselineInterval, false
}

// emit writes the logs of a change and tells the Observer. r.mu is held,
// so that nothing shows in Status before it was logged and observed.
func (r *Router) emit(fx switchover.Effects) {
	ctx := context.Background()
	for _, l := range fx.Logs {
		r.cfg.Logger.LogAttrs(ctx, l.Level, l.Msg, l.Attrs...)
	}
	if o := r.observer; o != nil {
		for _, p := range fx.Phases {
			o.Phase(ctx, int(p), p.String(), bluegreen.Phase(p).Active())
		}
	}
	if fx.Summary != nil {
		s := r.last // afterChange made it from fx.Summary
		r.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "bluegreen: switchover "+string(s.Outcome),
			slog.String("bgd_id", s.ID), slog.String("outcome", string(s.Outcome)),
			slog.String("summary", s.String()))
		if o := r.observer; o != nil {
			o.Finished(ctx, string(s.Outcome))
		}
	}
}

// sweep closes the pool's idle connections to the given addresses.
func (r *Router) sweep(addrs map[string]bool) {
	pool := r.pool.Load()
	if pool == nil || len(addrs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), sweepKey{}, true), time.Second)
	defer cancel()
	probe := &switchover.Snapshot{Drop: addrs}
	for _, c := range pool.AcquireAllIdle(ctx) {
		if probe.DroppedAddr(c.Conn()) != "" {
			r.dropped.Add(1)
			_ = c.Conn().Close(ctx)
		}
		c.Release()
	}
}

type sweepKey struct{}

// generation returns the current generation and a channel closed at the
// next phase or generation change.
func (r *Router) generation() (uint64, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st.Gen, r.wake
}

func (r *Router) runTimer(ctx context.Context) {
	for {
		r.mu.Lock()
		frozen, deadline, wake := r.st.Frozen, r.st.Deadline, r.wake
		r.mu.Unlock()
		var expired <-chan time.Time
		var t *time.Timer
		if frozen {
			t = time.NewTimer(deadline.Sub(r.now()))
			expired = t.C
		}
		select {
		case <-ctx.Done():
			if t != nil {
				t.Stop()
			}
			return
		case <-wake:
		case <-expired:
			r.tick()
		}
		if t != nil {
			t.Stop()
		}
	}
}

// monitorLookup resolves host for a monitor connection: the start address
// during a switchover (the name may already lead elsewhere or nowhere),
// else the pool's resolver.
func (r *Router) monitorLookup(ctx context.Context, host string) ([]string, error) {
	r.mu.Lock()
	ip := r.st.StartAddr(topology.NormHost(host))
	r.mu.Unlock()
	if ip != "" {
		return []string{ip}, nil
	}
	return r.base(ctx, host)
}

// maxRowWarnings bounds Router.rowWarnings: the rows of both roles.
const maxRowWarnings = 2 * topology.MaxRows

// firstRowWarning reports whether key (a metadata row's, or a cut's) is
// to be logged: the first time it is seen in generation gen, while fewer
// than maxRowWarnings were.
func (r *Router) firstRowWarning(gen uint64, key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rowWarnings == nil || gen != r.rowWarningsGen {
		r.rowWarnings, r.rowWarningsGen = map[string]bool{}, gen // the last generation's names are forgotten
	}
	if r.rowWarnings[key] || len(r.rowWarnings) >= maxRowWarnings {
		return false
	}
	r.rowWarnings[key] = true
	return true
}

// needsTopology reports whether a monitor of role should read its
// cluster's topology with its next rows.
func (r *Router) needsTopology(role meta.Role) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st.NeedsTopology(role)
}

// hostsToResolve returns the host names a monitor of role resolves: the
// role's current endpoints and its start hosts.
func (r *Router) hostsToResolve(role meta.Role, extra []string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st.HostsToResolve(role, extra)
}

// route is the Router's part of the pool's BeforeConnect. Outside a
// switchover it returns ctx and costs one atomic load. During one it
// suspends the connect (bounded by Config.ConnectTimeout and ctx: a
// *SuspendError), refuses a stale green host name (*RejectError), or
// points cc's LookupFunc at the fixed addresses of the substituted host
// names; and when the server the connection reaches answers to other
// names than the one asked for, it gives cc a TLS configuration that
// accepts the server's certificate for them (see the package
// documentation, "Names"), and returns a context that carries the names
// to issue the connection's password or token for (nil: its own host).
func (r *Router) route(ctx context.Context, cc *pgx.ConnConfig) ([]string, error) {
	if s := r.snap.Load(); !s.Normal || s.Names != nil {
		return r.routeSlow(ctx, cc, s)
	}
	return nil, nil
}

func (r *Router) routeSlow(ctx context.Context, cc *pgx.ConnConfig, s *switchover.Snapshot) ([]string, error) {
	if !s.Normal {
		var err error
		if s, err = r.connectSlow(ctx, cc, s); err != nil {
			return nil, err
		}
	}
	if len(s.Names) == 0 || !s.NamesUntil.IsZero() && !r.now().Before(s.NamesUntil) {
		return nil, nil
	}
	return r.identify(cc, s.Names, nil), nil
}

// retryRoute is the Router's part of a retry's dial (its Route): a connection that BeforeConnect routed is retried by the
// connect layer without passing through BeforeConnect again, so each
// retry dial asks again. It is held while connects to host are suspended
// (a retry would otherwise redial blue through IN_PROGRESS, refused:
// 53300, and spend the retry budget), and refused for a stale green host.
// It keeps its address: a retry that then reaches old blue is dropped
// when acquired (the snapshot's drop list) and the pool connects anew
// through BeforeConnect, which routes the new connection to green with
// the names, token and certificate check that go with it.
func (r *Router) retryRoute(ctx context.Context, host, addr string) (string, error) {
	s := r.snap.Load()
	if s.Normal {
		return addr, nil
	}
	_, _, err := r.decideConnect(ctx, []string{host}, s)
	return addr, err
}

// routing reports whether the Router routes anything now (a switchover
// from PREPARATION until routing is normal again): one atomic load. It is
// the layer's Routing: holdfast's failover layer stands down meanwhile.
func (r *Router) routing() bool {
	return r != nil && !r.snap.Load().Normal
}

// keepOnRelease is the Router's part of the pool's AfterRelease: false
// for a connection to the old blue instance.
func (r *Router) keepOnRelease(c *pgx.Conn) bool {
	if s := r.snap.Load(); !s.Normal && s.DroppedAddr(c) != "" {
		r.dropped.Add(1)
		return false
	}
	return true
}

// connectSlow holds, rejects or substitutes; it returns the snapshot it
// decided on.
func (r *Router) connectSlow(ctx context.Context, cc *pgx.ConnConfig, s *switchover.Snapshot) (*switchover.Snapshot, error) {
	hosts := make([]string, 0, 1+len(cc.Fallbacks))
	hosts = append(hosts, cc.Host)
	for _, fb := range cc.Fallbacks {
		hosts = append(hosts, fb.Host)
	}
	s, act, err := r.decideConnect(ctx, hosts, s)
	if err == nil && act == switchover.Substitute {
		base := cc.LookupFunc
		if base == nil {
			base = r.base
		}
		cc.LookupFunc = s.Lookup(base)
	}
	return s, err
}

// decideConnect decides a connect to hosts (a new connection's, or a
// retry's): it holds it while the switchover suspends connects to them
// (bounded by Config.ConnectTimeout and ctx: a *SuspendError), refuses a
// stale green host (*RejectError), and returns the snapshot it decided on
// and the action for hosts (Pass or Substitute).
func (r *Router) decideConnect(ctx context.Context, hosts []string, s *switchover.Snapshot) (*switchover.Snapshot, switchover.Action, error) {
	held := func(s *switchover.Snapshot) bool {
		a, _ := s.ConnectAction(hosts)
		return a == switchover.Suspend || a == switchover.SuspendUntilFound
	}
	act, host := s.ConnectAction(hosts)
	if held(s) {
		var err error
		if s, err = r.wait(ctx, "connect", host, s, held); err != nil {
			return s, act, err
		}
		act, host = s.ConnectAction(hosts)
	}
	if act == switchover.Reject {
		r.rejected.Add(1)
		return s, act, &bluegreen.RejectError{Host: host, Phase: bluegreen.Phase(s.Phase)}
	}
	return s, act, nil
}

func (r *Router) prepareSlow(ctx context.Context, c *pgx.Conn, s *switchover.Snapshot) (bool, error) {
	if ctx.Value(sweepKey{}) != nil {
		return true, nil // our own sweep: it checks the connections itself
	}
	if s.DroppedAddr(c) != "" {
		r.dropped.Add(1)
		return false, nil // destroy; pgxpool tries another connection
	}
	if s.SuspendQueries {
		var err error
		if s, err = r.wait(ctx, "acquire", "", s, holdsQueries); err != nil {
			return true, err // keep the healthy connection, fail this Acquire
		}
		if s.DroppedAddr(c) != "" {
			r.dropped.Add(1)
			return false, nil
		}
	}
	return true, nil
}

func holdsQueries(s *switchover.Snapshot) bool { return s.SuspendQueries }

// gate holds or refuses a statement on an acquired connection.
func (r *Router) gate(ctx context.Context, c *pgx.Conn, s *switchover.Snapshot) context.Context {
	if addr := s.DroppedAddr(c); addr != "" {
		r.dropped.Add(1)
		return denied(ctx, &bluegreen.DroppedError{Addr: addr, Phase: bluegreen.Phase(s.Phase)})
	}
	if !s.SuspendQueries {
		return ctx
	}
	s, err := r.wait(ctx, "query", "", s, holdsQueries)
	if err != nil {
		if ctx.Err() != nil {
			return ctx // the caller's own context ended: pgx reports it as usual
		}
		return denied(ctx, err)
	}
	if addr := s.DroppedAddr(c); addr != "" {
		r.dropped.Add(1)
		return denied(ctx, &bluegreen.DroppedError{Addr: addr, Phase: bluegreen.Phase(s.Phase)})
	}
	return ctx
}

// wait holds the caller while held(snapshot) is true, at most
// Config.ConnectTimeout and until ctx ends. It wakes on every snapshot
// change, never on a poll.
func (r *Router) wait(ctx context.Context, op, host string, s *switchover.Snapshot, held func(*switchover.Snapshot) bool) (*switchover.Snapshot, error) {
	start := time.Now()
	phase := bluegreen.Phase(s.Phase)
	timer := time.NewTimer(r.cfg.ConnectTimeout)
	defer timer.Stop()
	r.waiting.Add(1)
	r.notifyStatus()
	defer func() {
		r.waiting.Add(-1)
		r.notifyStatus()
	}()
	var err error
	for err == nil && held(s) {
		select {
		case <-s.Changed:
			s = r.snap.Load()
		case <-ctx.Done():
			err = &bluegreen.SuspendError{Op: op, Host: host, Phase: phase, Waited: time.Since(start), Err: context.Cause(ctx)}
		case <-timer.C:
			r.timedOut.Add(1)
			err = &bluegreen.SuspendError{Op: op, Host: host, Phase: phase, Waited: time.Since(start), Err: context.DeadlineExceeded}
		}
	}
	if o := r.observer; o != nil {
		o.Suspended(ctx, op, phase.String(), time.Since(start), err)
	}
	return s, err
}

// Changed returns a channel that is closed at the next change of
// [Router.Status]: a metadata poll, a phase or routing change, a caller
// starting or ending a wait, Close. Read Status again after it is closed,
// and call Changed again for the next change.
func (r *Router) Changed() <-chan struct{} {
	r.statusMu.Lock()
	defer r.statusMu.Unlock()
	return r.statusCh
}

// resting records that the monitor of role holds no connection while the
// pool is idle (Options.Idle): Status says so (Observation "idle").
func (r *Router) resting(role meta.Role) {
	r.mu.Lock()
	ms := r.mons[role]
	changed := ms.Connected || ms.Observation != "idle"
	ms.Connected, ms.Addr, ms.Observation = false, "", "idle"
	r.mons[role] = ms
	r.mu.Unlock()
	if changed {
		r.notifyStatus()
	}
}

func (r *Router) notifyStatus() {
	r.statusMu.Lock()
	close(r.statusCh)
	r.statusCh = make(chan struct{})
	r.statusMu.Unlock()
}

// LastSummary returns the summary of the last switchover that ended
// (completed, rolled back or timed out), and false if none has.
func (r *Router) LastSummary() (bluegreen.Summary, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		return bluegreen.Summary{}, false
	}
	return *r.last, true
}

// gate is the Router's statement hooks: it holds statements on acquired
// connections during IN_PROGRESS and refuses them, before anything is
// sent, on connections to the old blue instance.
type gate struct{ r *Router }

func (g gate) StatementStart(ctx context.Context, c *pgx.Conn, _ pgxtrace.Kind) context.Context {
	if s := g.r.snap.Load(); !s.Normal {
		return g.r.gate(ctx, c, s)
	}
	return ctx
}

func (gate) StatementEnd(context.Context, *pgx.Conn, pgxtrace.Kind, error) {}

// denied returns a context that is already done with err as its Err, so
// that pgx refuses the statement before sending anything and the caller's
// error wraps err (errors.As finds the *SuspendError or *DroppedError).
// Beware: a refused BEGIN makes pgx close the connection.
func denied(parent context.Context, err error) context.Context {
	return deniedContext{Context: parent, err: err}
}

type deniedContext struct {
	context.Context
	err error
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

func (d deniedContext) Done() <-chan struct{} { return closedChan }
func (d deniedContext) Err() error            { return d.err }
