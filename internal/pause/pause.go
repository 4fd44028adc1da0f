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
