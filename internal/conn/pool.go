package conn

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/internal/admit"
	"github.com/holdfast-db/holdfast/internal/bgroute"
	"github.com/holdfast-db/holdfast/internal/compose"
	"github.com/holdfast-db/holdfast/internal/evict"
	"github.com/holdfast-db/holdfast/internal/failovermon"
	"github.com/holdfast-db/holdfast/internal/obs"
	"github.com/holdfast-db/holdfast/internal/outage"
	"github.com/holdfast-db/holdfast/internal/topology"
	"github.com/holdfast-db/holdfast/retry"
)

// This file binds an engine's layers to a pool config. Each layer is data
// (compose.Layer: what it adds to BeforeConnect, PrepareConn, AfterRelease,
// the tracer, and what it does with each connection); internal/compose
// builds the config's hooks and the connections' chain from them, in the
// one declared order (compose.Order) and precedence (compose.Precedence).
// With neither blue/green nor telemetry, PrepareConn is the eviction
// check (one atomic load) before the user's, and AfterRelease and the
// connections' tracer are the user's own: Acquire costs what pgxpool's
// costs.

// Pool is one pool config's binding to an engine's layers: found again
// from the config or its pool (Engine.PoolOf, OfPool) through the
// composition the config's tracer carries. The Engine owns it: Close and
// Forget close it (and join its blue/green monitors).
type Pool struct {
	e     *Engine
	comp  *compose.Composition
	chain *compose.Chain  // the layers' connection hooks, in order (after Install)
	base  pgconn.DialFunc // the dial the connector wraps

	bg    *bgroute.Router    // blue/green routing; nil when off
	fo    *failovermon.Layer // failover routing; nil when off or not routed
	foRef *monitorRef        // fo's cluster monitor
	out   *outage.Layer      // the outage layer; nil when off
	adm   *admit.Limiter     // the admission limit of the pool's connects; nil when off
	tel   *obs.Pool          // nil when telemetry was inactive at Configure

	// With the global OpenTelemetry providers and no SDK installed yet at
	// Configure, the connect layer checks at each connect whether one has
	// been installed since, and instruments connections from then on.
	lazyTel bool
	lateTel atomic.Pointer[obs.Pool]
	lateMu  sync.Mutex

	static string      // the config's own password, registered with the redactor
	name   string      // the pool's name (unique in the engine)
	named  bool        // name was given (PoolName), not "host:port/database"
	target *obs.Target // what log lines name

	// dialOK: 0 until the first connect checked that the config's DialFunc
	// is still the engine's; then 1, or 2 when it was replaced after
	// Configure (every connect then fails with a *ConfigError).
	dialOK atomic.Int32
	closed atomic.Bool
}

// Name returns the pool's name in telemetry and log lines.
func (p *Pool) Name() string { return p.name }

// Named reports whether the pool's name was given (holdfast.PoolName)
// rather than the default "host:port/database", which
// readiness does not serve.
func (p *Pool) Named() bool { return p.named }

// BlueGreen returns the pool's blue/green router, or nil.
func (p *Pool) BlueGreen() bluegreen.Router {
	if p.bg == nil {
		return nil // not a nil *bgroute.Router in the interface
	}
	return p.bg
}

// Failover returns the failover monitor of the pool's cluster, or nil.
func (p *Pool) Failover() *failovermon.Monitor {
	if p.fo == nil {
		return nil
	}
	return p.fo.Monitor()
}

// Telemetry returns the telemetry of the pool's engine.
func (p *Pool) Telemetry() *obs.Telemetry { return p.e.tel }

// Engine returns the engine that configured the pool.
func (p *Pool) Engine() *Engine { return p.e }

