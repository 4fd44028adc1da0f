package readiness

import "time"

// SetClock replaces the clock of c's cache and timestamps. Call it before c
// is used.
func SetClock(c *Checker, now func() time.Time) { c.now = now }

// SetTimer replaces the timer of c's shutdown delay (Serve): f is given
// the delay and returns a channel that ends it and a stop function. Call
// it before c is used.
func SetTimer(c *Checker, f func(d time.Duration) (<-chan time.Time, func())) { c.newTimer = f }

// SetPollHook makes every drain poll of c call f with what it found, on the
// draining goroutine, after the poll is recorded. Call it before c is used.
func SetPollHook(c *Checker, f func(InUse)) {
	c.mu.Lock()
	c.pollHook = f
	c.mu.Unlock()
}
