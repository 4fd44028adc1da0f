package holdfast

import (
	"cmp"
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/internal/admit"
	"github.com/holdfast-db/holdfast/internal/compose"
	"github.com/holdfast-db/holdfast/internal/obs"
	"github.com/holdfast-db/holdfast/retry"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// This file binds a factory's layers to a pool config. Configure describes
// each layer as data (compose.Layer: what it adds to BeforeConnect,
// PrepareConn, AfterRelease, the tracer) and internal/compose builds the
// config's hooks from them in the one declared order, compose.Order (the
// package documentation shows it as a table, and a test keeps the two
// alike). With neither blue/green nor telemetry, PrepareConn is the
// eviction check (one atomic load) before the user's, and AfterRelease and
// the connections' tracer are the user's own: Acquire costs what pgxpool's
// costs.

// binding is one pool config's layers, as a factory composed them: found
// again from the config or its pool (bindingOf), through the composition
// the config's tracer carries. The Factory owns it: Factory.Close and
// ClosePool close it (and join its blue/green monitors).
type binding struct {
	f    *Factory
	comp *compose.Composition
	base pgconn.DialFunc // the dial the connector wraps

	observers observers         // what the layers learn of the pool's connections (connect.go)
	bg        *bluegreen.Router // WithBlueGreen; nil when off
	fo        *foLayer          // WithFailover; nil when off (failover.go)
	ev        *eviction         // evict.go
	tel       *obs.Pool         // nil when telemetry was inactive at Configure
	adm       *admit.Limiter    // the admission limit of the pool's connects; nil when off (admit.go)

	// With the global OpenTelemetry providers and no SDK installed yet at
	// Configure, the connect layer checks at each connect whether one has
	// been installed since, and instruments connections from then on.
	lazyTel bool
	lateTel atomic.Pointer[obs.Pool]
	lateMu  sync.Mutex

	static string      // the config's own password, registered with the redactor
	name   string      // the pool's name: PoolName, WithPoolName or host:port/database (unique in the factory)
	target *obs.Target // what log lines name

	// dialOK: 0 until the first connect checked that the config's DialFunc
	// is still the factory's; then 1, or 2 when it was replaced after
	// Configure (every connect then fails with a *ConfigError).
	dialOK atomic.Int32
	closed atomic.Bool
}

// Configure installs the factory into cfg, which must come from
// pgxpool.ParseConfig: classification and bounded retry around every dial
// (of the dial function of WithDialFunc or an integration such as
// cloudsql.With, else of cfg.ConnConfig.DialFunc, else pgx's), a fresh
// password per connection (WithPasswordFunc, rdsiam.With), blue/green
// routing (WithBlueGreen), writer-failover routing (WithFailover) and
// telemetry, composed in one declared order with the hooks already on
// cfg, which keep running after holdfast's (see the package
// documentation). Set your own hooks before Configure.
//
// Retries are counted per connection, not per dial: with sslmode=prefer pgx
// dials twice for one connection (TLS, then plain), and both dials draw on
// the same MaxAttempts.
//
// With WithBlueGreen or WithFailover, the pool's monitors start when the
// pool first connects, on goroutines that Factory.Close (or ClosePool)
// joins. They dial through the factory's dial path and fetch the
// factory's password, and never run the pool's own BeforeConnect.
//
// Configure returns a *ConfigError for a nil factory or config, for a
// config this factory already configured (configure a config once;
// NewPool accepts one that was), and after Close.
func (f *Factory) Configure(cfg *pgxpool.Config, opts ...PoolOption) error {
	if f == nil {
		return &ConfigError{Field: "Factory", Why: "nil factory: use holdfast.New"}
	}
	if cfg == nil {
		return &ConfigError{Field: "pgxpool.Config", Why: "nil config"}
	}
	if cfg.ConnConfig == nil {
		return &ConfigError{Field: "pgxpool.Config.ConnConfig", Why: "nil: build the config with pgxpool.ParseConfig"}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return &ConfigError{Field: "Factory", Why: "closed"}
	}
	if b := f.bindingOfConfig(cfg); b != nil {
		return &ConfigError{Field: "pgxpool.Config", Why: "already configured by this factory: configure a config once"}
	}
	var po poolOptions
	for _, o := range opts {
		if o != nil {
			o(&po)
		}
	}
	if po.err != nil {
		return po.err
	}
	b, err := f.bind(cfg, f.uniqueName(obs.PoolName(cfg.ConnConfig, cmp.Or(po.name, f.poolName))), &po)
	if err != nil {
		return err
	}
	f.pools = append(f.pools, b)
	return nil
}

// bind composes the factory's layers into cfg. f.mu is held.
func (f *Factory) bind(cfg *pgxpool.Config, name string, po *poolOptions) (*binding, error) {
	cc := cfg.ConnConfig
	b := &binding{f: f, base: cc.DialFunc, static: cc.Password, name: name}
	if f.dialFn != nil {
		b.base = f.dialFn
	}
	if f.encrypted {
		cc.TLSConfig = nil
		cc.Fallbacks = nil
		cc.LookupFunc = func(_ context.Context, host string) ([]string, error) {
			return []string{host}, nil
		}
	}
	if b.base == nil {
		b.base = (&net.Dialer{}).DialContext // pgx's default; tuned per socket (netdial.go)
	}
	comp := compose.Begin(cfg) // takes the config's own hooks: they run last
	comp.Owner = b
	b.comp = comp
	cc.DialFunc = b.poolDial // the dial of the monitors' connections (copies of cc)
	b.ev = &eviction{}
	b.observers = observers{b.ev}
	b.adm = f.connectLimit.limiter(cfg)

	f.tel.Secret(cc.Password)
	b.tel = f.tel.Pool(context.Background(), cc, name)
	b.lazyTel = b.tel == nil && f.meterProvider == nil && f.tracerProvider == nil
	b.target = obs.NewTarget(cc, name)
	comp.Add(compose.Telemetry, compose.Layer{
		BeforeConnect: b.telemetryConnect,
		Tracer: func(next pgx.QueryTracer) pgx.QueryTracer {
			if b.tel == nil {
				return next
			}
			return b.tel.Tracer(next)
		},
		Attach: func(pool *pgxpool.Pool) {
			b.tel.Watch(pool)
			b.lateTel.Load().Watch(pool)
		},
	})

	if f.blueGreen != nil {
		comp.MonitorConnect = b.monitorConnect
		r, err := bluegreen.New(cfg, f.observerFor(name, b.target))
		if err != nil {
			return nil, &ConfigError{Field: "WithBlueGreen", Why: "cannot install blue/green routing", Err: err}
		}
		b.bg = r
	}
	if f.failover != nil {
		mode := f.failover.InstancePools
		if po.instance != nil {
			mode = *po.instance
		}
		if err := b.addFailover(cc, mode); err != nil {
			return nil, err
		}
	}
	comp.Add(compose.Eviction, b.ev.layer())
	comp.Add(compose.Connect, compose.Layer{BeforeConnect: b.connect})
	comp.Install(cfg)
	return b, nil
}

// bindingOfConfig returns this factory's binding of cfg, or nil.
func (f *Factory) bindingOfConfig(cfg *pgxpool.Config) *binding {
	if b := ownerOf(compose.Of(cfg)); b != nil && b.f == f {
		return b
	}
	return nil
}

// bindingOf returns this factory's binding of pool, or nil: found from the
// pool's config, whatever built the pool (NewPool, or Configure and
// pgxpool.NewWithConfig); the binding learns its pool here if it did not
// know it yet.
func (f *Factory) bindingOf(pool *pgxpool.Pool) *binding {
	if f == nil || pool == nil {
		return nil
	}
	if b := ownerOf(compose.OfPool(pool)); b != nil && b.f == f {
		return b
	}
	return nil
}

// ownerOf returns the binding that composed c, or nil.
func ownerOf(c *compose.Composition) *binding {
	if c == nil {
		return nil
	}
	b, _ := c.Owner.(*binding)
	return b
}

// poolDial is the pool config's DialFunc. The connector gives each
// connection a dial of its own (connect.go); this one dials for the
// connections it does not build — the blue/green monitors', made from a
// copy of the config — with the factory's dial policy. It also answers
// the connect layer's check that the config's DialFunc was not replaced
// after Configure (dialProbe).
func (b *binding) poolDial(ctx context.Context, network, addr string) (net.Conn, error) {
	if ctx == dialProbe {
		return nil, errDialProbe
	}
	return b.f.conn.plainDial(ctx, b.base, network, addr)
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

// checkDial reports whether cc's DialFunc is still the factory's (the
// first connect of the binding asks; the answer is kept): a DialFunc set
// on the pool config after Configure would not be seen by holdfast.
func (b *binding) checkDial(cc *pgx.ConnConfig) error {
	switch b.dialOK.Load() {
	case 1:
		return nil
	case 0:
		state := int32(2)
		if cc.DialFunc != nil {
			if _, err := cc.DialFunc(dialProbe, "tcp", ""); errors.Is(err, errDialProbe) {
				state = 1
			}
		}
		b.dialOK.CompareAndSwap(0, state)
		if b.dialOK.Load() == 1 {
			return nil
		}
	}
	return &ConfigError{Field: "pgxpool.Config.ConnConfig.DialFunc",
		Why: "replaced after Configure: set it before Configure, or use WithDialFunc"}
}

// telemetryConnect is the telemetry layer's BeforeConnect: the connect
// span and metrics around every later layer, so that a connect that one
// of them holds or refuses is counted too; log lines name the pool's
// database. Its errors carry no secret holdfast knows.
func (b *binding) telemetryConnect(ctx context.Context, cc *pgx.ConnConfig, next func(context.Context, *pgx.ConnConfig) error) error {
	ctx = obs.WithTarget(ctx, b.target)
	var err error
	if tel := b.telemetry(ctx, cc); tel != nil {
		err = tel.BeforeConnect(ctx, cc, next)
	} else {
		err = next(ctx, cc)
	}
	if err != nil {
		b.beforeConnectFailed(ctx, err)
	}
	return b.f.conn.redact(err)
}

// beforeConnectFailed writes the ERROR line of a connect that a layer's
// BeforeConnect ended (a password function that failed for good, a
// configuration error) when no retry fixes it: pgx makes no connection,
// so the connector's own end (endRetries) never sees it.
func (b *binding) beforeConnectFailed(ctx context.Context, err error) {
	attempts, layer := 1, LayerConnect
	var re *retry.Error
	if errors.As(err, &re) {
		attempts = re.Attempts
	}
	var ce *ConnectError
	if errors.As(err, &ce) && ce.Layer != "" {
		layer = ce.Layer
	}
	b.f.tel.ConnectFailed(ctx, layer, b.f.conn.classifier.Classify(err), attempts, false, err)
}

// telemetry returns the pool's instrumentation: the one built at
// Configure, or, with the global providers, one built at the first connect
// after the application installed its SDK. Connections made from then on
// get their connect span and metrics, statement durations and connection
// counts; the acquire and release metrics need a tracer on the pool
// config, which only Configure can install.
func (b *binding) telemetry(ctx context.Context, cc *pgx.ConnConfig) *obs.Pool {
	if b.tel != nil || !b.lazyTel {
		return b.tel
	}
	if p := b.lateTel.Load(); p != nil {
		return p
	}
	if !b.f.tel.Active(ctx) {
		return nil
	}
	b.lateMu.Lock()
	defer b.lateMu.Unlock()
	if p := b.lateTel.Load(); p != nil {
		return p
	}
	p := b.f.tel.Pool(ctx, cc, b.name)
	if pool := b.comp.Pool(); pool != nil {
		p.Watch(pool)
	}
	b.lateTel.Store(p)
	return p
}

// connect is the connect layer's BeforeConnect: a fresh password for the
// name the server answers to, the config's own BeforeConnect (next), then
// the connector, last, so that it sees the user's changes: every dial of
// this connection (sslmode=prefer's two, several hosts, retry rounds after
// a failed handshake) shares one allowance (connect.go).
func (b *binding) connect(ctx context.Context, cc *pgx.ConnConfig, next func(context.Context, *pgx.ConnConfig) error) error {
	cn := b.f.conn
	if err := b.checkDial(cc); err != nil {
		// Set on the pool config after Configure: holdfast would not see
		// the dials. Fail loudly rather than connect unprotected.
		return err
	}
	hosts := bluegreen.AuthHosts(ctx)
	if cn.password != nil {
		if err := cn.issuePassword(ctx, cc, hosts); err != nil {
			return err
		}
	}
	if err := next(ctx, cc); err != nil {
		return err
	}
	c := &connState{cn: cn, b: b, base: b.base, cc: cc, target: b.target, rounds: cn.maxDials, ctx: ctx}
	if cn.password != nil && len(hosts) > 0 {
		c.authHosts = hosts
	}
	c.prepare()
	if b.tel == nil && b.lateTel.Load() == nil && cc.Password != b.static {
		// Inactive telemetry: only watch fetched tokens for the log
		// redactor, off the Acquire path (active telemetry does it).
		b.f.tel.Secret(cc.Password)
	}
	return nil
}

// monitorConnect prepares a monitor's connection (blue/green, failover):
// the factory's password, issued for the monitor's server, never the
// pool's hooks.
func (b *binding) monitorConnect(ctx context.Context, cc *pgx.ConnConfig) error {
	cn := b.f.conn
	if cn.password == nil {
		return nil
	}
	if err := cn.issuePassword(ctx, cc, bluegreen.AuthHosts(ctx)); err != nil {
		return err
	}
	b.f.tel.Secret(cc.Password)
	return nil
}

// close stops the layers' goroutines (the blue/green monitors) and leaves
// the cluster's failover monitor to the pools still on it. Idempotent.
func (b *binding) close() {
	if b == nil || !b.closed.CompareAndSwap(false, true) {
		return
	}
	if b.bg != nil {
		b.bg.Close()
	}
	if b.fo != nil {
		b.fo.leave()
	}
}
