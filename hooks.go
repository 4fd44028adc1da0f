package holdfast

import (
	"context"
	"net"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/internal/obs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/multitracer"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// This file is the one place where holdfast's layers meet pgxpool's hooks.
// Configure composes them, in this order, outermost first, and the user's
// hooks last:
//
//	BeforeConnect  telemetry (times and counts every connect, even one a
//	               later layer holds or refuses) → blue/green routing (holds,
//	               refuses, substitutes addresses, gives TLS and the password
//	               the names of the server reached) → failover (holds a
//	               connect by the writer endpoint while no writer is known)
//	               → connect (fresh password for that name under the retry
//	               policy; one dial allowance per connection) → the user's
//	               BeforeConnect
//	DialFunc       failover (the new writer's address while DNS lags) →
//	               classification and bounded retry around the integration's
//	               dial (WithDialFunc, cloudsql.With), the config's, or pgx's
//	ValidateConnect failover (refuses a writer-endpoint connection that
//	               reached a reader) → the user's (target_session_attrs)
//	PrepareConn    eviction (connections to a server that just failed, or
//	               that a failover left) → failover (to a writer that is
//	               down) → blue/green routing → the user's PrepareConn (or
//	               the deprecated BeforeAcquire)
//	AfterRelease   blue/green routing → the user's, only when one is set
//	Tracer         pool level: [blue/green, the user's tracer] then
//	               telemetry's acquire/release tracer; per connection,
//	               telemetry's statement tracer wraps [blue/green, user's]
//
// With neither blue/green nor telemetry, PrepareConn, AfterRelease and the
// Tracer are the user's own: Acquire costs what pgxpool's costs.

// poolHooks holds one configured pool config's layers. The Factory owns it:
// Factory.Close closes it (and joins its blue/green monitors).
type poolHooks struct {
	f    *Factory
	base pgconn.DialFunc // the dial that the factory wraps

	userBefore  func(context.Context, *pgx.ConnConfig) error
	userPrepare func(context.Context, *pgx.Conn) (bool, error)

	bg  *bluegreen.Router // WithBlueGreen; nil when off
	fo  *foState          // WithFailover; nil when off (failover.go)
	tel *obs.Pool         // nil when telemetry was inactive at Configure

	// With the global OpenTelemetry providers and no SDK installed yet at
	// Configure, the connect layer checks at each connect whether one has
	// been installed since, and instruments connections from then on.
	lazyTel  bool
	lateTel  atomic.Pointer[obs.Pool]
	lateMu   sync.Mutex
	attached atomic.Pointer[pgxpool.Pool]

	// evict, when set, makes PrepareConn destroy connections made before
	// a network failure of another connection to the same server.
	evict atomic.Pointer[eviction]

	static string      // the config's own password, registered with the redactor
	target *obs.Target // what log lines name
}

// Configure installs the factory into cfg, which must come from
// pgxpool.ParseConfig: classification and bounded retry around every dial
// (of the dial function of WithDialFunc or an integration such as
// cloudsql.With, else of cfg.ConnConfig.DialFunc, else pgx's), a fresh
// password per connection (WithPasswordFunc, rdsiam.With), blue/green
// routing (WithBlueGreen) and telemetry, composed in one declared order
// with the hooks already on cfg, which keep running after holdfast's (see
// the package documentation). Set your own hooks before Configure.
//
// Retries are counted per connection, not per dial: with sslmode=prefer pgx
// dials twice for one connection (TLS, then plain), and both dials draw on
// the same MaxAttempts.
//
// With WithBlueGreen, the pool's blue/green monitors start when the pool
// first connects, on goroutines that Factory.Close joins. They dial
// through the factory's dial path and fetch the factory's password, and
// never run the pool's own BeforeConnect.
//
// Configure returns a *ConfigError for a nil factory or config, for a
// config this factory already configured (configure a config once;
// NewPool accepts one that was), and after Close.
func (f *Factory) Configure(cfg *pgxpool.Config) error {
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
	key := weak.Make(cfg)
	if f.configured[key] != nil {
		return &ConfigError{Field: "pgxpool.Config", Why: "already configured by this factory: configure a config once"}
	}
	ph, err := f.compose(cfg)
	if err != nil {
		return err
	}
	if f.configured == nil {
		f.configured = map[weak.Pointer[pgxpool.Config]]*poolHooks{}
	}
	f.configured[key] = ph
	f.pools = append(f.pools, ph)
	runtime.AddCleanup(cfg, f.unconfigure, key)
	return nil
}

// unconfigure forgets a config that was garbage collected.
func (f *Factory) unconfigure(key weak.Pointer[pgxpool.Config]) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.configured, key)
}

