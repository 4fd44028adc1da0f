package drain

// lb/internal/drain/drain.go is a copy of this file for the lb module, which
// cannot import the root module; internal/drain/sync_test.go keeps them equal.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/holdfast-db/holdfast/internal/cfgerr"
)

// Defaults of [Config], from the L4 drain procedure: check every second,
// give up after two minutes.
const (
	DefaultInterval = time.Second
	DefaultTimeout  = 2 * time.Minute
)

// Config bounds a [Wait]. The zero value means the defaults.
type Config struct {
	// Interval is the time between the end of one poll and the start of
	// the next (>= 0; 0 means DefaultInterval).
	Interval time.Duration
	// Timeout bounds the whole wait, measured from its start (>= 0; 0
	// means DefaultTimeout).
	Timeout time.Duration
}

// withDefaults returns c with zero fields replaced by the defaults.
func (c Config) withDefaults() Config {
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	return c
}

// Validate returns a [*ConfigError] naming the first negative field, or
// nil. Zero fields are valid: they mean the defaults.
func (c Config) Validate() error {
	switch {
	case c.Interval < 0:
		return &ConfigError{Pkg: "drain", Field: "Interval", Why: "must not be negative (got " + c.Interval.String() + ")"}
	case c.Timeout < 0:
		return &ConfigError{Pkg: "drain", Field: "Timeout", Why: "must not be negative (got " + c.Timeout.String() + ")"}
	}
	return nil
}

// Count is how many of one kind of thing are in use, for example
// {What: "acquired connection", N: 2}. What is a singular noun; [Usage.String]
// adds an "s" when N is not 1.
type Count struct {
	What string
	N    int64
}

// Usage is what a [Probe] found in use. It is drained when every N is zero
// (an empty Usage is drained).
type Usage []Count

// Zero reports whether nothing is in use: every N is zero or less.
func (u Usage) Zero() bool {
	for _, c := range u {
		if c.N > 0 {
			return false
		}
	}
	return true
}

// String lists the counts that are not zero, for example
// "1 acquired connection, 2 in-flight requests", or returns "nothing in use"
// when u is zero.
func (u Usage) String() string {
	var b strings.Builder
	for _, c := range u {
		if c.N <= 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.FormatInt(c.N, 10))
		b.WriteByte(' ')
		b.WriteString(c.What)
		if c.N != 1 {
			b.WriteByte('s')
		}
	}
	if b.Len() == 0 {
		return "nothing in use"
	}
	return b.String()
}

// Probe reports what is in use now. It is called on the goroutine running
// [Wait], never concurrently with itself within one Wait, with Wait's
// context; it must honour it. An error ends the wait.
type Probe func(ctx context.Context) (Usage, error)

// Result describes a successful wait.
type Result struct {
	// Elapsed is the time from the start of the wait to the poll that read
	// zero.
	Elapsed time.Duration
	// Polls is the number of times the probe ran, that last poll included.
	Polls int
}

// Wait polls probe at once and then every cfg.Interval until it reports a
// zero [Usage], and returns the [Result]. It gives up when cfg.Timeout has
// passed since the start, after one last poll at that moment, or when ctx
// ends, with a [*TimeoutError] holding the last Usage seen; it stops at
// once with a [*ProbeError] when probe fails. An invalid cfg or a nil probe
// give a [*ConfigError] without polling.
func Wait(ctx context.Context, cfg Config, probe Probe) (Result, error) {
	return wait(ctx, cfg, probe, realClock{})
}

// clock is the time source of wait; tests replace it.
type clock interface {
	Now() time.Time
	// After returns a channel that receives after d, and a func that
	// releases the timer.
	After(d time.Duration) (<-chan time.Time, func())
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) After(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTimer(d)
	return t.C, func() { t.Stop() }
}

func wait(ctx context.Context, cfg Config, probe Probe, clk clock) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	if probe == nil {
		return Result{}, &ConfigError{Pkg: "drain", Field: "Probe", Why: "must not be nil"}
	}
	cfg = cfg.withDefaults()
	start := clk.Now()
	deadline := start.Add(cfg.Timeout)
	polls := 0
	for {
		if err := ctx.Err(); err != nil {
			return Result{}, &TimeoutError{Timeout: cfg.Timeout, Elapsed: clk.Now().Sub(start), Polls: polls, Cause: context.Cause(ctx)}
		}
		u, err := probe(ctx)
		polls++
		now := clk.Now()
		if err != nil {
			return Result{}, &ProbeError{Polls: polls, Err: err}
		}
		if u.Zero() {
			return Result{Elapsed: now.Sub(start), Polls: polls}, nil
		}
		left := deadline.Sub(now)
		if left <= 0 {
			return Result{}, &TimeoutError{Timeout: cfg.Timeout, Elapsed: now.Sub(start), Polls: polls, InUse: u}
		}
		c, stop := clk.After(min(cfg.Interval, left))
		select {
		case <-c:
			stop()
		case <-ctx.Done():
			stop()
			return Result{}, &TimeoutError{Timeout: cfg.Timeout, Elapsed: clk.Now().Sub(start), Polls: polls, InUse: u, Cause: context.Cause(ctx)}
		}
	}
}

// ErrTimeout is matched by every [*TimeoutError].
var ErrTimeout = errors.New("drain: work still in use")

// TimeoutError says that a [Wait] ended before its probe read zero: the
// bound passed (Cause is nil) or the caller's context ended first (Cause is
// context.Cause of it). InUse is what the last poll found. It is not
// retryable as such: the caller decides whether to wait again or to abort.
type TimeoutError struct {
	Timeout time.Duration // the bound, after defaults
	Elapsed time.Duration // time from the start of the wait to giving up
	Polls   int           // polls made
	InUse   Usage         // what the last poll found; nil if none was made
	Cause   error         // nil when the bound passed, else the context's cause
}

// Error says how long the wait ran and what was still in use, for example
// "drain: timed out after 2m0s: still in use: 1 acquired connection".
func (e *TimeoutError) Error() string {
	inUse := "not polled"
	if e.InUse != nil {
		inUse = e.InUse.String()
	}
	if e.Cause != nil {
		return fmt.Sprintf("drain: stopped after %s (%v): still in use: %s", e.Elapsed.Round(time.Millisecond), e.Cause, inUse)
	}
	return fmt.Sprintf("drain: timed out after %s: still in use: %s", e.Timeout, inUse)
}

// Unwrap returns Cause.
func (e *TimeoutError) Unwrap() error { return e.Cause }

// Is matches [ErrTimeout].
func (e *TimeoutError) Is(target error) bool { return target == ErrTimeout }

// ProbeError wraps the error of a failed [Probe]. Whether the cause is
// transient is for the caller to judge from Err; the wait itself is over.
type ProbeError struct {
	Polls int // polls made, the failed one included
	Err   error
}

// Error returns "drain: probe failed on poll N: <err>".
func (e *ProbeError) Error() string {
	return fmt.Sprintf("drain: probe failed on poll %d: %v", e.Polls, e.Err)
}

// Unwrap returns Err.
func (e *ProbeError) Unwrap() error { return e.Err }

// ErrInvalidConfig is matched by every [*ConfigError].
var ErrInvalidConfig = cfgerr.ErrInvalid

// ConfigError reports a nil or nonsense option, argument or configuration
// field. It is not retryable: fix the configuration. Every package of
// holdfast reports its configuration errors with this one type
// (holdfast.ConfigError, bluegreen.ConfigError, ...
// are the same), so one errors.As finds any of them; Error reads
// "drain: invalid <Field>: <Why>", and Unwrap returns Err.
type ConfigError = cfgerr.Error
