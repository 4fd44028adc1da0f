package conn

import (
	"context"
	"time"

	"github.com/holdfast-db/holdfast/retry"
)

// How long a door takes against a server that never answers. Each loop
// counts its MaxElapsed from its own start: a connection's from its first
// dial (endOf, state.go), a door's (Start, Factory.Acquire, the
// transaction runner, sqldb's connector) from its call. A connection's
// attempts are clamped to the time left before its end (attemptBound), so
// a connection ends within MaxElapsed; a door bounds its retries by its
// own MaxElapsed (Within) and makes each of its tries' connects end just
// before the try's deadline (ConnectsWithin), so that it ends within its
// MaxElapsed too, with the connect's own failure rather than its deadline,
// and leaves no connect dialing on after it. A door's first try is a
// connect of its own bound (the retry policy's MaxElapsed), but for Start,
// whose whole startup is within the startup policy's.

// connectEndKey carries, in the context of a door's try, when the connects
// made for it must be over (ConnectsWithin).
type connectEndKey struct{}

// endMargin is how long after a door's end what it waits on is cut at the
// latest (Within), and how long before a try's deadline its connects end
// (ConnectsWithin): long enough for a connect's failure to reach the door
// waiting on it (pgconn, pgxpool and the door's goroutine in turn), so
// that the door returns that failure, not its own deadline's.
const endMargin = 50 * time.Millisecond

// ConnectsWithin returns ctx marked so that the connects made under it —
// pgxpool builds a connection with the values of the Acquire's context,
// not its deadline — end their dials and handshakes by the earliest of
// the caller's deadline that ctx carries (retry.WithCallerDeadline: a
// door's end) and endMargin before ctx's own deadline: for the tries of a
// door, off the fast path. ctx without either is returned as it is; an
// earlier end already in ctx is kept.
func ConnectsWithin(ctx context.Context) context.Context {
	end, ok := retry.CallerDeadline(ctx)
	if dl, set := ctx.Deadline(); set && (!ok || dl.Add(-endMargin).Before(end)) {
		end, ok = dl.Add(-endMargin), true
	}
	if !ok {
		return ctx
	}
	if old, set := ctx.Value(connectEndKey{}).(time.Time); set && !end.Before(old) {
		return ctx
	}
	return context.WithValue(ctx, connectEndKey{}, end)
}

// Within returns ctx bounded for a door that retries under p: its
// retries end by start (its call; zero: now) plus p's MaxElapsed — the
// loop sleeps and tries no more past it (retry.WithCallerDeadline: it
// stops with StopDeadline), and its tries' connects end by it
// (ConnectsWithin) — and whatever a try waits on is cut endMargin after
// it at the latest (ctx's deadline). retry.Retrier.Continue would count
// MaxElapsed from its own call, after the first failure. cancel releases
// the deadline's timer. A zero MaxElapsed leaves ctx as it is.
func Within(ctx context.Context, start time.Time, p retry.Policy) (_ context.Context, cancel context.CancelFunc) {
	if p.MaxElapsed <= 0 {
		return ctx, func() {}
	}
	if start.IsZero() {
		start = time.Now()
	}
	end := start.Add(p.MaxElapsed)
	ctx = retry.WithCallerDeadline(ctx, end)
	if time.Until(end) <= 0 {
		return ctx, func() {} // over already: the loop stops at once (StopDeadline), no try to cut
	}
	return context.WithDeadline(ctx, end.Add(endMargin))
}
