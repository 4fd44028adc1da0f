// Package compose is the one composer of pgxpool's hooks: holdfast's
// factory (Configure) and bluegreen.New both describe their layers as
// data ([Layer]) and let [Composition.Install] build the config's hooks
// from them, in the one declared order ([Order]), with the hooks the
// config had (the user's) last. The pool config keeps its composition in
// its tracer, so that a pool finds its layers again from
// pool.Config() ([Of]) without any other index.
package compose

import (
	"context"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The layers, by name.
const (
	Telemetry = "telemetry" // times and counts every connect, even one a later layer holds or refuses
	BlueGreen = "bluegreen" // switchover routing: holds, refuses, substitutes addresses and names
	Failover  = "failover"  // writer failover: holds by the writer endpoint, routes to the new writer, cuts the old
	Eviction  = "eviction"  // destroys connections to a server that just failed
	Connect   = "connect"   // the connector: fresh password, retried dials and handshakes
	User      = "user"      // the hooks the config had before it was composed
)

// Order is the order in which the layers compose, outermost first: a
// layer's BeforeConnect runs before the next ones' (around them, for the
// telemetry), its PrepareConn before theirs, its tracer wraps theirs. It
// is declared here only; the package documentation of holdfast shows it
// (a test compares the two).
var Order = [...]string{Telemetry, BlueGreen, Failover, Eviction, Connect, User}

// Layer is one concern's part of a pool's hooks. Every field is optional.
type Layer struct {
	// BeforeConnect runs around the next layers' BeforeConnect (next,
	// never nil), and may change the context they get.
	BeforeConnect func(ctx context.Context, cc *pgx.ConnConfig, next func(context.Context, *pgx.ConnConfig) error) error
	// PrepareConn runs before the next layers'; false or an error ends
	// the chain (pgxpool destroys the connection, or fails the Acquire).
	// It runs on every Acquire: it must cost an atomic load when nothing
	// is wrong.
	PrepareConn func(ctx context.Context, c *pgx.Conn) (bool, error)
	// AfterRelease runs before the next layers'; false destroys the
	// connection. It is installed only when the config had one of its
	// own: pgxpool starts a goroutine per Release when one is set.
	AfterRelease func(c *pgx.Conn) bool
	// Tracer returns the tracer of the pool's connections given next, the
	// tracers of the layers after it (nil when there are none).
	Tracer func(next pgx.QueryTracer) pgx.QueryTracer
	// Attach tells the layer which pool it serves, when the composition
	// learns it (Composition.Attach).
	Attach func(pool *pgxpool.Pool)
	// AttachOnAcquire makes the composition learn its pool at the pool's
	// first Acquire (a pool-level tracer: one atomic load per Acquire
	// from then on), for a layer that must act on the pool's idle
	// connections as soon as it can. Otherwise the pool is learnt at
	// Factory.Start or when a layer of it is looked up from the pool.
	AttachOnAcquire bool
}

// Composition is one pool config's layers, from [Begin] to [Install],
// then the pool's: what its layers share. Its fields are set before
// Install and read-only after it.
type Composition struct {
	layers [len(Order)]*Layer

	// The config's own hooks, taken by Begin.
	userBefore  func(context.Context, *pgx.ConnConfig) error
	userPrepare func(context.Context, *pgx.Conn) (bool, error)
	userRelease func(*pgx.Conn) bool
	userTracer  pgx.QueryTracer

	// Owner is what composed the config (holdfast's factory keeps its
	// binding of the pool here; bluegreen.New alone, its Router).
	Owner any
	// BlueGreen is the pool's *bluegreen.Router, set by bluegreen.New.
	BlueGreen any

	// Coordination between layers, through the composition only.
	//
	// Switchover, set by the blue/green layer, reports whether a
	// switchover routes the pool now (one atomic load): the failover
	// layer stands down meanwhile.
	Switchover func() bool
	// RetryRoute, set by the blue/green layer, routes a retry of a
	// connection's dial to host, which was routed once in BeforeConnect:
	// it holds the retry while the switchover suspends connects to host
	// (bounded, as BeforeConnect's hold is), and returns the address to
	// dial, or an error (*bluegreen.SuspendError, *bluegreen.RejectError).
	// One atomic load outside a switchover.
	RetryRoute func(ctx context.Context, host, addr string) (string, error)
	// MonitorConnect, set by the factory before the blue/green layer is
	// added, prepares the connection of a monitor of the pool (a fresh
	// token for the monitor's server); nil: the config's own BeforeConnect.
	MonitorConnect func(context.Context, *pgx.ConnConfig) error

	installed bool
	chain     pgx.QueryTracer // the composed tracer of the pool's connections
	pool      atomic.Pointer[pgxpool.Pool]
}

// Begin starts composing cfg: it takes the hooks cfg has (they run last,
// as layer User), and marks cfg so that [Pending] finds the composition
// until [Composition.Install]. cfg.ConnConfig must be set.
func Begin(cfg *pgxpool.Config) *Composition {
	c := &Composition{
		userBefore:  cfg.BeforeConnect,
		userPrepare: cfg.PrepareConn,
		userRelease: cfg.AfterRelease,
		userTracer:  cfg.ConnConfig.Tracer,
	}
	//lint:ignore SA1019 the user's deprecated hook is honoured, not used
	if ba := cfg.BeforeAcquire; c.userPrepare == nil && ba != nil {
		// pgxpool ignores BeforeAcquire when PrepareConn is set: run it
		// from the chain, as pgxpool would have.
		c.userPrepare = func(ctx context.Context, pc *pgx.Conn) (bool, error) { return ba(ctx, pc), nil }
	}
	cfg.ConnConfig.Tracer = &carrier{c: c}
	return c
}

// Pending returns the composition that Begin started on cfg and that is
// not installed yet, or nil.
func Pending(cfg *pgxpool.Config) *Composition {
	if c := Of(cfg); c != nil && !c.installed {
		return c
	}
	return nil
}

// Of returns the composition of cfg (from Begin on), or nil for a config
// that was not composed.
func Of(cfg *pgxpool.Config) *Composition {
	if cfg == nil || cfg.ConnConfig == nil {
		return nil
	}
	switch t := cfg.ConnConfig.Tracer.(type) {
	case *carrier:
		return t.c
	case *poolCarrier:
		return t.c
	}
	return nil
}

// OfPool returns the composition of pool's config, or nil. It copies the
// pool's config (pool.Config): not for a hot path.
func OfPool(pool *pgxpool.Pool) *Composition {
	if pool == nil {
		return nil
	}
	c := Of(pool.Config())
	if c != nil {
		c.Attach(pool)
	}
	return c
}

// BlueGreenRouter returns c's BlueGreen, or nil for a nil c.
func (c *Composition) BlueGreenRouter() any {
	if c == nil {
		return nil
	}
	return c.BlueGreen
}

// Add sets the layer named name (one of Order, not User).
func (c *Composition) Add(name string, l Layer) {
	for i, n := range Order {
		if n == name {
			c.layers[i] = &l
			return
		}
	}
	panic("compose: unknown layer " + name) // a programming error of holdfast's
}

// Has reports whether the layer named name was added.
func (c *Composition) Has(name string) bool {
	for i, n := range Order {
		if n == name {
			return c.layers[i] != nil
		}
	}
	return false
}

// Install builds cfg's hooks from the layers, in Order, the config's own
// last: BeforeConnect, PrepareConn (the deprecated BeforeAcquire is
// cleared: PrepareConn runs it), AfterRelease (only when the config had
// one) and the tracer. Layers without a hook cost nothing on it.
func (c *Composition) Install(cfg *pgxpool.Config) {
	c.installed = true
	layers := c.ordered()

	// BeforeConnect: each layer around the next, the user's innermost.
	before := c.userBefore
	if before == nil {
		before = func(context.Context, *pgx.ConnConfig) error { return nil }
	}
	for i := len(layers) - 1; i >= 0; i-- {
		if h := layers[i].BeforeConnect; h != nil {
			next := before
			before = func(ctx context.Context, cc *pgx.ConnConfig) error { return h(ctx, cc, next) }
		}
	}
	chainBefore := before
	cfg.BeforeConnect = func(ctx context.Context, cc *pgx.ConnConfig) error {
		// A connection gets the composed tracer, not the pool's carrier:
		// its statements pay for the layers' tracers only.
		cc.Tracer = c.chain
		return chainBefore(ctx, cc)
	}

	// PrepareConn: each layer before the next; the first that says no
	// ends the chain.
	prepare := c.userPrepare
	for i := len(layers) - 1; i >= 0; i-- {
		if h := layers[i].PrepareConn; h != nil {
			next := prepare
			if next == nil {
				prepare = h
				continue
			}
			prepare = func(ctx context.Context, pc *pgx.Conn) (bool, error) {
				if keep, err := h(ctx, pc); !keep || err != nil {
					return keep, err
				}
				return next(ctx, pc)
			}
		}
	}
	//lint:ignore SA1019 cleared because PrepareConn replaces it
	cfg.BeforeAcquire = nil
	cfg.PrepareConn = prepare

	// AfterRelease: only when the config had one.
	if release := c.userRelease; release != nil {
		for i := len(layers) - 1; i >= 0; i-- {
			if h := layers[i].AfterRelease; h != nil {
				next := release
				release = func(pc *pgx.Conn) bool { return h(pc) && next(pc) }
			}
		}
		cfg.AfterRelease = release
	}

	// The tracer: each layer's around the next, the user's innermost.
	tracer := c.userTracer
	for i := len(layers) - 1; i >= 0; i-- {
		if h := layers[i].Tracer; h != nil {
			tracer = h(tracer)
		}
	}
	c.chain = tracer
	attach := false
	for _, l := range layers {
		attach = attach || (l.Attach != nil && l.AttachOnAcquire)
	}
	cfg.ConnConfig.Tracer = newCarrier(c, tracer, attach)
}

// ordered returns the layers that were added, in Order.
func (c *Composition) ordered() []*Layer {
	var out []*Layer
	for _, l := range c.layers {
		if l != nil {
			out = append(out, l)
		}
	}
	return out
}

// Attach tells the layers which pool the composition serves: the first
// pool attached is kept. It is cheap once the pool is known.
func (c *Composition) Attach(pool *pgxpool.Pool) {
	if c == nil || pool == nil || c.pool.Load() != nil || !c.pool.CompareAndSwap(nil, pool) {
		return
	}
	for _, l := range c.ordered() {
		if l.Attach != nil {
			l.Attach(pool)
		}
	}
}

// Pool returns the pool attached, or nil.
func (c *Composition) Pool() *pgxpool.Pool { return c.pool.Load() }