// bind composes the engine's layers into cfg. e.mu is held.
func (e *Engine) bind(cfg *pgxpool.Config, name string, instance *failover.InstanceMode) (*Pool, error) {
	cc := cfg.ConnConfig
	p := &Pool{e: e, base: cc.DialFunc, static: cc.Password, name: name}
	if e.cfg.Dial != nil {
		p.base = e.cfg.Dial
	}
	if e.cfg.Encrypted {
		cc.TLSConfig = nil
		cc.Fallbacks = nil
		cc.LookupFunc = func(_ context.Context, host string) ([]string, error) {
			return []string{host}, nil
		}
	}
	if p.base == nil {
		p.base = (&net.Dialer{}).DialContext // pgx's default; tuned per socket (netdial.go)
	}
	// The monitors' connections: copies of cc, before the composition.
	mc := cc.Copy()
	comp := compose.Begin(cfg, p) // takes the config's own hooks: they run last
	p.comp = comp
	cc.DialFunc = p.poolDial // the dial of the monitors' connections (copies of cc)
	p.adm = e.cfg.Limit.limiter(cfg)

	e.tel.PinSecret(cc.Password) // the configured password: never forgotten
	p.tel = e.tel.Pool(context.Background(), cc, name)
	p.lazyTel = p.tel == nil && e.cfg.GlobalProviders
	p.target = obs.NewTarget(cc, name)
	comp.Add(compose.Telemetry, compose.Layer{
		BeforeConnect: p.telemetryConnect,
		Tracer: func(next pgx.QueryTracer) pgx.QueryTracer {
			if p.tel == nil {
				return next
			}
			return p.tel.Tracer(next)
		},
		Attach: func(pool *pgxpool.Pool) {
			p.tel.Watch(pool)
			p.lateTel.Load().Watch(pool)
		},
	})

	if e.cfg.BlueGreen != nil {
		mcc := mc.Copy()
		mcc.DialFunc = p.poolDial
		bg, o := e.blueGreenConfig(name, p.target)
		var idle func() bool
		if e.cfg.Outage != nil && e.cfg.Outage.Wake != nil {
			idle = p.cold // WithServerlessV2: no monitor connection while the pool is idle
		}
		r, err := bgroute.New(mcc, bg, bgroute.Options{MonitorConnect: p.monitorConnect, Observer: o,
			Trusted: e.aliasEndpoints(mcc), Redact: e.tel.Redact, Idle: idle})
		if err != nil {
			return nil, e.configError("WithBlueGreen", "cannot install blue/green routing", err)
		}
		p.bg = r
		comp.Add(compose.BlueGreen, r.Layer())
	}
	if e.cfg.Failover != nil {
		mode := e.cfg.Failover.InstancePools
		if instance != nil {
			mode = *instance
		}
		if err := p.addFailover(mc, mode); err != nil {
			return nil, err
		}
	}
	if e.cfg.Outage != nil {
		p.addOutage(mc)
		if e.cfg.Outage.Wake != nil {
			applyWake(cfg, e.cfg.Outage.Wake)
		}
	}
	comp.Add(compose.Eviction, (&evict.Eviction{}).Layer())
	comp.Add(compose.Connect, compose.Layer{BeforeConnect: p.connect, Pinging: pinging})
	comp.Install(cfg, p.newConn)
	p.chain = comp.Chain()
	return p, nil
}

// pinging tells a connection of the pool that pgxpool pings it next
// (compose.Layer.Pinging): if the ping goes unanswered, it closes
// without a cancel request (dialCancel).
func pinging(c *pgx.Conn) {
	if s := stateOf(c); s != nil {
		s.pinging()
	}
}

// newConn makes the state of a new connection of the pool, before any
// layer's BeforeConnect: the handle the layers get.
func (p *Pool) newConn(_ context.Context, cc *pgx.ConnConfig) compose.Conn {
	return &connState{cn: p.e.cn, p: p, base: p.base, cc: cc, target: p.target, rounds: p.e.cn.maxDials}
}

// blueGreenConfig returns the blue/green config of one pool, the
// engine's, its lines naming the pool's database, and its observer, which
// records through the engine's telemetry under the pool's name, so that
// pools to different clusters keep their phases and switchover spans
// apart.
func (e *Engine) blueGreenConfig(pool string, target *obs.Target) (bluegreen.Config, bgroute.Observer) {
	bg := *e.cfg.BlueGreen               // a copy: the option's Config may be shared
	bg.Logger = target.Logger(bg.Logger) // its lines name the pool's database
	if o := e.tel.BlueGreen(bgroute.ID(bg), pool, target); o != nil {
		return bg, o
	}
	return bg, nil
}

// aliasEndpoints returns the RDS endpoints that failover.Config.Aliases
// gives cc's hosts (none without WithFailover): configured names, whose
// account and Region domain the blue/green routing trusts too.
func (e *Engine) aliasEndpoints(cc *pgx.ConnConfig) []string {
	if e.cfg.Failover == nil || len(e.cfg.Failover.Aliases) == 0 {
		return nil
	}
	var out []string
	for _, h := range append([]string{cc.Host}, fallbackHosts(cc)...) {
		if ep := failovermon.Endpoint(e.cfg.Failover.Aliases, h); ep != h {
			out = append(out, ep)
		}
	}
	return out
}

