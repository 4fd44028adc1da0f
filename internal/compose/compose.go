// Package compose is the one composer of a pool's hooks, and the one
// contract between the layers that make them. Each concern of holdfast (the
// telemetry, blue/green routing, failover routing, eviction, the connector)
// describes its part as data, a [Layer]: what it adds to pgxpool's hooks
// (BeforeConnect, PrepareConn, AfterRelease, the tracer) and what it does
// with each connection the connector builds (route a dial, a dial made, a
// handshake to validate, a server error, a failure, a close). Install
// builds the config's hooks and the connections' hook chain ([Chain]) from
// the layers in the one declared order ([Order]), with the config's own
// hooks (the user's) last, and applies the one declared precedence
// ([Precedence]).
//
// Layers meet only here: a layer holds a narrow handle of a connection
// ([Conn]), never the connector's state; it learns of another layer's
// decisions through the composition's events ([Composition.Gone],
// [Composition.Retire]), never by calling it.
//
// The pool config keeps its composition in its tracer, so that the
// composition's owner (the engine's binding of the pool) is found again
// from the config or from pool.Config() ([OwnerOf]) without any other
// index.
package compose

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The layers, by name.
const (
	Telemetry = "telemetry" // times and counts every connect, even one a later layer holds or refuses
	BlueGreen = "bluegreen" // switchover routing: holds, refuses, substitutes addresses and names
	Failover  = "failover"  // writer failover and reader routing: holds, routes, cuts the old writer
	Outage    = "outage"    // holds new connections while the target is down; follows its address; refuses a demoted primary
	Eviction  = "eviction"  // destroys connections to a server that just failed or was left; finds dead idle ones
	Connect   = "connect"   // the connector: fresh password, retried dials and handshakes
	User      = "user"      // the hooks the config had before it was composed
)

// Order is the order in which the layers compose, outermost first: a
// layer's BeforeConnect runs around the next ones', its PrepareConn
// before theirs, its tracer wraps theirs, and its connection hooks
// ([Chain]) run before theirs. It is declared here only; the layer table
// of the repository's docs/guide.md shows it (TestDocumentedLayerOrder
// compares the two).
var Order = [...]string{Telemetry, BlueGreen, Failover, Outage, Eviction, Connect, User}

// Precedence is the one rule of which layer yields to which: while the
// first layer of a pair routes the pool (its Routing reports true), the
// second stands down — its BeforeConnect, PrepareConn, Route, Validate
// and Hold are passed over, and its StandDownWhile learns the signal.
//
// A blue/green switchover moves the writer on purpose (blue turns
// read-only, green takes its names), which failover routing would
// otherwise take for a failover, and the outage layer for a demoted
// primary or a target that is down: blue/green outranks both while it
// routes (a switchover under way). Failover routing outranks the outage
// layer while it routes by a topology (it knows the writer, or holds for
// one): it knows where the new writer is, where the outage layer could
// only wait for the name to move.
var Precedence = [...][2]string{{BlueGreen, Failover}, {BlueGreen, Outage}, {Failover, Outage}}

// Conn is a layer's handle of one connection of the pool, from the start
// of its connect to its close: the connector makes it, and every hook of
// a connection gets it. Its methods are safe for concurrent use.
type Conn interface {
	// Server returns the address ("ip:port") of the connection's current
	// dial, "" before its first.
	Server() string
	// MadeAt returns when the connection's handshake completed (zero
	// before).
	MadeAt() time.Time
	// Abort cuts the connection at any moment from its dial on: a dial
	// under way is canceled (the connector tells no layer it failed), a
	// blocked read or write returns at once, every later one fails before
	// sending anything, with wrap(the I/O error) as its error, and a
	// handshake that completes anyway is refused. It reports whether this
	// call cut it (not an earlier one).
	Abort(wrap func(cause error) error) bool
	// SetAuthHosts names the hosts the connection's password or token is
	// issued for, in order (the second after a refusal of the first):
	// blue/green routing's names for a server that answers to another
	// name than the one asked for. Only a BeforeConnect calls it.
	SetAuthHosts(hosts []string)
	// MarkCommit tells the connection that the next request it sends is
	// a transaction's COMMIT (true; false takes that back): a failure
	// that loses its answer leaves the outcome unknown. The mark ends
	// with that request.
	MarkCommit(next bool)
	// Unread reports, without blocking, whether the server sent the
	// connection bytes it has not read, or closed it: one non-blocking
	// peek of its socket (recv with MSG_PEEK). While the connection is
	// idle nothing is due from the server, so any byte means it spoke
	// unasked (a FATAL before it closes, a NOTIFY, a parameter change).
	// False when it cannot tell (no socket of the kernel's under the
	// dial, another OS). Only its pool's current holder calls it.
	Unread() bool
}

