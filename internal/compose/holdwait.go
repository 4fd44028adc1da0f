package compose

import "context"

// holdWaitKey keys, in the context of a Hold the connector asks, what the
// connector does when a layer's Hold starts to wait.
type holdWaitKey struct{}

// WithHoldWait returns ctx for the connector's Hold (Chain.Hold): yield
// runs, on the Hold's goroutine, when a layer's Hold starts to wait for
// the target (HoldWaits). The connector gives back, for the wait, what a
// connection holds only to dial — its admission slot — and takes it again
// before it dials: nothing dials while held, so a held connection keeps
// no other connect of the pool waiting for admission.
func WithHoldWait(ctx context.Context, yield func()) context.Context {
	return context.WithValue(ctx, holdWaitKey{}, yield)
}

// HoldWaits is called by a layer's Hold before it waits for the target
// (a database that is down, or suspect until the prober's verdict): it
// runs the connector's yield (WithHoldWait), if ctx carries one. A Hold
// that returns at once does not call it.
func HoldWaits(ctx context.Context) {
	if yield, ok := ctx.Value(holdWaitKey{}).(func()); ok {
		yield()
	}
}
