package obs

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"sync/atomic"
	"time"
	"weak"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/internal/pgxtrace"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/multitracer"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/semconv/v1.43.0/dbconv"
	"go.opentelemetry.io/otel/trace"
)

// customDataKey is the key under which a connection's state lives in
// pgconn's CustomData map.
const customDataKey = "holdfast/obs"

// Pool instruments one pgxpool.Config: its connects, acquires, releases and
// statements. Build it with [Telemetry.Pool] and install it with
// [Pool.Install]. A Pool is safe for concurrent use.
type Pool struct {
	t    *Telemetry
	name string // db.client.connection.pool.name

	// Precomputed options, so that the Acquire path builds no attribute set.
	poolRec  []metric.RecordOption // {pool.name}
	poolAdd  []metric.AddOption
	poolObs  []metric.ObserveOption
	idleObs  []metric.ObserveOption // {pool.name, state=idle}
	usedObs  []metric.ObserveOption // {pool.name, state=used}
	opRec    []metric.RecordOption  // {db.system.name, db.namespace, server.address, server.port}
	opAttrs  []attribute.KeyValue
	okByStep map[string][]metric.AddOption // holdfast.connect.attempts success, by stage
	target   []attribute.KeyValue          // of holdfast.* metrics: pool.name, server.address, server.port, db.namespace
	spanBase []attribute.KeyValue

	installed pgx.QueryTracer // the tracer Install put on the config
	previous  pgx.QueryTracer // the tracer that was there before

	pool    atomic.Pointer[weak.Pointer[pgxpool.Pool]] // learnt at the first Acquire
	pending atomic.Int64                               // Acquires under way: db.client.connection.pending_requests
}

// Pool returns the instrumentation for a pool built from cc, or nil when
// the Telemetry is not [Telemetry.Active] (then nothing is installed and
// pgxpool's hot paths are untouched). The pool name is
// name, else "host:port/database" from cc, as the semantic conventions
// advise for a pool without a name of its own; pools to the same database share it, and
// their connection counts add up. If the meter provider refuses the
// callback of the connection counts, Pool logs it and goes on without them.
func (t *Telemetry) Pool(ctx context.Context, cc *pgx.ConnConfig, name string) *Pool {
	if t == nil || cc == nil || !t.Active(ctx) {
		return nil
	}
	port := int(cc.Port)
	name = PoolName(cc, name)
	poolName := semconv.DBClientConnectionPoolName(name)
	p := &Pool{t: t, name: name}
	poolSet := attribute.NewSet(poolName)
	p.poolRec = []metric.RecordOption{metric.WithAttributeSet(poolSet)}
	p.poolAdd = []metric.AddOption{metric.WithAttributeSet(poolSet)}
	p.poolObs = []metric.ObserveOption{metric.WithAttributeSet(poolSet)}
	p.idleObs = []metric.ObserveOption{metric.WithAttributeSet(attribute.NewSet(poolName,
		semconv.DBClientConnectionStateKey.String(string(dbconv.ClientConnectionStateIdle))))}
	p.usedObs = []metric.ObserveOption{metric.WithAttributeSet(attribute.NewSet(poolName,
		semconv.DBClientConnectionStateKey.String(string(dbconv.ClientConnectionStateUsed))))}
	p.opAttrs = []attribute.KeyValue{
		semconv.DBSystemNamePostgreSQL,
		semconv.DBNamespace(cc.Database),
		semconv.ServerAddress(cc.Host),
		semconv.ServerPort(port),
	}
	p.opRec = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(p.opAttrs...))}
	p.target = targetKVs(cc, name)
	p.okByStep = map[string][]metric.AddOption{}
	for _, s := range []string{StageStartup, StagePoolGrowth, StageRequest} {
		p.okByStep[s] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(append([]attribute.KeyValue{
			KeyStage.String(s), KeyOutcome.String(OutcomeSuccess)}, p.target...)...))}
	}
	p.spanBase = append([]attribute.KeyValue{poolName}, p.opAttrs...)
	if _, err := t.meter.RegisterCallback(p.observe, t.connCount.Inst(), t.connMax.Inst(), t.pending.Inst()); err != nil {
		t.logger.LogAttrs(ctx, slog.LevelWarn, "holdfast: the meter provider refused the connection-count callback",
			slog.String("error", t.Redact(err.Error())))
	}
	return p
}

// Tracer returns the pool-level tracer to install on the pool config: the
// pool tracer (acquire and release) after previous, which may be nil, and
// remembers previous as the statement tracer that each connection's own
// tracer calls (see [Pool.BeforeConnect]).
func (p *Pool) Tracer(previous pgx.QueryTracer) pgx.QueryTracer {
	p.previous = previous
	pt := &poolTracer{p: p}
	if previous == nil {
		p.installed = pt
	} else {
		p.installed = multitracer.New(previous, pt)
	}
	return p.installed
}