// connKey keeps, in pgconn's CustomData, the handle of a connection that
// the connector made.
const connKey = "holdfast/conn"

// Keep records c as the handle of pc, once its handshake completed.
func Keep(pc *pgconn.PgConn, c Conn) { pc.CustomData()[connKey] = c }

// ConnOf returns the handle of c, or nil for a connection that no
// connector of a composition made.
func ConnOf(c *pgx.Conn) Conn {
	h, _ := c.PgConn().CustomData()[connKey].(Conn)
	return h
}

// HandleOf returns the handle of pc, or nil before its handshake
// completed or for a connection that no connector made: a PgError hook
// tells an established connection's error from a handshake's by it.
func HandleOf(pc *pgconn.PgConn) Conn {
	h, _ := pc.CustomData()[connKey].(Conn)
	return h
}

// ConnectFunc is the rest of a BeforeConnect chain: the next layers',
// then the config's own.
type ConnectFunc func(ctx context.Context, c Conn, cc *pgx.ConnConfig) error

// Layer is one concern's part of a pool's hooks. Every field is optional;
// a layer without a hook costs nothing on it.
type Layer struct {
	// Pool hooks.

	// BeforeConnect runs around the next layers' BeforeConnect (next,
	// never nil, given the same c), and may change the context they get.
	BeforeConnect func(ctx context.Context, c Conn, cc *pgx.ConnConfig, next ConnectFunc) error
	// PrepareConn runs before the next layers'; false or an error ends
	// the chain (pgxpool destroys the connection, or fails the Acquire).
	// It runs on every Acquire: it must cost an atomic load when nothing
	// is wrong, and have no effect when it says no.
	PrepareConn func(ctx context.Context, c *pgx.Conn) (bool, error)
	// Arm makes PrepareConn lazy: Install calls it once with the layer's
	// switch, which the layer turns on while its PrepareConn has anything
	// to check and off when it has not. While no lazy layer's switch is
	// on, an Acquire runs none of their PrepareConn: the composed
	// PrepareConn is then one atomic load (and the always-on layers' and
	// the config's own). A layer turns its switch off only after it found
	// nothing left to check, and checks again after turning it off (a
	// change meanwhile turns it back on): SetSwitch.
	Arm func(set func(on bool))
	// ShouldPing is asked, for a connection pgxpool is about to hand out
	// that was idle longer than IdleAfter, whether to ping it first (a
	// ping that fails destroys it, and pgxpool takes another): it is
	// ORed with the config's own ShouldPing (pgx's default: idle over a
	// second). A connection idle up to IdleAfter is not asked about, so
	// that an Acquire right after a Release costs a comparison.
	ShouldPing func(ctx context.Context, c *pgx.Conn, idle time.Duration) bool
	IdleAfter  time.Duration
	// Pinging is told that the composed ShouldPing (pgx's default or the
	// config's own, ORed with the layers') said yes for c: pgxpool pings
	// c next, before its PrepareConn, with the Acquire's deadline. It runs
	// on the Acquire's goroutine before the ping starts, only for a
	// connection about to be pinged, and must not block (the connector's
	// records the ping's start in one atomic store, so that a connection
	// whose ping goes unanswered closes without a cancel request).
	Pinging func(c *pgx.Conn)
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
	// connections as soon as it can.
	AttachOnAcquire bool
	// AcquireStart is told of each Acquire of the pool as it starts,
	// before pgxpool looks for a connection (a pool-level tracer), and
	// returns the context the Acquire goes on with; AcquireEnd is told
	// when it ends, with that context (the outage layer counts the
	// demand while the database is down). Both run only while the
	// layer's switch, which Install gives ArmAcquire (required with
	// them), is on: while no switch is on an Acquire costs the tracer
	// one atomic load. A layer turns its switch off only when nothing is
	// left to count, and checks again after turning it off: SetSwitch.
	AcquireStart func(ctx context.Context, pool *pgxpool.Pool) context.Context
	AcquireEnd   func(ctx context.Context)
	ArmAcquire   func(set func(on bool))

	// Connection hooks: the connector calls them, on the goroutine that
	// builds the connection (Closed: on pgx's, when the socket closes),
	// in Order; none may block beyond the connect's own bounds.

	// Route returns where one dial of a connection by host goes, addr by
	// default; it may hold the dial. retry is false for the first dial of
	// the connection (BeforeConnect routed it just before) and true for
	// the connector's retries.
	Route func(ctx context.Context, c Conn, host, addr string, retry bool) (string, error)
	// Hold is asked by the connector before it retries a failed dial or
	// handshake of c (the failure already told to Failed or PgError):
	// it may wait, within ctx, while the layer finds out whether the
	// target is down and, if it is, until it is back. waited reports that
	// it waited for the target to come back: the connector then starts
	// the connection's attempts afresh instead of retrying (no retry
	// budget spent); an error ends the connection with it. Before it
	// waits it calls HoldWaits(ctx): the connection gives its admission
	// slot back for the wait.
	Hold func(ctx context.Context, c Conn) (waited bool, err error)
	// Dialed: c's current dial reached addr (started at start); its
	// handshake follows.
	Dialed func(c Conn, addr string, start time.Time)
	// Validate runs when c's handshake completed (pgconn's
	// ValidateConnect, ctx its context): an error refuses the
	// connection, and the connector's next round retries it.
	Validate func(ctx context.Context, c Conn, host string, pc *pgconn.PgConn) error
	// PgError is pgconn's OnPgError: false closes the connection. Every
	// layer's runs.
	PgError func(pc *pgconn.PgConn, pe *pgconn.PgError) bool
	// Failed: a dial to addr failed, or its handshake met a network
	// error or a server shutting down or starting (57P01, 57P02, 57P03)
	// (established false); or an established connection to addr met a
	// network error or was ended by a server shutting down (FATAL 57P01,
	// 57P02).
	Failed func(addr string, established bool)
	// Closed: c's socket was closed.
	Closed func(c Conn)
	// Ended: c's connect ended: err nil when its handshake completed,
	// else the error that ended its attempts (no retry follows). It may
	// be told more than once.
	Ended func(c Conn, err error)

	// Events from other layers, through the composition.

	// Gone: another layer left addr behind (a failover's cut, a reader
	// lagging): the pool's connections to it made before now are not to
	// be used again.
	Gone func(addr string)
	// Retire: another layer wants quota[addr] more of the pool's
	// connections to addr retired when next acquired (a reader
	// rebalance's surplus that was in use).
	Retire func(quota map[string]int)
	// Cut: another layer cut addr (Composition.Cut): every connection of
	// the pool to it, from its dial on, in use or not, is to be cut now
	// (Conn.Abort with wrap), and so is a dial begun before the cut that
	// reaches addr after it. The eviction layer's.
	Cut func(addr string, wrap func(cause error) error)

	// Precedence ([Precedence]).

	// Routing reports whether the layer routes the pool's connections
	// now (one atomic load): the layers it outranks stand down meanwhile.
	Routing func() bool
	// StandDownWhile is told, at Install, the Routing of the layer that
	// outranks this one, when there is one.
	StandDownWhile func(routing func() bool)
}

