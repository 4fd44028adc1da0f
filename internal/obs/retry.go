package obs

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/retry"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Log messages. Tests and dashboards match them; keep them stable.
const (
	MsgRetrying  = "holdfast: retrying after a transient failure"
	MsgGaveUp    = "holdfast: giving up after transient failures"
	MsgRecovered = "holdfast: recovered"
	// MsgCannotConnect is the ERROR line of a connection that failed for
	// a reason no retry fixes (a revoked grant, a wrong password, a
	// missing database), with what to check.
	MsgCannotConnect = "holdfast: cannot connect"
	// MsgGaveUpFatal is the ERROR line of a request or startup whose
	// retries ended on a failure that is not retryable (an
	// authentication refused again with a fresh password, a grant revoked
	// during an outage).
	MsgGaveUpFatal = "holdfast: giving up on a failure that is not retryable"
	// MsgPasswordPanicked is the ERROR line of a password function that
	// panicked, with its stack.
	MsgPasswordPanicked = "holdfast: the password function panicked"
)

// Error writes a sampled ERROR line of layer, naming the target in ctx.
func (t *Telemetry) Error(ctx context.Context, msg, layer, reason string, attrs ...slog.Attr) {
	if t == nil {
		return
	}
	t.log(ctx, slog.LevelError, msg, layer, reason, attrs...)
}

// retryLevel is the level of the retry and give-up lines of layer in
// stage: WARN, but DEBUG for a connection's own loops (its dials, its
// password fetches) during startup, where the startup loop writes one
// line per round of its own (each round a connection, its cause and its
// attempts in one line): a failed startup writes one WARN line per round
// at most, sampled like every line.
func retryLevel(layer, stage string) slog.Level {
	if stage == StageStartup && (layer == LayerConnect || layer == LayerPassword) {
		return slog.LevelDebug
	}
	return slog.LevelWarn
}

