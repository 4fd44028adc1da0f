package retry

import (
	"context"
	"time"
)

// callerDeadlineKey carries WithCallerDeadline's deadline in a context.
type callerDeadlineKey struct{}

// WithCallerDeadline returns a copy of ctx that carries t, the deadline of
// a caller who waits for the work done under ctx without owning its
// context: a loop under it ([Retrier.Do], [Loop.Next]) never sleeps past t
// — it stops at once with StopDeadline, as at its own context's deadline —
// but t cancels nothing. It is for work that outlives the caller on
// purpose: pgxpool builds a connection with a context that carries the
// Acquire caller's values but not its deadline, so that a slow connect
// still serves the pool after the caller gave up; a retry inside that
// connect should still not sleep past the time the caller stops waiting.
// (holdfast.Factory.Acquire sets it for the connects it waits on.)
//
// The earliest of several nested WithCallerDeadline values applies.
func WithCallerDeadline(ctx context.Context, t time.Time) context.Context {
	if old, ok := CallerDeadline(ctx); ok && !t.Before(old) {
		return ctx
	}
	return context.WithValue(ctx, callerDeadlineKey{}, t)
}

// CallerDeadline returns the deadline that WithCallerDeadline put in ctx,
// if any.
func CallerDeadline(ctx context.Context) (time.Time, bool) {
	t, ok := ctx.Value(callerDeadlineKey{}).(time.Time)
	return t, ok
}

// stopBy returns the earliest of ctx's deadline, its caller's deadline
// (WithCallerDeadline) and end (when set).
func stopBy(ctx context.Context, end time.Time) (time.Time, bool) {
	deadline, ok := ctx.Deadline()
	if t, set := CallerDeadline(ctx); set && (!ok || t.Before(deadline)) {
		deadline, ok = t, true
	}
	if !end.IsZero() && (!ok || end.Before(deadline)) {
		deadline, ok = end, true
	}
	return deadline, ok
}