// Composition is one pool config's layers, from [Begin] to [Install],
// then the pool's: what its layers share. It is read-only after Install
// but for the pool it learns.
type Composition struct {
	layers [len(Order)]*Layer

	// The config's own hooks, taken by Begin.
	userBefore  func(context.Context, *pgx.ConnConfig) error
	userPrepare func(context.Context, *pgx.Conn) (bool, error)
	userRelease func(*pgx.Conn) bool
	userPing    func(context.Context, pgxpool.ShouldPingParams) bool
	userTracer  pgx.QueryTracer

	armed    atomic.Uint32 // the switches of the lazy PrepareConn (Layer.Arm), one bit each
	acquires atomic.Uint32 // the switches of the Acquire hooks (Layer.ArmAcquire), one bit each

	chain      pgx.QueryTracer // the composed tracer of the pool's connections
	conns      Chain
	pool       atomic.Pointer[pgxpool.Pool]
	setCarrier func(tracer pgx.QueryTracer, attach bool, acq acquireHooks)
}

// acquireHooks are the layers' AcquireStart and AcquireEnd, in Order,
// and their switches (Layer.ArmAcquire).
type acquireHooks struct {
	start []func(context.Context, *pgxpool.Pool) context.Context
	end   []func(context.Context)
	on    *atomic.Uint32 // the Composition's switches of them (never nil)
}