// observe reports the connection counts from pgxpool's Stat.
func (p *Pool) observe(_ context.Context, o metric.Observer) error {
	wp := p.pool.Load()
	if wp == nil {
		return nil
	}
	pool := wp.Value()
	if pool == nil {
		return nil // the pool is gone
	}
	s := pool.Stat()
	o.ObserveInt64(p.t.connCount.Inst(), int64(s.IdleConns()), p.idleObs...)
	o.ObserveInt64(p.t.connCount.Inst(), int64(s.AcquiredConns()), p.usedObs...)
	o.ObserveInt64(p.t.connMax.Inst(), int64(s.MaxConns()), p.poolObs...)
	o.ObserveInt64(p.t.pending.Inst(), p.pending.Load(), p.poolObs...)
	return nil
}

// Watch makes the Pool report pool's connection counts. The first Acquire
// does it too; call it to report a pool that has not been used yet.
func (p *Pool) Watch(pool *pgxpool.Pool) {
	if p == nil || pool == nil || p.pool.Load() != nil {
		return
	}
	wp := weak.Make(pool)
	p.pool.CompareAndSwap(nil, &wp)
}

// BeforeConnect is the outermost layer of the pool's BeforeConnect: it
// starts the connection's clock and span, runs next, and on success gives
// the connection a conn tracer that ends them when pgx's connect ends.
func (p *Pool) BeforeConnect(ctx context.Context, cc *pgx.ConnConfig, next func(context.Context, *pgx.ConnConfig) error) error {
	c := &conn{p: p, start: time.Now(), stage: StageOf(ctx, LayerConnect)}
	if p.t.tracing() {
		ctx, c.span = p.t.tracer.Start(ctx, SpanConnect,
			trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(p.spanBase...),
			trace.WithAttributes(KeyStage.String(c.stage)))
	}
	if next != nil {
		if err := next(ctx, cc); err != nil {
			c.finish(ctx, nil, err)
			return err
		}
	}
	p.t.Secret(cc.Password)
	base := cc.Tracer
	if base == p.installed {
		base = p.previous // skip our pool tracer: its statement methods do nothing
	}
	c.setBase(base)
	cc.Tracer = c
	return nil
}

// poolTracer is the pool-level tracer: acquire and release. Its statement
// methods do nothing (each connection has a conn tracer for those).
type poolTracer struct{ p *Pool }