// hooksOf returns the layers this factory composed into cfg, or nil.
func (f *Factory) hooksOf(cfg *pgxpool.Config) *poolHooks {
	if f == nil || cfg == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.configured[weak.Make(cfg)]
}

// forget closes ph, whose pool could not be built or started.
func (f *Factory) forget(ph *poolHooks) {
	if ph == nil {
		return
	}
	f.mu.Lock()
	for i, p := range f.pools {
		if p == ph {
			f.pools = append(f.pools[:i:i], f.pools[i+1:]...)
			break
		}
	}
	f.mu.Unlock()
	ph.close()
}

// compose builds cfg's layers and installs them. f.mu is held.
func (f *Factory) compose(cfg *pgxpool.Config) (*poolHooks, error) {
	cc := cfg.ConnConfig
	ph := &poolHooks{f: f, base: cc.DialFunc, userBefore: cfg.BeforeConnect, static: cc.Password}
	if f.dialFn != nil {
		ph.base = f.dialFn
	}
	if f.encrypted {
		cc.TLSConfig = nil
		cc.Fallbacks = nil
		cc.LookupFunc = func(_ context.Context, host string) ([]string, error) {
			return []string{host}, nil
		}
	}
	if ph.base == nil {
		ph.base = (&net.Dialer{}).DialContext // pgx's default; tuned per socket (netdial.go)
	}
	cc.DialFunc = ph.dial

	// The user's PrepareConn, or the deprecated BeforeAcquire (pgxpool
	// ignores BeforeAcquire when PrepareConn is set).
	ph.userPrepare = cfg.PrepareConn
	//lint:ignore SA1019 the user's deprecated hook is honoured, not used
	if ba := cfg.BeforeAcquire; ph.userPrepare == nil && ba != nil {
		ph.userPrepare = func(ctx context.Context, c *pgx.Conn) (bool, error) { return ba(ctx, c), nil }
	}

	if f.blueGreen != nil {
		r, err := bluegreen.NewRouter(cc, f.observerFor(obs.PoolName(cc, f.poolName)), ph.monitorConnect)
		if err != nil {
			return nil, &ConfigError{Field: "WithBlueGreen", Why: "cannot install blue/green routing", Err: err}
		}
		ph.bg = r
	}
	if f.failover != nil {
		if err := ph.installFailover(cc); err != nil {
			return nil, err
		}
	}
	f.tel.Secret(cc.Password)
	ph.tel = f.tel.Pool(context.Background(), cc, f.poolName)
	ph.lazyTel = ph.tel == nil && f.meterProvider == nil && f.tracerProvider == nil
	ph.target = obs.NewTarget(cc, f.poolName)

	// BeforeConnect: telemetry → blue/green → connect → the user's.
	cfg.BeforeConnect = ph.beforeConnect

	// PrepareConn: eviction → blue/green → the user's. AfterRelease:
	// blue/green → the user's.
	//lint:ignore SA1019 cleared because PrepareConn replaces it
	cfg.BeforeAcquire = nil
	cfg.PrepareConn = ph.prepareConn
	if ph.bg != nil {
		if after := cfg.AfterRelease; after != nil {
			// Only when one is set: pgxpool starts a goroutine per Release
			// when AfterRelease is set.
			cfg.AfterRelease = func(c *pgx.Conn) bool { return ph.bg.KeepOnRelease(c) && after(c) }
		}
	}

	// Tracers: [blue/green, user's], then telemetry's pool tracer.
	tracer := cc.Tracer
	if ph.bg != nil {
		if tracer == nil {
			tracer = ph.bg.Tracer()
		} else {
			tracer = multitracer.New(ph.bg.Tracer(), tracer)
		}
	}
	if ph.tel != nil {
		tracer = ph.tel.Tracer(tracer)
	}
	cc.Tracer = tracer
	return ph, nil
}