// SetSwitch sets a layer's switch (Layer.Arm, Layer.ArmAcquire; nil
// before Install: nothing to set) as the contract asks: on while need
// reports true; off only when it reports false, and on again if it
// reports true once the switch is off (a change came meanwhile).
func SetSwitch(set func(on bool), need func() bool) {
	if set == nil {
		return
	}
	if !need() {
		set(false)
		if !need() {
			return
		}
	}
	set(true)
}

// Begin starts composing cfg for owner (the engine's binding of the pool,
// found again with [OwnerOf]): it takes the hooks cfg has (they run last,
// as layer User). cfg.ConnConfig must be set.
func Begin[O any](cfg *pgxpool.Config, owner *O) *Composition {
	c := &Composition{
		userBefore:  cfg.BeforeConnect,
		userPrepare: cfg.PrepareConn,
		userRelease: cfg.AfterRelease,
		userPing:    cfg.ShouldPing,
		userTracer:  cfg.ConnConfig.Tracer,
	}
	//lint:ignore SA1019 the user's deprecated hook is honoured, not used
	if ba := cfg.BeforeAcquire; c.userPrepare == nil && ba != nil {
		// pgxpool ignores BeforeAcquire when PrepareConn is set: run it
		// from the chain, as pgxpool would have.
		c.userPrepare = func(ctx context.Context, pc *pgx.Conn) (bool, error) { return ba(ctx, pc), nil }
	}
	cfg.ConnConfig.Tracer = &carrier[O]{c: c, owner: owner}
	cc := cfg.ConnConfig
	c.setCarrier = func(t pgx.QueryTracer, attach bool, acq acquireHooks) {
		cc.Tracer = newCarrier(c, owner, t, attach, acq)
	}
	return c
}

// OwnerOf returns the owner that [Begin] composed cfg for, or nil for a
// config that was not composed for an owner of type O.
func OwnerOf[O any](cfg *pgxpool.Config) *O {
	if cfg == nil || cfg.ConnConfig == nil {
		return nil
	}
	switch t := cfg.ConnConfig.Tracer.(type) {
	case *carrier[O]:
		return t.owner
	case *poolCarrier:
		o, _ := t.owner.(*O)
		return o
	case *releaseCarrier:
		o, _ := t.owner.(*O)
		return o
	}
	return nil
}

// Add sets the layer named name (one of Order, not User).
func (c *Composition) Add(name string, l Layer) {
	for i, n := range Order {
		if n == name && n != User {
			c.layers[i] = &l
			return
		}
	}
	panic("compose: unknown layer " + name) // a programming error of holdfast's
}

