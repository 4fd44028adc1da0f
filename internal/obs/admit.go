package obs

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// The admission limit of new connections (holdfast.WithConnectLimit).
const (
	MetricConnectQueued    = "holdfast.connect.queued"
	MetricConnectQueueWait = "holdfast.connect.queue.duration"
	EventQueued            = "holdfast.connect.queued"
	KeyQueueWait           = attribute.Key("holdfast.connect.queue.wait") // seconds, on the connect span's event
	KeyQueueInFlight       = attribute.Key("holdfast.connect.queue.in_flight")
)

// Outcomes of an admission wait, values of holdfast.outcome on
// holdfast.connect.queued and holdfast.connect.queue.duration.
const (
	OutcomeAdmitted = "admitted" // the connect got its slot and went on
	OutcomeRefused  = "refused"  // its wait ended first (deadline, context)
)

// queueInstruments are the instruments of admission waits.
type queueInstruments struct {
	queued metric.Int64Counter
	wait   metric.Float64Histogram
}

// instruments are those of admission waits, for [New].
func (q *queueInstruments) instruments() []instrument {
	return []instrument{
		{&q.queued, MetricConnectQueued, "{connect}", "Connects that waited for the pool's admission limit (connects in flight, connects per second), by outcome."},
		{&q.wait, MetricConnectQueueWait, "s", "Time a connect waited for the pool's admission limit, by outcome."},
	}
}

// ConnectQueued records a connect that waited waited for an admission
// slot of a pool whose limit is inFlight connects: err nil when it was
// admitted. ctx names the pool's target ([WithTarget]) and carries the
// connect span, which gets an event. Called off the fast path only.
func (t *Telemetry) ConnectQueued(ctx context.Context, waited time.Duration, inFlight int, err error) {
	if t == nil {
		return
	}
	outcome := OutcomeAdmitted
	if err != nil {
		outcome = OutcomeRefused
	}
	kvs := metricAttrs(ctx, KeyOutcome.String(outcome))
	t.queue.queued.Add(ctx, 1, metric.WithAttributes(kvs...))
	t.queue.wait.Record(ctx, waited.Seconds(), metric.WithAttributes(kvs...))
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent(EventQueued, trace.WithAttributes(
			KeyQueueWait.Float64(waited.Seconds()),
			KeyQueueInFlight.Int(inFlight),
			KeyOutcome.String(outcome)))
	}
	// A connect refused here fails; its end is logged once, as any
	// connect's (ConnectFailed).
}