func fallbackHosts(cc *pgx.ConnConfig) []string {
	out := make([]string, 0, len(cc.Fallbacks))
	for _, fb := range cc.Fallbacks {
		out = append(out, fb.Host)
	}
	return out
}

// addFailover adds the failover layer of the pool of cc (a copy of its
// config, before the composition), on its cluster's monitor; mode is what
// a pool on an instance endpoint does. e.mu is held.
func (p *Pool) addFailover(cc *pgx.ConnConfig, mode failover.InstanceMode) error {
	e := p.e
	ep := failovermon.Endpoint(e.cfg.Failover.Aliases, cc.Host)
	if ok, why := failovermon.RoutedKind(ep, *e.cfg.Failover); !ok {
		e.cfg.Logger.LogAttrs(context.Background(), slog.LevelInfo, why,
			slog.String("server.address", cc.Host), slog.String("holdfast.endpoint.kind", topology.KindOf(topology.NormHost(ep)).String()))
		return nil
	}
	// The monitor dials once per attempt, through the integration's (or
	// the config's) dial but not the retry loop: a probe of a dead writer
	// must fail fast, and never spend the pools' retry budget.
	cc.DialFunc = p.base
	ref, err := e.failoverMonitor(cc, p.monitorConnect)
	if err != nil {
		return e.configError("WithFailover", "cannot install failover routing", err)
	}
	p.foRef = ref
	if e.cfg.Outage != nil && e.cfg.Outage.Wake != nil {
		ref.m.IdleWhile(p.cold) // WithServerlessV2: no monitor connection while the pools are idle
	}
	p.fo = failovermon.NewLayer(ref.m, p.comp, cc, ep, mode, e.cfg.Failover.Readers, p.target.Logger(e.cfg.Logger))
	p.comp.Add(compose.Failover, p.fo.Layer())
	return nil
}

// failoverMonitor returns the engine's monitor of the cluster of cc's
// host, creating it, and counts the pool. e.mu is held.
func (e *Engine) failoverMonitor(cc *pgx.ConnConfig, connHook func(context.Context, *pgx.ConnConfig, []string) error) (*monitorRef, error) {
	ep := failovermon.Endpoint(e.cfg.Failover.Aliases, cc.Host)
	tmpl, port, err := failovermon.TemplateFor(ep, cc.Port, e.cfg.Failover.InstanceTemplate)
	if err != nil {
		return nil, err
	}
	key := failovermon.ClusterKey(ep, tmpl, port)
	if ref := e.monitors[key]; ref != nil {
		ref.pools++
		return ref, nil
	}
	fc := *e.cfg.Failover
	if fc.Logger != nil { // the monitor's lines name the cluster it watches
		fc.Logger = fc.Logger.With(slog.String("server.address", ep), slog.Int("server.port", int(port)), slog.String("db.namespace", cc.Database))
	}
	onEvent, tel, events := fc.OnEvent, e.tel, obs.FailoverEvents(ep, int(port))
	fc.OnEvent = func(ev failover.Event) { // counted under the cluster it concerns
		tel.FailoverEvent(context.Background(), events, ev.Name)
		if onEvent != nil {
			onEvent(ev)
		}
	}
	m, err := failovermon.New(cc, fc, func(ctx context.Context, cc *pgx.ConnConfig) error { return connHook(ctx, cc, nil) })
	if err != nil {
		return nil, err
	}
	if e.monitors == nil {
		e.monitors = map[string]*monitorRef{}
	}
	ref := &monitorRef{key: key, m: m, pools: 1}
	e.monitors[key] = ref
	return ref, nil
}

// uniqueName returns name, or name with the first free suffix "-2", "-3"…
// when another live pool of the engine has it. e.mu is held.
func (e *Engine) uniqueName(name string) string {
	taken := func(n string) bool {
		for _, p := range e.pools {
			if p.name == n {
				return true
			}
		}
		return false
	}
	if !taken(name) {
		return name
	}
	for i := 2; ; i++ {
		if n := name + "-" + strconv.Itoa(i); !taken(n) {
			return n
		}
	}
}

// poolDial is the pool config's DialFunc. The connector gives each
// connection a dial of its own (state.go); this one dials for the
// connections it does not build — the blue/green monitors', made from a
// copy of the config — with the engine's dial policy. It also answers
// the connect layer's check that the config's DialFunc was not replaced
// after Configure (dialProbe).
func (p *Pool) poolDial(ctx context.Context, network, addr string) (net.Conn, error) {
	if ctx == dialProbe {
		return nil, errDialProbe
	}
	return p.e.cn.plainDial(ctx, p.base, network, addr)
}

