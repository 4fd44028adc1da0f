package obs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/retry"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/semconv/v1.43.0/dbconv"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of every meter and tracer holdfast
// creates.
const ScopeName = "github.com/holdfast-db/holdfast"

// Service stages, the values of [KeyStage] in metrics, spans and log lines.
const (
	StageStartup    = "startup"     // the first connection of a pool (Factory.Start, NewPool)
	StagePoolGrowth = "pool-growth" // a new connection while the service runs
	StageRequest    = "request"     // the request-scope retry of Factory.Acquire
)

// Retry layers, the values of [KeyLayer] in metrics, span events and log
// lines. They equal the holdfast.Layer* constants of the root package.
const (
	LayerConnect  = "connect"
	LayerPassword = "password"
	LayerAcquire  = "acquire"
	LayerStartup  = "startup"
)

// Outcomes, values of [KeyOutcome].
const (
	OutcomeSuccess = "success"
	OutcomeFailure = "failure"
)

// Attribute keys holdfast defines. The standard ones (error.type,
// server.address, db.client.connection.pool.name, ...) come from semconv.
const (
	KeyStage           = attribute.Key("holdfast.stage")
	KeyLayer           = attribute.Key("holdfast.layer")
	KeyOutcome         = attribute.Key("holdfast.outcome")
	KeyErrorClass      = attribute.Key("holdfast.error.class")
	KeyAttempt         = attribute.Key("holdfast.attempt")
	KeyDelay           = attribute.Key("holdfast.retry.delay") // seconds
	KeyStop            = attribute.Key("holdfast.retry.stop")
	KeyBlueGreenID     = attribute.Key("holdfast.bluegreen.id")
	KeyFailoverEvent   = attribute.Key("holdfast.failover.event")
	KeyBlueGreenPhase  = attribute.Key("holdfast.bluegreen.phase")
	KeySuspendPoint    = attribute.Key("holdfast.bluegreen.suspend.point")
	KeySuspendReason   = attribute.Key("holdfast.bluegreen.suspended.reason")
	KeySuspendDuration = attribute.Key("holdfast.bluegreen.suspended.duration") // seconds, on the request span
	KeyReadyHealth     = attribute.Key("holdfast.readiness.health")
	KeyReadyReason     = attribute.Key("holdfast.readiness.reason")
)

// Metric names of holdfast's own instruments.
const (
	MetricConnectAttempts   = "holdfast.connect.attempts"
	MetricRetries           = "holdfast.retries"
	MetricRecoveries        = "holdfast.recoveries"
	MetricExhausted         = "holdfast.retry.exhausted"
	MetricBudgetRejections  = "holdfast.retry.budget.rejections"
	MetricBlueGreenPhase    = "holdfast.bluegreen.phase"
	MetricFailoverEvents    = "holdfast.failover.events"
	MetricSuspendedDuration = "holdfast.bluegreen.suspended.duration"
	MetricReady             = "holdfast.readiness.ready"
	MetricReadyTransitions  = "holdfast.readiness.transitions"
	MetricDrainDuration     = "holdfast.readiness.drain.duration"
)

// Span names.
const (
	SpanConnect    = "holdfast.connect"
	SpanAcquire    = "holdfast.acquire"
	SpanStartup    = "holdfast.startup"
	SpanSwitchover = "holdfast.bluegreen.switchover"
	EventAttempt   = "holdfast.attempt"
	EventPhase     = "holdfast.bluegreen.phase"
	EventSuspended = "holdfast.bluegreen.suspended"
	EventReadiness = "holdfast.readiness"
)

// timeBuckets are the bucket boundaries, in seconds, of every duration
// histogram: those the semantic conventions advise for
// db.client.operation.duration.
var timeBuckets = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10}

// Config is what [New] needs. The zero value means the global providers, a
// discarding logger and classify.Classify.
type Config struct {
	MeterProvider  metric.MeterProvider // nil: otel.GetMeterProvider()
	TracerProvider trace.TracerProvider // nil: otel.GetTracerProvider()
	Logger         *slog.Logger         // nil: discard
	Classify       func(error) classify.Verdict

	// NoOperationDuration leaves db.client.operation.duration to another
	// tracer (otelpgx): holdfast does not record it.
	NoOperationDuration bool
}