// Retried records one failed attempt that layer is about to retry (it is
// the retry.Retrier OnRetry hook): one log line (WARN, or DEBUG:
// retryLevel), holdfast.retries, and an attempt event on the span in ctx.
// The log line's attributes are, in order: holdfast.layer, attempt,
// delay, error.class, error.reason, holdfast.stage, error (redacted
// text).
func (t *Telemetry) Retried(ctx context.Context, layer string, e retry.Event) {
	if t == nil {
		return
	}
	stage := StageOf(ctx, layer)
	t.log(ctx, retryLevel(layer, stage), MsgRetrying, layer, e.Verdict.Reason,
		slog.String(string(KeyLayer), layer),
		slog.Int("attempt", e.Attempt),
		slog.Float64("delay_s", e.Delay.Seconds()),
		slog.String("error.class", e.Verdict.Class.String()),
		slog.String("error.reason", e.Verdict.Reason),
		slog.String(string(KeyStage), stage),
		slog.String("error", t.redactErr(e.Err)),
	)
	if t.retries.Enabled(ctx) {
		t.retries.Add(ctx, 1, metric.WithAttributes(metricAttrs(ctx,
			KeyLayer.String(layer), KeyStage.String(stage), semconv.ErrorTypeKey.String(e.Verdict.Reason))...))
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() && t.tracing() {
		span.AddEvent(EventAttempt, trace.WithAttributes(
			KeyLayer.String(layer),
			KeyAttempt.Int(e.Attempt),
			KeyOutcome.String(OutcomeFailure),
			semconv.ErrorTypeKey.String(e.Verdict.Reason),
			KeyErrorClass.String(e.Verdict.Class.String()),
			KeyDelay.Float64(e.Delay.Seconds()),
		))
	}
}

// FirstTry records a first attempt of layer that succeeded, on the fast
// path: an attempt event on the span in ctx, if that span is recording. It
// allocates nothing when no span records.
func (t *Telemetry) FirstTry(ctx context.Context, layer string) {
	if t == nil {
		return
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() && t.tracing() {
		span.AddEvent(EventAttempt, trace.WithAttributes(
			KeyLayer.String(layer), KeyAttempt.Int(1), KeyOutcome.String(OutcomeSuccess)))
	}
}

// Loop follows one retry loop of a layer, after its first attempt failed.
// Get one from [Telemetry.Begin], feed it every retry with Observe (from the
// loop's OnRetry) and close it with End. A nil *Loop records nothing.
type Loop struct {
	t     *Telemetry
	layer string
	stage string
	span  trace.Span // the loop's own span (layer acquire), or nil

	first    classify.Verdict // the verdict of the first failure
	seen     bool             // Observe was called
	attempts int              // failed attempts so far: Prior's, then the last seen by Observe
	start    time.Time        // when the loop began (its first failure)
}

// Prior tells the loop that the operation made n attempts before the
// loop's first (a connection's earlier retry rounds): the attempt counts
// it logs and records include them. Call it before Observe; the events
// Observe receives count them too.
func (l *Loop) Prior(n int) {
	if l != nil {
		l.attempts = n
	}
}

// Begin starts following a retry loop of layer. For the acquire layer it
// starts a holdfast.acquire span (the request-scope retry, from the first
// failure on) and returns a context carrying it, so that connections made
// by the retries are its children.
func (t *Telemetry) Begin(ctx context.Context, layer string) (context.Context, *Loop) {
	if t == nil {
		return ctx, nil
	}
	l := &Loop{t: t, layer: layer, stage: StageOf(ctx, layer), start: time.Now()}
	if layer == LayerAcquire && t.tracing() {
		ctx, l.span = t.tracer.Start(ctx, SpanAcquire, trace.WithAttributes(KeyStage.String(l.stage)))
	}
	return ctx, l
}

// Observe records a retried failure of the loop; call it from OnRetry,
// together with [Telemetry.Retried].
func (l *Loop) Observe(e retry.Event) {
	if l == nil {
		return
	}
	if !l.seen {
		l.first, l.seen = e.Verdict, true
	}
	l.attempts = e.Attempt
}

// End records how the loop ended: err is what retry.Retrier.Continue
// returned. It adds the last attempt's event, counts a recovery (success
// after a failure), an exhaustion or a budget rejection, writes a WARN line
// when the loop gave up on a transient failure, and ends the loop's span.
func (l *Loop) End(ctx context.Context, err error) {
	if l == nil {
		return
	}
	t := l.t
	span := trace.SpanFromContext(ctx)
	recording := span.IsRecording() && t.tracing()
	if err == nil {
		attempts := l.attempts + 1
		if recording {
			span.AddEvent(EventAttempt, trace.WithAttributes(
				KeyLayer.String(l.layer), KeyAttempt.Int(attempts), KeyOutcome.String(OutcomeSuccess)))
		}
		if attempts > 1 && t.recoveries.Enabled(ctx) {
			t.recoveries.Add(ctx, 1, metric.WithAttributes(metricAttrs(ctx,
				KeyLayer.String(l.layer), KeyStage.String(l.stage), semconv.ErrorTypeKey.String(l.first.Reason))...))
		}
		if attempts > 1 {
			// One line per recovered operation, so that the WARN lines of
			// its retries are not left without an ending.
			t.log(ctx, slog.LevelInfo, MsgRecovered, l.layer, l.first.Reason,
				slog.String(string(KeyLayer), l.layer),
				slog.Int("attempts", attempts),
				slog.Float64("took_s", time.Since(l.start).Seconds()),
				slog.String("error.reason", l.first.Reason),
				slog.String(string(KeyStage), l.stage),
			)
		}
		l.endSpan(nil, classify.Verdict{}, attempts)
		return
	}
	attempts, v, stop := l.attempts+1, t.verdict(err), retry.StopReason(0)
	var re *retry.Error
	if errors.As(err, &re) {
		attempts, v, stop = re.Attempts, re.Verdict, re.Stop
	}
	if recording {
		span.AddEvent(EventAttempt, trace.WithAttributes(
			KeyLayer.String(l.layer),
			KeyAttempt.Int(attempts),
			KeyOutcome.String(OutcomeFailure),
			semconv.ErrorTypeKey.String(v.Reason),
			KeyErrorClass.String(v.Class.String()),
		))
	}
	base := metricAttrs(ctx, KeyLayer.String(l.layer), KeyStage.String(l.stage), semconv.ErrorTypeKey.String(v.Reason))
	switch stop {
	case retry.StopExhausted, retry.StopDeadline:
		why := "attempts"
		if stop == retry.StopDeadline {
			why = "deadline"
		}
		t.exhausted.Add(ctx, 1, metric.WithAttributes(append(base, KeyStop.String(why))...))
		l.gaveUp(ctx, attempts, stop, v, re.Last)
	case retry.StopBudget:
		t.rejections.Add(ctx, 1, metric.WithAttributes(base...))
		l.gaveUp(ctx, attempts, stop, v, re.Last)
	case retry.StopFatal:
		// After a retry, a failure no retry fixes. A connection's own
		// loops leave the line to the connect's end (ConnectFailed,
		// one per connection); a transaction's fatal end is the
		// function's own error or an unknown outcome, the caller's.
		if attempts > 1 && (l.layer == LayerAcquire || l.layer == LayerStartup) {
			l.t.log(ctx, slog.LevelError, MsgGaveUpFatal, l.layer, v.Reason,
				slog.String(string(KeyLayer), l.layer),
				slog.Int("attempts", attempts),
				slog.String("error.class", v.Class.String()),
				slog.String("error.reason", v.Reason),
				slog.Bool("fresh_credential", l.first.Reason == ReasonAuthFreshToken),
				slog.String("hint", Hint(v.Reason, targetOf(ctx))),
				slog.String(string(KeyStage), l.stage),
				slog.String("error", l.t.redactErr(re.Last)),
			)
		}
	}
	l.endSpan(err, v, attempts)
}

// ReasonAuthFreshToken is the retry reason of an authentication failure
// retried once with a fresh token or password.
const ReasonAuthFreshToken = "auth-failed-fresh-token"

// ConnectFailed writes the ERROR line of a connection that layer
// (LayerConnect, LayerPassword) ended on a failure v classifies as not retryable, after attempts attempts
// (freshCredential: one of them with a freshly fetched password), sampled
// per target and reason like the retry lines. err is redacted.
func (t *Telemetry) ConnectFailed(ctx context.Context, layer string, v classify.Verdict, attempts int, freshCredential bool, err error) {
	if t == nil || v.Retryable() {
		return
	}
	hint := Hint(v.Reason, targetOf(ctx))
	if hint == "" && layer == LayerPassword {
		hint = "the password function failed: check the credentials and permissions of the identity it runs as, and the secret it reads"
	}
	t.log(ctx, slog.LevelError, MsgCannotConnect, layer, v.Reason,
		slog.String(string(KeyLayer), layer),
		slog.Int("attempts", attempts),
		slog.String("error.class", v.Class.String()),
		slog.String("error.reason", v.Reason),
		slog.Bool("fresh_credential", freshCredential),
		slog.String("hint", hint),
		slog.String(string(KeyStage), StageOf(ctx, layer)),
		slog.String("error", t.redactErr(err)),
	)
}

func (l *Loop) gaveUp(ctx context.Context, attempts int, stop retry.StopReason, v classify.Verdict, last error) {
	l.t.log(ctx, retryLevel(l.layer, l.stage), MsgGaveUp, l.layer, v.Reason,
		slog.String(string(KeyLayer), l.layer),
		slog.Int("attempts", attempts),
		slog.String("stop", stop.String()),
		slog.String("error.class", v.Class.String()),
		slog.String("error.reason", v.Reason),
		slog.String(string(KeyStage), l.stage),
		slog.String("error", l.t.redactErr(last)),
	)
}

func (l *Loop) endSpan(err error, v classify.Verdict, attempts int) {
	if l.span == nil {
		return
	}
	l.span.SetAttributes(KeyAttempt.Int(attempts))
	endSpan(l.span, err, v)
}

// endSpan ends span with the outcome: status Error described by the
// verdict (never by error text) on failure.
func endSpan(span trace.Span, err error, v classify.Verdict) {
	if err == nil {
		span.SetAttributes(KeyOutcome.String(OutcomeSuccess))
	} else {
		span.SetAttributes(KeyOutcome.String(OutcomeFailure),
			semconv.ErrorTypeKey.String(v.Reason), KeyErrorClass.String(v.Class.String()))
		span.SetStatus(codes.Error, v.String())
	}
	span.End()
}

// BeginStartup marks ctx as the startup stage (see [WithStage]) and starts
// the holdfast.startup span that covers Factory.Start. Call the returned
// function with Start's result.
func (t *Telemetry) BeginStartup(ctx context.Context) (context.Context, func(error)) {
	ctx = WithStage(ctx, StageStartup)
	if !t.tracing() {
		return ctx, func(error) {}
	}
	ctx, span := t.tracer.Start(ctx, SpanStartup, trace.WithAttributes(KeyStage.String(StageStartup)))
	return ctx, func(err error) {
		var v classify.Verdict
		if err != nil {
			v = t.verdict(err)
		}
		endSpan(span, err, v)
	}
}

// redactErr is err's text without secrets ("" for nil).
func (t *Telemetry) redactErr(err error) string {
	if err == nil {
		return ""
	}
	return t.Redact(err.Error())
}