// dialPointer identifies poolHooks.dial method values, so that a DialFunc
// replaced after Configure is noticed.
var dialPointer = reflect.ValueOf((&poolHooks{}).dial).Pointer()

// dial is the pool's DialFunc: the fast path first, then the retry loop.
func (ph *poolHooks) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := ph.f.firstDial(ctx, ph.base, network, addr)
	if err == nil {
		return conn, nil
	}
	conn, _, err = ph.f.redial(ctx, ph.base, network, addr, err, ph.f.maxDials)
	return conn, ph.f.redact(err)
}

// beforeConnect is the pool's BeforeConnect; its errors carry no secret
// holdfast knows.
func (ph *poolHooks) beforeConnect(ctx context.Context, cc *pgx.ConnConfig) error {
	return ph.f.redact(ph.beforeConnectRedacted(ctx, cc))
}

func (ph *poolHooks) beforeConnectRedacted(ctx context.Context, cc *pgx.ConnConfig) error {
	ctx = obs.WithTarget(ctx, ph.target)
	if ph.bg != nil {
		ph.bg.Start() // the monitors start with the pool (idempotent)
	}
	if tel := ph.telemetry(ctx, cc); tel != nil {
		return tel.BeforeConnect(ctx, cc, ph.route)
	}
	return ph.route(ctx, cc)
}

// telemetry returns the pool's instrumentation: the one built at
// Configure, or, with the global providers, one built at the first connect
// after the application installed its SDK. Connections made from then on
// get their connect span and metrics, statement durations and connection
// counts; the acquire and release metrics need a tracer on the pool
// config, which only Configure can install.
func (ph *poolHooks) telemetry(ctx context.Context, cc *pgx.ConnConfig) *obs.Pool {
	if ph.tel != nil || !ph.lazyTel {
		return ph.tel
	}
	if p := ph.lateTel.Load(); p != nil {
		return p
	}
	if !ph.f.tel.Active(ctx) {
		return nil
	}
	ph.lateMu.Lock()
	defer ph.lateMu.Unlock()
	if p := ph.lateTel.Load(); p != nil {
		return p
	}
	p := ph.f.tel.Pool(ctx, cc, ph.f.poolName)
	if pool := ph.attached.Load(); pool != nil {
		p.Watch(pool)
	}
	ph.lateTel.Store(p)
	return p
}

// route is the blue/green layer of BeforeConnect. The context it passes
// on carries the names to issue the password for (bluegreen.AuthHosts)
// when the routing sends the connection to a server that answers to
// another name.
func (ph *poolHooks) route(ctx context.Context, cc *pgx.ConnConfig) error {
	if ph.bg != nil {
		var err error
		if ctx, err = ph.bg.Route(ctx, cc); err != nil {
			return err
		}
	}
	if ph.fo != nil {
		if err := ph.hold(ctx, cc); err != nil {
			return err
		}
	}
	return ph.connect(ctx, cc)
}

// issuePassword sets cc's password to a fresh one from the factory's
// password function, issued for the name the server answers to: the first
// of the routing's names (bluegreen.AuthHosts), else cc's host. It returns
// the routing's names in order (nil when it named none).
func (f *Factory) issuePassword(ctx context.Context, cc *pgx.ConnConfig) ([]string, error) {
	host, hosts := cc.Host, bluegreen.AuthHosts(ctx)
	if len(hosts) > 0 {
		host = hosts[0]
	}
	pw, err := f.fetchPassword(ctx, host)
	if err != nil {
		return nil, err
	}
	cc.Password = pw
	if len(hosts) == 0 {
		return nil, nil
	}
	return hosts, nil
}