// Telemetry records one factory's metrics, spans and logs. Build it with
// [New]. Its methods are safe for concurrent use, and they all accept a nil
// *Telemetry, which records nothing.
type Telemetry struct {
	logger   *slog.Logger
	classify func(error) classify.Verdict
	meter    metric.Meter
	tracer   trace.Tracer
	tp       trace.TracerProvider
	secrets  Redactor
	sampler  sampler // repeated log lines

	noOpDuration bool // Config.NoOperationDuration

	// holdfast's own instruments.
	attempts   metric.Int64Counter
	retries    metric.Int64Counter
	recoveries metric.Int64Counter
	exhausted  metric.Int64Counter
	rejections metric.Int64Counter
	bgPhase    metric.Int64Gauge
	foEvents   metric.Int64Counter
	suspended  metric.Float64Histogram
	ready      metric.Int64Gauge
	readyMoves metric.Int64Counter
	drain      metric.Float64Histogram
	dbDown     metric.Int64Gauge
	queue      queueInstruments // admission waits (admit.go)

	// Standard database client instruments.
	connCount  dbconv.ClientConnectionCountObservable
	connMax    dbconv.ClientConnectionMaxObservable
	pending    dbconv.ClientConnectionPendingRequestsObservable
	createTime dbconv.ClientConnectionCreateTime
	waitTime   dbconv.ClientConnectionWaitTime
	useTime    dbconv.ClientConnectionUseTime
	timeouts   dbconv.ClientConnectionTimeouts
	opDuration dbconv.ClientOperationDuration
}

// New builds the instruments of a Telemetry. It fails only if the meter
// provider refuses an instrument.
func New(c Config) (*Telemetry, error) {
	mp, tp := c.MeterProvider, c.TracerProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	t := &Telemetry{
		logger:   c.Logger,
		classify: c.Classify,
		meter:    mp.Meter(ScopeName, metric.WithSchemaURL(semconv.SchemaURL), metric.WithInstrumentationVersion(Version)),
		tracer:   tp.Tracer(ScopeName, trace.WithSchemaURL(semconv.SchemaURL), trace.WithInstrumentationVersion(Version)),
		tp:       tp,

		noOpDuration: c.NoOperationDuration,
	}
	if t.logger == nil {
		t.logger = slog.New(slog.DiscardHandler)
	}
	if t.classify == nil {
		t.classify = classify.Classify
	}
	m := t.meter
	buckets := metric.WithExplicitBucketBoundaries(timeBuckets...)
	var err, e error
	join := func(e error) { err = errors.Join(err, e) }
	for _, i := range append(t.instruments(), t.queue.instruments()...) {
		join(i.make(m, buckets))
	}

	t.connCount, e = dbconv.NewClientConnectionCountObservable(m)
	join(e)
	t.connMax, e = dbconv.NewClientConnectionMaxObservable(m)
	join(e)
	t.pending, e = dbconv.NewClientConnectionPendingRequestsObservable(m)
	join(e)
	t.createTime, e = dbconv.NewClientConnectionCreateTime(m, buckets)
	join(e)
	t.waitTime, e = dbconv.NewClientConnectionWaitTime(m, buckets)
	join(e)
	t.useTime, e = dbconv.NewClientConnectionUseTime(m, buckets)
	join(e)
	t.timeouts, e = dbconv.NewClientConnectionTimeouts(m)
	join(e)
	t.opDuration, e = dbconv.NewClientOperationDuration(m, buckets)
	join(e)
	if err != nil {
		return nil, err
	}
	return t, nil
}

// instrument is one of holdfast's own instruments, for [New] to make:
// where it goes (a *metric.Int64Counter, *metric.Int64Gauge, or
// *metric.Float64Histogram, which gets the duration buckets), its name,
// unit and description.
type instrument struct {
	dst              any
	name, unit, desc string
}

// instruments are holdfast's own instruments but those of admission
// waits (queueInstruments).
func (t *Telemetry) instruments() []instrument {
	return []instrument{
		{&t.attempts, MetricConnectAttempts, "{attempt}", "Connections the pool tried to open through holdfast, by service stage and outcome."},
		{&t.retries, MetricRetries, "{retry}", "Retries holdfast made after a transient failure."},
		{&t.recoveries, MetricRecoveries, "{operation}", "Operations that failed at first and succeeded on a retry."},
		{&t.exhausted, MetricExhausted, "{operation}", "Operations that gave up on a transient failure: attempts or time ran out."},
		{&t.rejections, MetricBudgetRejections, "{retry}", "Retries the retry budget refused."},
		{&t.bgPhase, MetricBlueGreenPhase, "{phase}", "Blue/green switchover phase: 0 NOT_CREATED, 1 CREATED, 2 PREPARATION, 3 IN_PROGRESS, 4 POST, 5 COMPLETED."},
		{&t.foEvents, MetricFailoverEvents, "{event}", "Writer-failover monitor events: suspect, writer down, writer back, new writer, DNS agrees, instance left, reader down, reader back, reader lagging, reader caught up."},
		{&t.suspended, MetricSuspendedDuration, "s", "Time a connect, acquire or query waited, suspended by a blue/green switchover."},
		{&t.ready, MetricReady, "1", "1 while the readiness probe answers 200, 0 while it answers 503."},
		{&t.readyMoves, MetricReadyTransitions, "{transition}", "Changes of the readiness health, by the health and reason changed to."},
		{&t.drain, MetricDrainDuration, "s", "Duration of readiness drains, by outcome."},
		{&t.dbDown, MetricDatabaseDown, "{down}", "1 while the pool's database is down (new connections held until it answers), 0 otherwise."},
	}
}

