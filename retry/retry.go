package retry

import (
	"context"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/internal/pause"
)

// Policy is a bounded exponential backoff, as plain data. Copy it freely; a
// Policy is never modified by this package. A Policy has no defaults of its
// own: start from [Default] and change what you need,
//
//	p := retry.Default()
//	p.MaxAttempts = 5
//
// A partial literal such as Policy{MaxAttempts: 5} is refused by
// [Policy.Validate], with a message that says so, rather than completed:
// a zero Jitter, MaxElapsed or AttemptTimeout means "none", so completing
// it would silently drop the jitter and both time bounds that [Default]
// has. (A [Retrier] whose Policy is entirely zero uses [Default].)
//
// The n-th retry (n = 1, 2, ...) sleeps
//
//	d(n) = min(InitialInterval * Multiplier^(n-1), MaxInterval) * (1 ± Jitter)
//
// and never past the caller's deadline or MaxElapsed. With [Default]:
//
//	attempt  sleep before it
//	1        none
//	2        100ms ± 20%
//	3        200ms ± 20%
//	worst case ≈ 360ms of sleep plus three attempts, all within 10s.
type Policy struct {
	// MaxAttempts is the total number of tries, the first one included (>= 1).
	// 1 means no retry.
	MaxAttempts int
	// InitialInterval is the delay before the first retry (> 0).
	InitialInterval time.Duration
	// Multiplier grows the delay after each retry (>= 1).
	Multiplier float64
	// Jitter is the randomization factor in [0, 1]: a delay d becomes uniformly
	// random in [d*(1-Jitter), d*(1+Jitter)], so that clients that failed
	// together do not retry together. 0 means no jitter.
	Jitter float64
	// MaxInterval caps the delay before jitter (>= InitialInterval).
	MaxInterval time.Duration
	// MaxElapsed bounds the loop once an attempt has failed (>= 0; 0 means
	// only the caller's context bounds it): no sleep and no later attempt
	// runs past the loop's start plus MaxElapsed. The first attempt is
	// bounded by AttemptTimeout and the caller's context. MaxElapsed never
	// extends the caller's context.
	//
	// So a loop ends within MaxElapsed of its start, or within its first
	// attempt's AttemptTimeout when that is longer: never MaxElapsed plus
	// an attempt. A later attempt's AttemptTimeout is clamped to the time
	// left, and one that op does not honour is cut at the loop's end
	// (its context's deadline). holdfast holds every retry of its own to
	// the same bound, counted from the call of its door (see
	// [Retrier.Continue]): a connection's attempts, whose bound grows after
	// each one that timed out, are clamped to the time left before its
	// MaxElapsed.
	MaxElapsed time.Duration
	// AttemptTimeout bounds each attempt (>= 0; 0 means none), within
	// MaxElapsed after the first.
	AttemptTimeout time.Duration
}

// Default returns the default policy: one try and two short retries (the
// "two short backoffs" of a request-scope retry), 100ms initial interval,
// multiplier 2, jitter 0.2, max interval 1s, 10s overall, and 3s per
// attempt.
//
// Why 3s per attempt: a healthy server completes a connect (TCP, TLS, the
// startup handshake, SCRAM or an IAM token check) in milliseconds, a slow
// one across regions or under load in well under a second; an attempt
// still silent after 3s is as good as hung (a frozen server, a black-holed
// route, a proxy that accepts and never answers), and waiting longer only
// holds the caller and the pool slot. Three attempts of 3s fit in the 10s
// overall bound, with their backoffs. A connector that needs longer per
// dial (the Cloud SQL connector's Admin API retry) brings its own policy.
func Default() Policy {
	return Policy{
		MaxAttempts:     3,
		InitialInterval: 100 * time.Millisecond,
		Multiplier:      2,
		Jitter:          0.2,
		MaxInterval:     time.Second,
		MaxElapsed:      10 * time.Second,
		AttemptTimeout:  3 * time.Second,
	}
}