func (*poolTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (*poolTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// epoch is the origin of mono.
var epoch = time.Now()

// mono reads the monotonic clock: one clock read, where time.Now makes two
// (wall and monotonic). The Acquire path reads it three times.
func mono() time.Duration { return time.Since(epoch) }

// acquireCtx carries the start of one Acquire to TraceAcquireEnd. It is the
// one allocation instrumentation adds to Acquire.
type acquireCtx struct {
	context.Context
	start time.Duration // mono()
}

type acquireKey struct{}

func (c *acquireCtx) Value(key any) any {
	if key == (acquireKey{}) {
		return c
	}
	return c.Context.Value(key)
}

func (t *poolTracer) TraceAcquireStart(ctx context.Context, pool *pgxpool.Pool, _ pgxpool.TraceAcquireStartData) context.Context {
	if t.p.pool.Load() == nil {
		t.p.Watch(pool)
	}
	t.p.pending.Add(1)
	return &acquireCtx{Context: ctx, start: mono()}
}

func (t *poolTracer) TraceAcquireEnd(ctx context.Context, _ *pgxpool.Pool, data pgxpool.TraceAcquireEndData) {
	p := t.p
	p.pending.Add(-1)
	if data.Err != nil {
		if errors.Is(data.Err, context.DeadlineExceeded) {
			p.t.timeouts.Inst().Add(ctx, 1, p.poolAdd...)
		}
		return
	}
	now := mono()
	if ac, ok := ctx.Value(acquireKey{}).(*acquireCtx); ok {
		p.t.waitTime.Inst().Record(ctx, (now - ac.start).Seconds(), p.poolRec...)
	}
	if c := connOf(data.Conn); c != nil {
		c.acquired = now
	}
}

func (t *poolTracer) TraceRelease(_ *pgxpool.Pool, data pgxpool.TraceReleaseData) {
	c := connOf(data.Conn)
	if c == nil || c.acquired == 0 {
		return
	}
	t.p.t.useTime.Inst().Record(context.Background(), (mono() - c.acquired).Seconds(), t.p.poolRec...)
	c.acquired = 0
}

// connOf returns the conn tracer of a connection made through a Pool.
func connOf(c *pgx.Conn) *conn {
	if c == nil {
		return nil
	}
	st, _ := c.PgConn().CustomData()[customDataKey].(*conn)
	return st
}

// conn is the tracer of one connection: from BeforeConnect to the end of
// pgx's connect it owns the connect span; afterwards it times statements
// and holds the connection's acquire time. It forwards every call to the
// tracer that was on the config before (the user's, another library's).
// pgx uses a connection from one goroutine at a time, so its fields need
// no lock.
type conn struct {
	p     *Pool
	start time.Time
	stage string
	span  trace.Span // the connect span while connecting, or nil

	// mono() readings; 0 means none.
	acquired time.Duration                 // set by TraceAcquireEnd, cleared by TraceRelease
	started  [pgxtrace.Kinds]time.Duration // the statement of each kind running, but prepares

	// The tracer that was on the config before, whose calls it forwards,
	// with the conn as its Hooks.
	pgxtrace.Set
}

func (c *conn) setBase(base pgx.QueryTracer) {
	c.Set = pgxtrace.Split(base)
	c.Set.Hooks = c
}

func (c *conn) TraceConnectStart(ctx context.Context, data pgx.TraceConnectStartData) context.Context {
	ctx = c.Set.TraceConnectStart(ctx, data)
	if c.span != nil {
		// The dials run under this context: their attempt events go to
		// the connect span.
		ctx = trace.ContextWithSpan(ctx, c.span)
	}
	return ctx
}

func (c *conn) TraceConnectEnd(ctx context.Context, data pgx.TraceConnectEndData) {
	c.Set.TraceConnectEnd(ctx, data)
	c.finish(ctx, data.Conn, data.Err)
}

// finish records the end of a connect: create_time, connect.attempts and
// the connect span's outcome.
func (c *conn) finish(ctx context.Context, pc *pgx.Conn, err error) {
	t := c.p.t
	took := time.Since(c.start).Seconds()
	if err == nil && pc != nil {
		t.createTime.Inst().Record(ctx, took, c.p.poolRec...)
		t.attempts.Add(ctx, 1, c.p.okByStep[c.stage]...)
		pc.PgConn().CustomData()[customDataKey] = c
		if c.span != nil {
			if addr, port, ok := peer(pc); ok {
				c.span.SetAttributes(semconv.NetworkPeerAddress(addr), semconv.NetworkPeerPort(port))
			}
			endSpan(c.span, nil, classify.Verdict{})
			c.span = nil
		}
		return
	}
	if err == nil {
		err = errors.New("obs: connect ended without a connection")
	}
	v := t.connectVerdict(err)
	errType := semconv.ErrorTypeKey.String(v.Reason)
	t.createTime.Inst().Record(ctx, took, metric.WithAttributes(semconv.DBClientConnectionPoolName(c.p.name), errType))
	t.attempts.Add(ctx, 1, metric.WithAttributes(append([]attribute.KeyValue{KeyStage.String(c.stage), KeyOutcome.String(OutcomeFailure),
		errType, KeyErrorClass.String(v.Class.String())}, c.p.target...)...))
	if c.span != nil {
		endSpan(c.span, err, v)
		c.span = nil
	}
}

// peer returns the address the connection really reached (after DNS, or a
// blue/green IP substitution).
func peer(pc *pgx.Conn) (string, int, bool) {
	nc := pc.PgConn().Conn()
	if nc == nil {
		return "", 0, false
	}
	host, port, err := net.SplitHostPort(nc.RemoteAddr().String())
	if err != nil {
		return "", 0, false
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		return "", 0, false
	}
	return host, n, true
}

// StatementStart starts the clock of a query, batch or copy, after the
// tracers before: a suspension is not part of the statement. A prepare
// is not timed.
func (c *conn) StatementStart(ctx context.Context, _ *pgx.Conn, k pgxtrace.Kind) context.Context {
	if k != pgxtrace.Prepare {
		c.started[k] = mono()
	}
	return ctx
}

// StatementEnd records the statement's duration, before the tracers
// before see its end.
func (c *conn) StatementEnd(ctx context.Context, _ *pgx.Conn, k pgxtrace.Kind, err error) {
	if k != pgxtrace.Prepare {
		c.record(ctx, c.started[k], err)
	}
}

// record records db.client.operation.duration for a statement that started
// at start (a mono reading; zero: not seen, nothing recorded).
func (c *conn) record(ctx context.Context, start time.Duration, err error) {
	if start == 0 || c.p.t.noOpDuration {
		return
	}
	took := (mono() - start).Seconds()
	op := c.p.t.opDuration.Inst()
	if err == nil {
		op.Record(ctx, took, c.p.opRec...)
		return
	}
	attrs := append(c.p.opAttrs[:len(c.p.opAttrs):len(c.p.opAttrs)], semconv.ErrorTypeKey.String(c.p.t.errorType(err)))
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		attrs = append(attrs, semconv.DBResponseStatusCode(pe.Code))
	}
	op.Record(ctx, took, metric.WithAttributes(attrs...))
}

// errorType is the error.type of a failed statement: its SQLSTATE when the
// server sent one (as the PostgreSQL conventions ask), else its classified
// reason.
func (t *Telemetry) errorType(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return t.verdict(err).Reason
}

var _ pgxtrace.Tracer = (*conn)(nil)

var _ interface {
	pgxpool.AcquireTracer
	pgxpool.ReleaseTracer
} = (*poolTracer)(nil)