// connect is the factory's own layer of BeforeConnect: a fresh password and
// one dial allowance for a connection pgx may dial more than once; then the
// user's BeforeConnect.
func (ph *poolHooks) connect(ctx context.Context, cc *pgx.ConnConfig) error {
	f := ph.f
	if reflect.ValueOf(cc.DialFunc).Pointer() != dialPointer {
		// Set on the pool config after Configure: holdfast would not see
		// the dials. Fail loudly rather than connect unprotected.
		return &ConfigError{Field: "pgxpool.Config.ConnConfig.DialFunc",
			Why: "replaced after Configure: set it before Configure, or use WithDialFunc"}
	}
	var hosts []string
	if f.password != nil {
		var err error
		if hosts, err = f.issuePassword(ctx, cc); err != nil {
			return err
		}
	}
	if ph.userBefore != nil {
		if err := ph.userBefore(ctx, cc); err != nil {
			return err
		}
	}
	// Last, so that it sees the user's changes: every dial of this
	// connection (sslmode=prefer's two, several hosts, retry rounds after
	// a failed handshake) shares one allowance (connect.go).
	(&attempt{f: f, ph: ph, base: ph.base, cc: cc, target: ph.target, rounds: f.maxDials, authHosts: hosts}).install()
	if ph.tel == nil && ph.lateTel.Load() == nil && cc.Password != ph.static {
		// Inactive telemetry: only watch fetched tokens for the log
		// redactor, off the Acquire path (active telemetry does it).
		f.tel.Secret(cc.Password)
	}
	return nil
}

// monitorConnect prepares a blue/green monitor's connection: the factory's
// password, issued for the monitor's server, never the pool's hooks.
func (ph *poolHooks) monitorConnect(ctx context.Context, cc *pgx.ConnConfig) error {
	if ph.f.password == nil {
		return nil
	}
	if _, err := ph.f.issuePassword(ctx, cc); err != nil {
		return err
	}
	ph.f.tel.Secret(cc.Password)
	return nil
}

// prepareConn is the pool's PrepareConn: one atomic load, plus one per
// layer that is on, when nothing is wrong.
func (ph *poolHooks) prepareConn(ctx context.Context, c *pgx.Conn) (bool, error) {
	if e := ph.evict.Load(); e != nil && ph.evicted(e, c) {
		return false, nil // pgxpool destroys it and tries another
	}
	if ph.fo != nil {
		if s := ph.fo.m.Snapshot(); s.Down && !ph.bg.Routing() && c.PgConn().Conn().RemoteAddr().String() == s.DownAddr {
			return false, nil // the writer stopped answering: a new connection is held until one is known
		}
	}
	if ph.bg != nil {
		if keep, err := ph.bg.PrepareConn(ctx, c); !keep || err != nil {
			return keep, err
		}
	}
	if ph.userPrepare == nil {
		return true, nil
	}
	return ph.userPrepare(ctx, c)
}

// eviction is a server that just failed one of the pool's connections;
// prev, the evictions before it still in force (at most evictDepth).
type eviction struct {
	addr string
	at   time.Time
	prev *eviction
}

// evictDepth bounds how many servers are evicted at once.
const evictDepth = 4

// evictWindow is how long after a network failure PrepareConn checks the
// pool's connections against it; then the check costs nothing again.
const evictWindow = time.Minute

// evictHost presumes dead every connection to addr made before now.
func (ph *poolHooks) evictHost(addr string) {
	if ph == nil || addr == "" {
		return
	}
	now := time.Now()
	e := &eviction{addr: addr, at: now}
	tail := e
	for old, n := ph.evict.Load(), 1; old != nil && n < evictDepth; old, n = old.prev, n+1 {
		if old.addr != addr && now.Sub(old.at) <= evictWindow {
			tail.prev = &eviction{addr: old.addr, at: old.at}
			tail = tail.prev
		}
	}
	ph.evict.Store(e)
}

// evicted reports whether c was made before e's failure, to e's server.
func (ph *poolHooks) evicted(e *eviction, c *pgx.Conn) bool {
	if time.Since(e.at) > evictWindow {
		ph.evict.CompareAndSwap(e, nil)
		return false
	}
	a, ok := c.PgConn().CustomData()[madeKey].(*attempt)
	for ; ok && e != nil; e = e.prev {
		if a.addr == e.addr && a.madeAt.Before(e.at) {
			return true
		}
	}
	return false
}

// attach tells the layers which pool they serve: Factory.Start calls it
// with the pool whose first connection the layers made.
func (ph *poolHooks) attach(pool *pgxpool.Pool) {
	if ph == nil {
		return
	}
	if ph.bg != nil {
		ph.bg.Attach(pool)
	}
	ph.attached.Store(pool)
	ph.tel.Watch(pool)
	ph.lateTel.Load().Watch(pool)
}

// close stops the layers' goroutines (the blue/green monitors).
func (ph *poolHooks) close() {
	if ph != nil && ph.bg != nil {
		ph.bg.Close()
	}
}