// Install builds cfg's hooks and the connections' chain from the layers,
// in Order, the config's own last, under Precedence: BeforeConnect (each
// connection gets its handle from newConn first, before any layer's),
// PrepareConn (the deprecated BeforeAcquire is cleared: PrepareConn runs
// it), AfterRelease (only when the config had one), the tracer, and the
// connection hooks ([Composition.Chain]).
func (c *Composition) Install(cfg *pgxpool.Config, newConn func(ctx context.Context, cc *pgx.ConnConfig) Conn) {
	c.applyPrecedence()
	layers := c.ordered()

	// BeforeConnect: each layer around the next, the user's innermost.
	user := c.userBefore
	var before ConnectFunc = func(ctx context.Context, _ Conn, cc *pgx.ConnConfig) error {
		if user != nil {
			return user(ctx, cc)
		}
		return nil
	}
	for i := len(layers) - 1; i >= 0; i-- {
		if h := layers[i].BeforeConnect; h != nil {
			next := before
			before = func(ctx context.Context, hc Conn, cc *pgx.ConnConfig) error { return h(ctx, hc, cc, next) }
		}
	}
	chainBefore := before
	cfg.BeforeConnect = func(ctx context.Context, cc *pgx.ConnConfig) error {
		// A connection gets the composed tracer, not the pool's carrier:
		// its statements pay for the layers' tracers only.
		cc.Tracer = c.chain
		return chainBefore(ctx, newConn(ctx, cc), cc)
	}

	// PrepareConn: each layer before the next; the first that says no
	// ends the chain. The lazy layers' (Arm) run only while one of them
	// is armed: then the whole chain runs, in Order; else only the
	// always-on layers' and the config's own.
	full := prepareChain(layers, c.userPrepare, true)
	var lazy []*Layer
	for _, l := range layers {
		if l.Arm != nil && l.PrepareConn != nil {
			lazy = append(lazy, l)
		}
	}
	if len(lazy) == 0 {
		cfg.PrepareConn = full
	} else {
		always := prepareChain(layers, c.userPrepare, false)
		armed := &c.armed
		for i, l := range lazy {
			bit := uint32(1) << i
			l.Arm(func(on bool) {
				if on {
					armed.Or(bit)
				} else {
					armed.And(^bit)
				}
			})
		}
		if always == nil {
			cfg.PrepareConn = func(ctx context.Context, pc *pgx.Conn) (bool, error) {
				if armed.Load() == 0 {
					return true, nil
				}
				return full(ctx, pc)
			}
		} else {
			cfg.PrepareConn = func(ctx context.Context, pc *pgx.Conn) (bool, error) {
				if armed.Load() == 0 {
					return always(ctx, pc)
				}
				return full(ctx, pc)
			}
		}
	}
	//lint:ignore SA1019 cleared because PrepareConn replaces it
	cfg.BeforeAcquire = nil

	// ShouldPing: pgx's default (or the config's own), ORed with the
	// layers', asked only about connections idle longer than their
	// IdleAfter.
	if ping := c.shouldPing(layers); ping != nil {
		cfg.ShouldPing = ping
	}

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

	// The connection hooks and the events, in Order.
	c.conns.layers = layers
	for _, l := range layers {
		c.conns.routes = c.conns.routes || l.Route != nil
	}

	attach := false
	acq := acquireHooks{on: &c.acquires}
	for _, l := range layers {
		attach = attach || (l.Attach != nil && l.AttachOnAcquire)
		if l.AcquireStart == nil && l.AcquireEnd == nil {
			continue
		}
		if l.ArmAcquire == nil {
			panic("compose: a layer's Acquire hooks need its ArmAcquire") // a programming error of holdfast's
		}
		bit := uint32(1) << len(acq.start)
		l.ArmAcquire(func(on bool) {
			if on {
				c.acquires.Or(bit)
			} else {
				c.acquires.And(^bit)
			}
		})
		start, end := l.AcquireStart, l.AcquireEnd
		if start == nil {
			start = func(ctx context.Context, _ *pgxpool.Pool) context.Context { return ctx }
		}
		if end == nil {
			end = func(context.Context) {}
		}
		acq.start, acq.end = append(acq.start, start), append(acq.end, end)
	}
	c.setCarrier(tracer, attach, acq)
}