// dialProbe is the context of the connect layer's check of the config's
// DialFunc: poolDial answers errDialProbe at once; any other function (one
// set after Configure) gets a context that is already done.
var dialProbe context.Context = probeContext{}

var errDialProbe = errors.New("holdfast: dial probe")

type probeContext struct{ context.Context }

func (probeContext) Deadline() (time.Time, bool) { return time.Time{}, false }
func (probeContext) Done() <-chan struct{}       { return closedChan }
func (probeContext) Err() error                  { return context.Canceled }
func (probeContext) Value(any) any               { return nil }

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// checkDial reports whether cc's DialFunc is still the engine's (the
// first connect of the pool asks; the answer is kept): a DialFunc set on
// the pool config after Configure would not be seen by holdfast.
func (p *Pool) checkDial(cc *pgx.ConnConfig) error {
	switch p.dialOK.Load() {
	case 1:
		return nil
	case 0:
		state := int32(2)
		if cc.DialFunc != nil {
			if _, err := cc.DialFunc(dialProbe, "tcp", ""); errors.Is(err, errDialProbe) {
				state = 1
			}
		}
		p.dialOK.CompareAndSwap(0, state)
		if p.dialOK.Load() == 1 {
			return nil
		}
	}
	return p.e.configError("pgxpool.Config.ConnConfig.DialFunc",
		"replaced after Configure: set it before Configure, or give it with WithIntegration(holdfast.Integration{Dial: ...})", nil)
}

// telemetryConnect is the telemetry layer's BeforeConnect: the connect
// span and metrics around every later layer, so that a connect that one
// of them holds or refuses is counted too; log lines name the pool's
// database. Its errors carry no secret holdfast knows.
func (p *Pool) telemetryConnect(ctx context.Context, c compose.Conn, cc *pgx.ConnConfig, next compose.ConnectFunc) error {
	ctx = obs.WithTarget(ctx, p.target)
	var err error
	if tel := p.telemetry(ctx, cc); tel != nil {
		err = tel.BeforeConnect(ctx, cc, func(ctx context.Context, cc *pgx.ConnConfig) error { return next(ctx, c, cc) })
	} else {
		err = next(ctx, c, cc)
	}
	if err != nil {
		p.beforeConnectFailed(ctx, c, err)
	}
	return p.e.cn.redact(err)
}

// beforeConnectFailed writes the ERROR line of a connect that a layer's
// BeforeConnect ended (a password function that failed for good, a
// configuration error) when no retry fixes it: pgx makes no connection,
// so the connector's own end (endRetries) never sees it.
func (p *Pool) beforeConnectFailed(ctx context.Context, c compose.Conn, err error) {
	attempts, layer := 1, LayerConnect
	var re *retry.Error
	if errors.As(err, &re) {
		attempts = re.Attempts
	}
	if s, ok := c.(*connState); ok && s.failedLayer != "" {
		layer = s.failedLayer
	}
	p.e.tel.ConnectFailed(ctx, layer, p.e.cfg.Classifier.Classify(err), attempts, false, err)
}

// telemetry returns the pool's instrumentation: the one built at
// Configure, or, with the global providers, one built at the first connect
// after the application installed its SDK. Connections made from then on
// get their connect span and metrics, statement durations and connection
// counts; the acquire and release metrics need a tracer on the pool
// config, which only Configure can install.
func (p *Pool) telemetry(ctx context.Context, cc *pgx.ConnConfig) *obs.Pool {
	if p.tel != nil || !p.lazyTel {
		return p.tel
	}
	if t := p.lateTel.Load(); t != nil {
		return t
	}
	if !p.e.tel.Active(ctx) {
		return nil
	}
	p.lateMu.Lock()
	defer p.lateMu.Unlock()
	if t := p.lateTel.Load(); t != nil {
		return t
	}
	t := p.e.tel.Pool(ctx, cc, p.name)
	if pool := p.comp.Pool(); pool != nil {
		t.Watch(pool)
	}
	p.lateTel.Store(t)
	return t
}

