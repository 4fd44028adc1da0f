package obs

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Outcomes of a suspension, values of holdfast.outcome on
// holdfast.bluegreen.suspended.duration.
const (
	OutcomeResumed = "resumed" // the wait ended and the work went on
	OutcomeFailed  = "failed"  // the wait ended in an error (timeout, context, rejection)
)

// BlueGreen records the telemetry of one blue/green deployment. Get it
// from [Telemetry.BlueGreen]. Its methods are safe for concurrent use and
// accept a nil *BlueGreen, which records nothing.
//
// The bluegreen package calls:
//
//   - [BlueGreen.Phase] on every phase change the monitor observes, with the
//     phase's ordinal (bluegreen.Phase) and name;
//   - [BlueGreen.Suspended] each time a connect, an acquire or a statement
//     was held by a switchover, once the wait is over, with the
//     caller's context;
//   - [BlueGreen.Finished] when a switchover ends (completed, rolled back,
//     timed out).
//
// Phase changes become events on a long-lived holdfast.bluegreen.switchover
// span, opened at the first active phase and ended by Finished. Log lines
// for phase changes and the switchover summary are the bluegreen package's
// own (its Config.Logger, which the factory sets to its logger).
type BlueGreen struct {
	t     *Telemetry
	id    string
	pool  string               // db.client.connection.pool.name ("" for none)
	attrs []attribute.KeyValue // {holdfast.bluegreen.id[, pool.name]}
	set   []metric.RecordOption

	mu    sync.Mutex
	span  trace.Span // the switchover span, while a switchover is under way
	phase int
}

// BlueGreen returns the recorder for deployment id (bluegreen.Config.ID)
// as one pool sees it: pool is the pool's name (db.client.connection.pool.name;
// "" for none), so that pools to different clusters keep apart; with a
// target, its metrics carry the target's attributes (the pool's name
// included) instead.
func (t *Telemetry) BlueGreen(id, pool string, target ...*Target) *BlueGreen {
	if t == nil {
		return nil
	}
	attrs := []attribute.KeyValue{KeyBlueGreenID.String(id)}
	switch {
	case len(target) > 0 && target[0] != nil:
		attrs = append(attrs, target[0].kvs...) // pool.name, server.address, server.port, db.namespace
	case pool != "":
		attrs = append(attrs, semconv.DBClientConnectionPoolName(pool))
	}
	b := &BlueGreen{
		t:     t,
		id:    id,
		pool:  pool,
		attrs: attrs,
		set:   []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(attrs...))},
	}
	// NOT_CREATED until the monitor reads a phase: the series exists
	// from the start, so that a dashboard shows 0, not "no data".
	t.bgPhase.Record(context.Background(), 0, b.set...)
	return b
}

// Phase records a phase change to phase (0 NOT_CREATED … 5 COMPLETED)
// named name; active says whether a switchover is under way
// (bluegreen.Phase.Active). It sets the holdfast.bluegreen.phase gauge and
// adds an event to the switchover span, opening that span at the first
// active phase.
func (b *BlueGreen) Phase(ctx context.Context, phase int, name string, active bool) {
	if b == nil {
		return
	}
	b.t.bgPhase.Record(ctx, int64(phase), b.set...)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.phase = phase
	if b.span == nil && active && b.t.tracing() {
		// A new root: the switchover is not part of whatever request
		// happened to observe it.
		_, b.span = b.t.tracer.Start(ctx, SpanSwitchover, trace.WithNewRoot(),
			trace.WithAttributes(b.attrs...))
	}
	if b.span != nil {
		b.span.AddEvent(EventPhase, trace.WithAttributes(
			KeyBlueGreenPhase.String(name), attribute.Int("holdfast.bluegreen.phase.ordinal", phase)))
	}
}