// make makes the instrument with m and stores it.
func (i instrument) make(m metric.Meter, buckets metric.HistogramOption) error {
	unit, desc := metric.WithUnit(i.unit), metric.WithDescription(i.desc)
	var err error
	switch dst := i.dst.(type) {
	case *metric.Int64Counter:
		*dst, err = m.Int64Counter(i.name, unit, desc)
	case *metric.Int64Gauge:
		*dst, err = m.Int64Gauge(i.name, unit, desc)
	case *metric.Float64Histogram:
		*dst, err = m.Float64Histogram(i.name, unit, buckets, desc)
	default:
		err = fmt.Errorf("obs: instrument %s: no constructor for %T", i.name, i.dst)
	}
	return err
}

// Active reports whether a real meter or tracer provider is installed, so
// that instrumenting a pool is worth its cost. It is decided when a pool is
// configured: a pool configured before the application installs its
// OpenTelemetry SDK (with the global providers) stays uninstrumented, but
// the factory's own metrics (retries, recoveries, ...) start flowing as soon
// as the SDK is installed.
func (t *Telemetry) Active(ctx context.Context) bool {
	if t == nil {
		return false
	}
	return t.attempts.Enabled(ctx) || t.tracing()
}

// tracing reports whether spans may be recorded: the provider is neither a
// no-op nor the global provider before the application set one.
func (t *Telemetry) tracing() bool {
	if t == nil {
		return false
	}
	switch t.tp.(type) {
	case tracenoop.TracerProvider, *tracenoop.TracerProvider:
		return false
	}
	switch {
	case isType(t.tp, "go.opentelemetry.io/otel/trace", "noopTracerProvider"):
		// trace.NewNoopTracerProvider (deprecated, still in use).
		return false
	case isType(t.tp, "go.opentelemetry.io/otel/internal/global", "tracerProvider"):
		// The global provider delegates once the application calls
		// otel.SetTracerProvider; from then on otel.GetTracerProvider
		// returns the application's provider instead.
		return !isType(otel.GetTracerProvider(), "go.opentelemetry.io/otel/internal/global", "tracerProvider")
	}
	return true
}

// isType reports whether v's dynamic type, or the type it points to, is
// pkg.name.
func isType(v any, pkg, name string) bool {
	rt := reflect.TypeOf(v)
	if rt == nil {
		return false
	}
	if rt.Kind() == reflect.Pointer {
		rt = rt.Elem()
	}
	return rt.PkgPath() == pkg && rt.Name() == name
}

// Logger returns the logger, never nil.
func (t *Telemetry) Logger() *slog.Logger {
	if t == nil {
		return slog.New(slog.DiscardHandler)
	}
	return t.logger
}

// Secret registers a fetched password or token value that log lines and
// errors must never show (see [Redactor]). Values shorter than 4 bytes are
// ignored.
func (t *Telemetry) Secret(s string) {
	if t != nil {
		t.secrets.Add(s)
	}
}

// PinSecret registers a configured password (a pool's) for the
// Telemetry's life, whatever is fetched after it.
func (t *Telemetry) PinSecret(s string) {
	if t != nil {
		t.secrets.Pin(s)
	}
}

// Redact returns s without any secret the Telemetry knows of and without
// connection-string passwords.
func (t *Telemetry) Redact(s string) string {
	if t == nil {
		var r Redactor
		return r.Redact(s)
	}
	return t.secrets.Redact(s)
}

// stageKey marks a context with a service stage.
type stageKey struct{}

// WithStage returns ctx marked with a service stage (StageStartup). The
// mark travels with the context's values into pgxpool's connect goroutine,
// so that a connection made for Factory.Start is counted as startup.
func WithStage(ctx context.Context, stage string) context.Context {
	return context.WithValue(ctx, stageKey{}, stage)
}

// StageOf returns the service stage of an event of layer in ctx: the mark
// of [WithStage] if any; else StagePoolGrowth for the connect and password
// layers and StageRequest for any other.
func StageOf(ctx context.Context, layer string) string {
	if s, ok := ctx.Value(stageKey{}).(string); ok {
		return s
	}
	switch layer {
	case LayerConnect, LayerPassword:
		return StagePoolGrowth
	case LayerStartup:
		return StageStartup
	}
	return StageRequest
}

// connectVerdict is the verdict of a connect that failed: the verdict of
// the attempt that ended its retries (the *retry.Error's: its last cause)
// when it was retried, else err's. holdfast.connect.attempts, the connect
// span, holdfast.retry.exhausted and the "giving up" line so give one
// connection's failure one error.type.
func (t *Telemetry) connectVerdict(err error) classify.Verdict {
	var re *retry.Error
	if errors.As(err, &re) {
		return re.Verdict
	}
	return t.verdict(err)
}

// verdict classifies err with the factory's classifier (its Reason is the
// error.type of holdfast's metrics and spans).
func (t *Telemetry) verdict(err error) classify.Verdict {
	if t == nil || t.classify == nil {
		return classify.Classify(err)
	}
	return t.classify(err)
}