// prepareChain composes the PrepareConn of layers (with lazy, the lazy
// ones' too; without, only the always-on ones'), each before the next,
// then user's; nil when there is none.
func prepareChain(layers []*Layer, user func(context.Context, *pgx.Conn) (bool, error), lazy bool) func(context.Context, *pgx.Conn) (bool, error) {
	prepare := user
	for i := len(layers) - 1; i >= 0; i-- {
		h := layers[i].PrepareConn
		if h == nil || (!lazy && layers[i].Arm != nil) {
			continue
		}
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
	return prepare
}

// PgxPingIdle is pgxpool's default ShouldPing (pgx v5.13): a connection
// idle longer than this is pinged before it is handed out.
const PgxPingIdle = time.Second

// shouldPing returns the composed ShouldPing: pgx's default (or the
// config's own), ORed with the layers' for a connection idle longer than
// their IdleAfter, and, when it says yes, the layers' Pinging told; nil
// when no layer has either (the config's stays).
func (c *Composition) shouldPing(layers []*Layer) func(context.Context, pgxpool.ShouldPingParams) bool {
	var pingers, told []*Layer
	var least time.Duration = -1
	for _, l := range layers {
		if l.ShouldPing != nil {
			pingers = append(pingers, l)
			if least < 0 || l.IdleAfter < least {
				least = l.IdleAfter
			}
		}
		if l.Pinging != nil {
			told = append(told, l)
		}
	}
	if len(pingers) == 0 && len(told) == 0 {
		return nil
	}
	ping := c.orPing(pingers, least)
	if len(told) == 0 {
		return ping
	}
	return func(ctx context.Context, p pgxpool.ShouldPingParams) bool {
		if !ping(ctx, p) {
			return false
		}
		for _, l := range told {
			l.Pinging(p.Conn)
		}
		return true
	}
}

// orPing returns pgx's default ShouldPing (or the config's own) ORed with
// pingers' for a connection idle longer than their IdleAfter (least, the
// shortest; unused without pingers).
func (c *Composition) orPing(pingers []*Layer, least time.Duration) func(context.Context, pgxpool.ShouldPingParams) bool {
	user := c.userPing
	if len(pingers) == 0 {
		return func(ctx context.Context, p pgxpool.ShouldPingParams) bool {
			if user == nil {
				return p.IdleDuration > PgxPingIdle // pgx's default
			}
			return user(ctx, p)
		}
	}
	return func(ctx context.Context, p pgxpool.ShouldPingParams) bool {
		idle := p.IdleDuration
		if user == nil && idle > PgxPingIdle {
			return true // pgx's default pings it anyway
		}
		if idle > least {
			for _, l := range pingers {
				if idle > l.IdleAfter && l.ShouldPing(ctx, p.Conn, idle) {
					return true
				}
			}
		}
		return user != nil && user(ctx, p)
	}
}

// applyPrecedence makes the outranked layers stand down while the layer
// that outranks them routes (Precedence).
func (c *Composition) applyPrecedence() {
	for _, p := range Precedence {
		high, low := c.layer(p[0]), c.layer(p[1])
		if high == nil || low == nil || high.Routing == nil {
			continue
		}
		routing := high.Routing
		if h := low.BeforeConnect; h != nil {
			low.BeforeConnect = func(ctx context.Context, hc Conn, cc *pgx.ConnConfig, next ConnectFunc) error {
				if routing() {
					return next(ctx, hc, cc)
				}
				return h(ctx, hc, cc, next)
			}
		}
		if h := low.PrepareConn; h != nil {
			low.PrepareConn = func(ctx context.Context, pc *pgx.Conn) (bool, error) {
				// The layer's own check first: one atomic load when
				// nothing is wrong; it has no effect when it says no.
				keep, err := h(ctx, pc)
				if keep && err == nil || routing() {
					return true, nil
				}
				return keep, err
			}
		}
		if h := low.Route; h != nil {
			low.Route = func(ctx context.Context, hc Conn, host, addr string, retry bool) (string, error) {
				if routing() {
					return addr, nil
				}
				return h(ctx, hc, host, addr, retry)
			}
		}
		if h := low.Validate; h != nil {
			low.Validate = func(ctx context.Context, hc Conn, host string, pc *pgconn.PgConn) error {
				if routing() {
					return nil
				}
				return h(ctx, hc, host, pc)
			}
		}
		if h := low.Hold; h != nil {
			low.Hold = func(ctx context.Context, hc Conn) (bool, error) {
				if routing() {
					return false, nil
				}
				return h(ctx, hc)
			}
		}
		if low.StandDownWhile != nil {
			low.StandDownWhile(routing)
		}
	}
}

// layer returns the layer named name, or nil.
func (c *Composition) layer(name string) *Layer {
	for i, n := range Order {
		if n == name {
			return c.layers[i]
		}
	}
	return nil
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

// Chain returns the connection hooks of the layers, in Order (after
// Install).
func (c *Composition) Chain() *Chain { return &c.conns }

// Gone tells the layers that addr was left behind (Layer.Gone): called by
// the layer that left it.
func (c *Composition) Gone(addr string) {
	for _, l := range c.conns.layers {
		if l.Gone != nil {
			l.Gone(addr)
		}
	}
}

// Cut closes every connection of the pool to addr, the server that a
// layer left behind for good (a failover's old writer, an instance that
// left the topology, an address the database's name moved away from):
// the layers hear that it is gone (Layer.Gone: those made before now are
// destroyed when next acquired), every connection to it is cut at once,
// handshakes and those in use included (Layer.Cut: the next read or write
// fails with wrap(the I/O error), nothing more is sent: a statement in
// flight fails now rather than at its deadline, a COMMIT in flight with
// its outcome unknown), and the idle ones are closed. One mechanism for
// every layer that cuts.
func (c *Composition) Cut(addr string, wrap func(cause error) error) {
	c.Gone(addr)
	for _, l := range c.conns.layers {
		if l.Cut != nil {
			l.Cut(addr, wrap)
		}
	}
	if pool := c.Pool(); pool != nil {
		CloseIdle(pool, func(a string) bool { return a == addr })
	}
}

// Retire asks the layers to retire quota[addr] more of the pool's
// connections to addr when next acquired (Layer.Retire).
func (c *Composition) Retire(quota map[string]int) {
	for _, l := range c.conns.layers {
		if l.Retire != nil {
			l.Retire(quota)
		}
	}
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

// Chain is the connection hooks of a composition's layers, in Order. Its
// zero value has none.
type Chain struct {
	layers []*Layer // in Order
	routes bool     // one of them has a Route
}

// Routes reports whether a layer routes dials (a dial then goes through
// Route).
func (ch *Chain) Routes() bool { return ch.routes }

// Route runs the layers' Route in order, each given the address the one
// before chose; the first error ends it.
func (ch *Chain) Route(ctx context.Context, c Conn, host, addr string, retry bool) (string, error) {
	for _, l := range ch.layers {
		if l.Route == nil {
			continue
		}
		var err error
		if addr, err = l.Route(ctx, c, host, addr, retry); err != nil {
			return "", err
		}
	}
	return addr, nil
}

// Dialed runs the layers' Dialed.
func (ch *Chain) Dialed(c Conn, addr string, start time.Time) {
	for _, l := range ch.layers {
		if l.Dialed != nil {
			l.Dialed(c, addr, start)
		}
	}
}

// Validate runs the layers' Validate; the first error refuses the
// connection.
func (ch *Chain) Validate(ctx context.Context, c Conn, host string, pc *pgconn.PgConn) error {
	for _, l := range ch.layers {
		if l.Validate == nil {
			continue
		}
		if err := l.Validate(ctx, c, host, pc); err != nil {
			return err
		}
	}
	return nil
}

// Hold runs the layers' Hold, in order: waited when one waited for the
// target to come back; the first error ends it.
func (ch *Chain) Hold(ctx context.Context, c Conn) (waited bool, err error) {
	for _, l := range ch.layers {
		if l.Hold == nil {
			continue
		}
		w, err := l.Hold(ctx, c)
		waited = waited || w
		if err != nil {
			return waited, err
		}
	}
	return waited, nil
}

// PgError runs every layer's PgError; false from any closes the
// connection.
func (ch *Chain) PgError(pc *pgconn.PgConn, pe *pgconn.PgError) bool {
	keep := true
	for _, l := range ch.layers {
		if l.PgError != nil {
			keep = l.PgError(pc, pe) && keep
		}
	}
	return keep
}

// Failed runs the layers' Failed.
func (ch *Chain) Failed(addr string, established bool) {
	for _, l := range ch.layers {
		if l.Failed != nil {
			l.Failed(addr, established)
		}
	}
}

// Ended runs the layers' Ended.
func (ch *Chain) Ended(c Conn, err error) {
	for _, l := range ch.layers {
		if l.Ended != nil {
			l.Ended(c, err)
		}
	}
}

// Closed runs the layers' Closed.
func (ch *Chain) Closed(c Conn) {
	for _, l := range ch.layers {
		if l.Closed != nil {
			l.Closed(c)
		}
	}
}