// Finished ends the switchover span with outcome ("COMPLETED", "ROLLED
// BACK", "TIMED OUT"); anything but COMPLETED sets the span's status to
// Error.
func (b *BlueGreen) Finished(ctx context.Context, outcome string) {
	if b == nil {
		return
	}
	b.mu.Lock()
	span := b.span
	b.span = nil
	b.mu.Unlock()
	if span == nil {
		return
	}
	span.SetAttributes(KeyOutcome.String(outcome))
	if outcome != "COMPLETED" {
		span.SetStatus(codes.Error, outcome)
	}
	span.End()
}

// Suspended records that work at point waited for waited because of reason
// (a short stable word, for example "IN_PROGRESS"), and ended with err
// (nil: it resumed). point is the value of holdfast.bluegreen.suspend.point,
// as the blue/green router passes it (bgroute.Observer): "connect" (a new connection waited in
// BeforeConnect), "acquire" (an Acquire waited in PrepareConn) or "query"
// (a statement on an acquired connection waited in the query tracer). It records
// holdfast.bluegreen.suspended.duration; sets
// holdfast.bluegreen.suspended.duration (seconds) and
// holdfast.bluegreen.suspended.reason on the span in ctx (the request's),
// with an event linked to the switchover span; and writes a DEBUG log line
// with ctx, so that a trace-aware handler ties it to the request.
func (b *BlueGreen) Suspended(ctx context.Context, point, reason string, waited time.Duration, err error) {
	if b == nil {
		return
	}
	outcome := OutcomeResumed
	if err != nil {
		outcome = OutcomeFailed
	}
	b.t.suspended.Record(ctx, waited.Seconds(), metric.WithAttributes(
		append(b.attrs[:len(b.attrs):len(b.attrs)], KeySuspendPoint.String(point), KeyOutcome.String(outcome))...))
	attrs := []attribute.KeyValue{
		KeySuspendDuration.Float64(waited.Seconds()),
		KeySuspendReason.String(reason),
		KeySuspendPoint.String(point),
		KeyBlueGreenID.String(b.id),
	}
	if err != nil {
		attrs = append(attrs, semconv.ErrorTypeKey.String(b.t.verdict(err).Reason))
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() && b.t.tracing() {
		span.SetAttributes(attrs...)
		b.mu.Lock()
		sw := b.span
		b.mu.Unlock()
		if sw != nil {
			span.AddLink(trace.Link{SpanContext: sw.SpanContext()})
		}
		span.AddEvent(EventSuspended, trace.WithAttributes(attrs...))
	}
	if !b.t.logger.Enabled(ctx, slog.LevelDebug) {
		return
	}
	line := []slog.Attr{
		slog.String("bluegreen.id", b.id),
		slog.String("point", point),
		slog.String("reason", reason),
		slog.Float64("waited_s", waited.Seconds()),
		slog.String("outcome", outcome),
	}
	if tg := targetOf(ctx); tg != nil {
		line = append(line, tg.attrs...)
	}
	b.t.logger.LogAttrs(ctx, slog.LevelDebug, "holdfast: suspended by a blue/green switchover", line...)
}

// FailoverTarget is the cluster a failover monitor watches, for the
// attributes of holdfast.failover.events.
type FailoverTarget struct{ kvs []attribute.KeyValue }

// FailoverEvents returns the target of a monitor of the cluster whose
// endpoint is host:port.
func FailoverEvents(host string, port int) FailoverTarget {
	return FailoverTarget{kvs: []attribute.KeyValue{semconv.ServerAddress(host), semconv.ServerPort(port)}}
}

// FailoverEvent counts a writer-failover monitor event (failover.Event*)
// of the cluster of target in holdfast.failover.events.
func (t *Telemetry) FailoverEvent(ctx context.Context, target FailoverTarget, event string) {
	if t == nil || t.foEvents == nil {
		return
	}
	t.foEvents.Add(ctx, 1, metric.WithAttributes(append([]attribute.KeyValue{KeyFailoverEvent.String(event)}, target.kvs...)...))
}