// connect is the connect layer's BeforeConnect: a fresh password for the
// name the server answers to, the config's own BeforeConnect (next), then
// the connector, last, so that it sees the user's changes: every dial of
// this connection (sslmode=prefer's two, several hosts, retry rounds after
// a failed handshake) shares one allowance (state.go).
func (p *Pool) connect(ctx context.Context, h compose.Conn, cc *pgx.ConnConfig, next compose.ConnectFunc) error {
	cn := p.e.cn
	c := h.(*connState) // the handle newConn made: the connector's own state
	c.ctx = ctx         // the telemetry's: it names the target and carries the connect span
	if err := p.checkDial(cc); err != nil {
		// Set on the pool config after Configure: holdfast would not see
		// the dials. Fail loudly rather than connect unprotected.
		return err
	}
	if cn.password != nil {
		if err := cn.issuePassword(ctx, cc, c.authHosts, p.tokenHeld(ctx, c)); err != nil {
			c.failedLayer = LayerPassword
			return err
		}
	}
	if err := next(ctx, h, cc); err != nil {
		return err
	}
	if cc.Password != p.static {
		// A fetched token, before prepare's first dial can log an
		// error that echoes it (the telemetry layer registers it again
		// once this returns).
		p.e.tel.Secret(cc.Password)
	}
	c.prepare(ctx)
	return nil
}

// tokenHeld is the heldFunc of c's password fetch: a fetch that failed
// with a retryable error (the token source down: an IAM token API's 503)
// is a sign for the outage layer, whose prober checks at once, and the
// fetch waits for its verdict as a failed dial does (connState.hold):
// while the token source is down no connect of the pool fetches on its
// own, and at "back" each starts afresh. A pool without the layer, or
// one not yet connected (startup's), retries under the policy.
func (p *Pool) tokenHeld(ctx context.Context, c *connState) heldFunc {
	if p.out == nil {
		return nil
	}
	return func(err error) (bool, error) {
		if !p.e.cn.classifier.Classify(err).Retryable() {
			return false, nil
		}
		p.out.CredentialsFailed()
		return c.hold(ctx)
	}
}

// monitorConnect prepares a monitor's connection (blue/green, failover,
// the outage prober's check): no cancel request (noCancelRequest), the
// engine's password, issued for the monitor's server (authHosts, the
// blue/green router's names for it; nil: its host), never the pool's
// hooks.
func (p *Pool) monitorConnect(ctx context.Context, cc *pgx.ConnConfig, authHosts []string) error {
	return p.monitorConnectWith(ctx, cc, authHosts, nil)
}

// monitorConnectWith is monitorConnect, its password fetch asking held
// after a failure (fetchOnce: the outage prober's check).
func (p *Pool) monitorConnectWith(ctx context.Context, cc *pgx.ConnConfig, authHosts []string, held heldFunc) error {
	noCancelRequest(cc)
	cn := p.e.cn
	if cn.password == nil {
		return nil
	}
	if err := cn.issuePassword(ctx, cc, authHosts, held); err != nil {
		return err
	}
	p.e.tel.Secret(cc.Password)
	return nil
}

// noCancelRequest makes cc, a copy made for one monitor connection, dial
// nothing once the connection is made: pgx's cancel requests (when a
// bounded query's context ends, and whenever it closes the connection
// after a failure) fail at once instead. A monitor's queries are short
// reads bounded by their own deadlines, whose connection is dropped after
// a failure; a cancel request would only dial the server the monitor
// just found failing — at a failover, every monitor's connection to the
// old writer at once.
func noCancelRequest(cc *pgx.ConnConfig) {
	dial, after := cc.DialFunc, cc.AfterConnect
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	var made atomic.Bool
	cc.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if made.Load() {
			return nil, errMonitorCancel
		}
		return dial(ctx, network, addr)
	}
	cc.AfterConnect = func(ctx context.Context, pc *pgconn.PgConn) error {
		made.Store(true) // the connect's dials are over (pgconn calls it once, after them)
		if after != nil {
			return after(ctx, pc)
		}
		return nil
	}
}

// errMonitorCancel is what pgx's cancel request on a monitor's
// connection returns (noCancelRequest): none is sent.
var errMonitorCancel = errors.New("holdfast: no cancel request on a monitor's connection")

// close stops the layers' goroutines (the blue/green monitors, the outage
// layer's prober, joined) and leaves the cluster's failover monitor to
// the pools still on it. Idempotent.
func (p *Pool) close() {
	if p == nil || !p.closed.CompareAndSwap(false, true) {
		return
	}
	if p.bg != nil {
		p.bg.Close()
	}
	if p.fo != nil {
		p.fo.Leave()
	}
	if p.out != nil {
		p.out.Close()
	}
}
