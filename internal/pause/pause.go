// Package pause is the one sleep of holdfast's retry loop, connect
// admission and fakes: a timer that a context, or a closing channel, cuts
// short.
package pause

import (
	"context"
	"time"
)

// For waits for d, or until ctx is done or stop is closed (a nil stop
// never is), and reports whether d elapsed. A d <= 0 elapses at once,
// whether or not ctx is done.
func For(ctx context.Context, d time.Duration, stop <-chan struct{}) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-stop:
		return false
	}
}

type wakeKey struct{}

// WithWake returns ctx whose retry sleeps (package retry's loop) end
// early, the next attempt made at once, when the channel wake returns at
// the sleep's start is closed: a failover monitor's Changed, so that a
// transaction runner re-runs as soon as a new writer is known instead of
// at its backoff's next step. wake is called once per sleep, on the
// failure path only.
func WithWake(ctx context.Context, wake func() <-chan struct{}) context.Context {
	return context.WithValue(ctx, wakeKey{}, wake)
}

// Wake returns the channel of ctx's wake (WithWake) for a sleep starting
// now, or nil when ctx has none.
func Wake(ctx context.Context) <-chan struct{} {
	if w, ok := ctx.Value(wakeKey{}).(func() <-chan struct{}); ok && w != nil {
		return w()
	}
	return nil
}

// Until waits for d, or until ctx is done or wake is closed, and reports
// whether to go on: d elapsed or wake closed (false when ctx ended
// first). A d <= 0 elapses at once.
func Until(ctx context.Context, d time.Duration, wake <-chan struct{}) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-wake:
		return ctx.Err() == nil
	case <-ctx.Done():
		return false
	}
}