// Validate returns an *InvalidPolicyError naming the first nonsense field,
// or nil. A field left at zero where zero is not allowed (MaxAttempts,
// InitialInterval, Multiplier, MaxInterval: a partial literal) gets a
// message that names [Default], the Policy to start from.
func (p Policy) Validate() error {
	bad := func(field, why string, v any, zero bool) error {
		if zero {
			why += " (" + leftAtZero + ")"
		}
		return &InvalidPolicyError{Field: field, Value: fmt.Sprint(v), Why: why}
	}
	switch {
	case p.MaxAttempts < 1:
		return bad("MaxAttempts", "must be at least 1", p.MaxAttempts, p.MaxAttempts == 0)
	case p.InitialInterval <= 0:
		return bad("InitialInterval", "must be positive", p.InitialInterval, p.InitialInterval == 0)
	case !(p.Multiplier >= 1) || p.Multiplier > 1e6: // also rejects NaN
		return bad("Multiplier", "must be between 1 and 1e6", p.Multiplier, p.Multiplier == 0)
	case !(p.Jitter >= 0 && p.Jitter <= 1):
		return bad("Jitter", "must be between 0 and 1", p.Jitter, false)
	case p.MaxInterval < p.InitialInterval:
		return bad("MaxInterval", "must be at least InitialInterval", p.MaxInterval, p.MaxInterval == 0)
	case p.MaxElapsed < 0:
		return bad("MaxElapsed", "must not be negative", p.MaxElapsed, false)
	case p.AttemptTimeout < 0:
		return bad("AttemptTimeout", "must not be negative", p.AttemptTimeout, false)
	}
	return nil
}

// leftAtZero is what Validate adds for a field a partial literal left out.
const leftAtZero = "left at zero: a Policy has no defaults of its own; start from retry.Default() and change the fields you need"

// backOff builds the un-shared backoff/v4 schedule for one loop.
// ExponentialBackOff is not safe for concurrent use, so every Do gets its own.
// Its intervals come without jitter: the loop applies Jitter itself (see
// jitter), from a random source that a simulation can seed.
func (p Policy) backOff() *backoff.ExponentialBackOff {
	return backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(p.InitialInterval),
		backoff.WithMultiplier(p.Multiplier),
		backoff.WithRandomizationFactor(0),
		backoff.WithMaxInterval(p.MaxInterval),
		backoff.WithMaxElapsedTime(0), // the loop enforces MaxElapsed itself, against the deadline
		backoff.WithClockProvider(noClock{}),
	)
}

// noClock is backoff/v4's clock for a schedule without MaxElapsedTime,
// which never needs the time.
type noClock struct{}

func (noClock) Now() time.Time { return time.Time{} }

// Event describes one failed attempt.
type Event struct {
	// Attempt is the 1-based number of the attempt that failed.
	Attempt int
	// Err is its error.
	Err error
	// Verdict is how Err was classified.
	Verdict classify.Verdict
	// Delay is how long the loop sleeps before the next attempt.
	Delay time.Duration
}

// Retrier runs operations under a Policy. A Retrier is safe for concurrent
// use by many goroutines once built; do not change its fields while Do runs.
// The zero value retries with [Default], classify.Classify and no budget.
// [Retrier.Start] hands the same loop to a caller that steps it on a clock
// of its own.
type Retrier struct {
	// Policy bounds the loop. A zero Policy means [Default]; an invalid one
	// makes Do fail with an *InvalidPolicyError without running op.
	Policy Policy
	// Classify decides whether a failure is worth another attempt; nil means
	// classify.Classify.
	Classify func(error) classify.Verdict
	// Budget, when not nil, is the retry budget the loop shares with
	// others: it may refuse a retry, never a first attempt. Every
	// Transient failure, a first attempt's too, is charged to it (its
	// FailureCost, if any), every retry spends from it, and every success
	// refills it unless NoRefund is set.
	Budget *Budget
	// NoRefund keeps a success from refilling Budget, for an operation
	// whose success does not show that the failure is over: a TCP dial
	// that a proxy or load balancer accepts while the database behind it
	// is down. The caller refills the budget once it knows (holdfast: when
	// the connection's startup handshake completes).
	NoRefund bool
	// Exempt, when not nil, reports whether a failure of verdict v is
	// exempt from Budget: it is not charged, and its retry is neither
	// refused nor spent. For a retry that has a bound of its own (holdfast
	// retries a password or token the server refused once, with a fresh
	// one: a credentials rotation under load fails many connects at once,
	// and each needs that one retry). Policy's bounds still apply.
	Exempt func(v classify.Verdict) bool
	// OnRetry, when not nil, is called synchronously on the goroutine running
	// Do after a transient failure, once the budget has allowed the retry and
	// before the sleep. It must not block; it receives Do's context.
	OnRetry func(ctx context.Context, e Event)
}

