package obs

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Metric names of the readiness checks, one series per target of a
// checker (see [Readiness.Check]).
const (
	MetricCheckReady       = "holdfast.readiness.check.ready"
	MetricCheckTransitions = "holdfast.readiness.check.transitions"
	MetricCheckDuration    = "holdfast.readiness.check.duration"
)

// KeyReadyCheck is the attribute of a readiness check's name (the target's
// name in the readiness JSON; by default its pool's name).
const KeyReadyCheck = attribute.Key("holdfast.readiness.check")

// Readiness records the telemetry of a readiness checker. Get it from
// [Telemetry.Readiness] (the readiness package builds a Telemetry from its
// factory's providers). Its methods are safe for concurrent use and accept a
// nil *Readiness, which records nothing.
//
// The readiness package calls:
//
//   - [Readiness.Changed] whenever the health it answers changes (pass,
//     warn, fail) or its reason changes, with ready = the probe answers 200;
//   - [Readiness.Drained] when a drain ends, with its duration and outcome;
//   - the methods of a [ReadinessCheck], one per target, for each target's
//     own health and check durations.
//
// Log lines for transitions and drains are the readiness package's own.
type Readiness struct {
	t *Telemetry

	// Per-target instruments; nil when the meter provider refused them.
	checkReady metric.Int64Gauge
	checkMoves metric.Int64Counter
	checkTime  metric.Float64Histogram
}

// Readiness returns the readiness recorder.
func (t *Telemetry) Readiness() *Readiness {
	if t == nil {
		return nil
	}
	r := &Readiness{t: t}
	m := t.meter
	var err error
	if r.checkReady, err = m.Int64Gauge(MetricCheckReady, metric.WithUnit("1"),
		metric.WithDescription("1 while a readiness check (one target: a pool or a *sql.DB) passes or warns, 0 while it fails, required or not.")); err != nil {
		r.checkReady = nil
	}
	if r.checkMoves, err = m.Int64Counter(MetricCheckTransitions, metric.WithUnit("{transition}"),
		metric.WithDescription("Changes of a readiness check's health, by target and the health and reason changed to.")); err != nil {
		r.checkMoves = nil
	}
	if r.checkTime, err = m.Float64Histogram(MetricCheckDuration, metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(timeBuckets...),
		metric.WithDescription("Duration of readiness database checks, by target and outcome.")); err != nil {
		r.checkTime = nil
	}
	return r
}

// Changed records a readiness transition: the holdfast.readiness.ready
// gauge (1 ready, 0 not), one holdfast.readiness.transitions with the new
// health and reason (""; "starting", "database", "draining", ...), and an
// event on the span in ctx, if one records. Plotted against the service's
// 5xx, the transitions show which errors a failing readiness explains.
// These are the checker's overall answer: they carry no target.
func (r *Readiness) Changed(ctx context.Context, ready bool, health, reason string) {
	if r == nil {
		return
	}
	v := int64(0)
	if ready {
		v = 1
	}
	r.t.ready.Record(ctx, v)
	attrs := metric.WithAttributes(KeyReadyHealth.String(health), KeyReadyReason.String(reason))
	r.t.readyMoves.Add(ctx, 1, attrs)
	if span := trace.SpanFromContext(ctx); span.IsRecording() && r.t.tracing() {
		span.AddEvent(EventReadiness, trace.WithAttributes(KeyReadyHealth.String(health), KeyReadyReason.String(reason)))
	}
}

// Drained records one drain of took that ended with outcome (for example
// "drained", "timeout", "canceled") in holdfast.readiness.drain.duration.
func (r *Readiness) Drained(ctx context.Context, took time.Duration, outcome string) {
	if r == nil {
		return
	}
	r.t.drain.Record(ctx, took.Seconds(), metric.WithAttributes(KeyOutcome.String(outcome)))
}

// CheckTarget names the target of one readiness check in its series.
type CheckTarget struct {
	Check    string // the check's name (holdfast.readiness.check)
	Pool     string // db.client.connection.pool.name, as in the pool's own metrics
	Host     string // server.address: the pool's configured host
	Port     int    // server.port
	Database string // db.namespace
}

// ReadinessCheck records the telemetry of one target of a readiness
// checker, every series with the target's attributes: holdfast.readiness.
// check, db.client.connection.pool.name, server.address, server.port and
// db.namespace (one set per target: bounded). Get it from
// [Readiness.Check]. Its methods accept a nil *ReadinessCheck, which
// records nothing.
type ReadinessCheck struct {
	r     *Readiness
	attrs []attribute.KeyValue
	set   metric.MeasurementOption // the target's attribute set
}

// Check returns the recorder of one target's readiness check.
func (r *Readiness) Check(t CheckTarget) *ReadinessCheck {
	if r == nil {
		return nil
	}
	attrs := []attribute.KeyValue{
		KeyReadyCheck.String(t.Check),
		semconv.DBClientConnectionPoolName(t.Pool),
		semconv.ServerAddress(t.Host),
		semconv.ServerPort(t.Port),
		semconv.DBNamespace(t.Database),
	}
	return &ReadinessCheck{r: r, attrs: attrs, set: metric.WithAttributeSet(attribute.NewSet(attrs...))}
}

// Changed records a change of the target's own health (pass, warn, fail;
// fail also for a target that is not required, whose failure only makes
// the checker warn) or reason: holdfast.readiness.check.ready (1 unless
// fail) and one holdfast.readiness.check.transitions with the health and
// reason.
func (c *ReadinessCheck) Changed(ctx context.Context, health, reason string) {
	if c == nil {
		return
	}
	v := int64(1)
	if health == "fail" {
		v = 0
	}
	if c.r.checkReady != nil {
		c.r.checkReady.Record(ctx, v, c.set)
	}
	if c.r.checkMoves != nil {
		attrs := append(append(make([]attribute.KeyValue, 0, len(c.attrs)+2), c.attrs...),
			KeyReadyHealth.String(health), KeyReadyReason.String(reason))
		c.r.checkMoves.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(attrs...)))
	}
}

// Checked records one database check of the target that took took, in
// holdfast.readiness.check.duration with holdfast.outcome success or
// failure.
func (c *ReadinessCheck) Checked(ctx context.Context, took time.Duration, ok bool) {
	if c == nil || c.r.checkTime == nil {
		return
	}
	outcome := OutcomeFailure
	if ok {
		outcome = OutcomeSuccess
	}
	attrs := append(append(make([]attribute.KeyValue, 0, len(c.attrs)+1), c.attrs...), KeyOutcome.String(outcome))
	c.r.checkTime.Record(ctx, took.Seconds(), metric.WithAttributeSet(attribute.NewSet(attrs...)))
}
