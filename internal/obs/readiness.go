package obs

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Readiness records the telemetry of a readiness checker. Get it from
// [Telemetry.Readiness] (the readiness package builds a Telemetry from its
// factory's providers). Its methods are safe for concurrent use and accept a
// nil *Readiness, which records nothing.
//
// The readiness package calls:
//
//   - [Readiness.Changed] whenever the health it answers changes (pass,
//     warn, fail) or its reason changes, with ready = the probe answers 200;
//   - [Readiness.Drained] when a drain ends, with its duration and outcome.
//
// Log lines for transitions and drains are the readiness package's own.
type Readiness struct{ t *Telemetry }

// Readiness returns the readiness recorder.
func (t *Telemetry) Readiness() *Readiness {
	if t == nil {
		return nil
	}
	return &Readiness{t: t}
}

// Changed records a readiness transition: the holdfast.readiness.ready
// gauge (1 ready, 0 not), one holdfast.readiness.transitions with the new
// health and reason (""; "starting", "database", "draining", ...), and an
// event on the span in ctx, if one records. Plotted against the service's
// 5xx, the transitions show which errors a failing readiness explains.
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