// Do calls op until it succeeds, fails with a Fatal verdict, or runs out of
// attempts, time (MaxElapsed or ctx) or budget. op receives a context bounded
// by AttemptTimeout, derived from ctx; it must honour it. Do never sleeps past
// ctx's deadline: when the next delay would overrun it, Do stops at once.
//
// Do returns nil, or an *Error that wraps the last failure of op (errors.Is
// and errors.As reach it) and, when ctx ended, context.Cause(ctx).
//
// When the first attempt succeeds, Do allocates nothing but, when
// AttemptTimeout is set, the context that bounds the attempt (context.WithTimeout:
// four allocations).
func (r *Retrier) Do(ctx context.Context, op func(ctx context.Context) error) error {
	return r.run(ctx, nil, op)
}

// Continue is Do for a caller that has already made the first attempt itself
// (on its fast path, without a Retrier) and got firstErr. It classifies
// firstErr as attempt 1 and carries on from there, so that a caller's
// success path costs nothing and its failure path keeps every bound.
// MaxElapsed counts from the call to Continue, after the first attempt; a
// caller that wants it counted from its own start passes ctx with
// [WithCallerDeadline] at that start plus MaxElapsed: the loop then stops
// there (StopDeadline), and ends within MaxElapsed of the caller's start
// as long as its attempts honour that deadline too.
func (r *Retrier) Continue(ctx context.Context, firstErr error, op func(ctx context.Context) error) error {
	if firstErr == nil {
		return nil
	}
	return r.run(ctx, firstErr, op)
}

func (r *Retrier) run(ctx context.Context, firstErr error, op func(ctx context.Context) error) error {
	l, err := r.Start(time.Now(), nil)
	if err != nil {
		return err
	}
	for {
		var err error
		if l.attempt == 0 && firstErr != nil {
			err = firstErr
		} else {
			err = r.attempt(ctx, l.p, op)
		}
		var now time.Time // read only on the failure path
		if err != nil {
			now = time.Now()
			if l.attempt == 0 && l.p.MaxElapsed > 0 {
				// MaxElapsed bounds everything after the first failure:
				// sleeps and later attempts. Applying it lazily keeps the
				// success path free of a timer; the first attempt is
				// bounded by AttemptTimeout and ctx.
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, l.start.Add(l.p.MaxElapsed))
				defer cancel()
			}
		}
		delay, again := l.Next(ctx, now, err)
		if !again {
			return l.Err()
		}
		if !sleep(ctx, delay) {
			return l.end(ctx, StopContext)
		}
	}
}

func (r *Retrier) attempt(ctx context.Context, p Policy, op func(context.Context) error) error {
	if p.AttemptTimeout <= 0 {
		return op(ctx)
	}
	actx, cancel := context.WithTimeout(ctx, p.AttemptTimeout)
	defer cancel()
	return op(actx)
}

// sleep waits for d or until ctx is done; it reports whether d elapsed
// (with d <= 0, whether ctx is not done). A wake holdfast's transaction
// runner put in ctx (a failover monitor's next change: a new writer
// known) ends it early, the next attempt made at once.
func sleep(ctx context.Context, d time.Duration) bool {
	if ctx.Err() != nil {
		return false
	}
	if w := pause.Wake(ctx); w != nil {
		return pause.Until(ctx, d, w)
	}
	return pause.For(ctx, d, nil)
}
