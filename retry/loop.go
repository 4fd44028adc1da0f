package retry

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/holdfast-db/holdfast/classify"
)

// Loop is one retry loop that its caller steps through, attempt by
// attempt, on a clock of its own, instead of blocking in [Retrier.Do]: for
// an event loop that must not block, and for simulations on a virtual clock
// (the storm simulation steps ten thousand of them). Do is a Loop on the real
// clock: [Loop.Next] makes every decision Do makes (the classification,
// MaxAttempts, MaxElapsed, the caller's deadline, the Budget, the jittered
// delay, OnRetry), so a stepped loop behaves as Do would.
//
// The caller runs each attempt itself, bounded by the Policy's
// AttemptTimeout, then passes its result to Next:
//
//	l, err := r.Start(now, nil)
//	for err == nil {
//		delay, again := l.Next(ctx, now, attempt())
//		if !again {
//			err = l.Err() // nil after a success
//			break
//		}
//		// wait delay, on the caller's clock
//	}
//
// The zero Loop is not usable: get one from [Retrier.Start]. A Loop is not
// safe for concurrent use; its Retrier may run other loops meanwhile.
type Loop struct {
	r        *Retrier
	p        Policy
	classify func(error) classify.Verdict
	rnd      *rand.Rand
	start    time.Time
	attempt  int                         // attempts made so far
	bo       *backoff.ExponentialBackOff // built on the first retry: a success allocates nothing
	last     error
	verdict  classify.Verdict
	done     bool
	err      error
}

// Start begins a retry loop whose first attempt starts at now; MaxElapsed
// counts from now. rnd draws the jitter of its delays; nil means the
// process-wide source of math/rand/v2, as Do uses. An invalid Policy is an
// *InvalidPolicyError.
//
// The Budget, if any, refills with the times passed to Next: give loops on
// a virtual clock budgets of their own, never one that Do also uses.
func (r *Retrier) Start(now time.Time, rnd *rand.Rand) (Loop, error) {
	p := r.Policy
	if p == (Policy{}) {
		p = Default()
	}
	if err := p.Validate(); err != nil {
		return Loop{}, err
	}
	c := r.Classify
	if c == nil {
		c = classify.Classify
	}
	return Loop{r: r, p: p, classify: c, rnd: rnd, start: now}, nil
}

// Next takes err, the result of the attempt that ended at now, and reports
// whether to make another attempt, after delay. When it reports false the
// loop is over and [Loop.Err] gives its result. ctx is the caller's
// context: its end stops the loop (StopContext), no delay runs past its
// deadline, a caller's deadline it carries ([WithCallerDeadline]) or the
// loop's MaxElapsed (StopDeadline), and OnRetry receives it. A success
// refills the Budget (unless the Retrier's NoRefund is set); a failure
// classified Transient is charged to it (its FailureCost, whether or not
// the loop goes on), and a retry spends from it, at now, unless the
// Retrier's Exempt exempts the failure's verdict.
func (l *Loop) Next(ctx context.Context, now time.Time, err error) (delay time.Duration, again bool) {
	if l.done || l.r == nil {
		return 0, false
	}
	l.attempt++
	if err == nil {
		if !l.r.NoRefund {
			l.r.Budget.Success()
		}
		l.done = true
		return 0, false
	}
	l.last, l.verdict = err, l.classify(err)
	budget := l.r.Budget
	if l.r.Exempt != nil && l.r.Exempt(l.verdict) {
		budget = nil
	}
	if ctx.Err() != nil {
		l.end(ctx, StopContext)
		return 0, false
	}
	if !l.verdict.Retryable() {
		l.end(ctx, StopFatal)
		return 0, false
	}
	if l.attempt >= l.p.MaxAttempts {
		budget.fail(now)
		l.end(ctx, StopExhausted)
		return 0, false
	}
	if l.bo == nil {
		l.bo = l.p.backOff()
	}
	u := 0.0
	if l.p.Jitter > 0 {
		if l.rnd != nil {
			u = l.rnd.Float64()
		} else {
			u = rand.Float64()
		}
	}
	delay = jitter(l.bo.NextBackOff(), l.p.Jitter, u)
	var end time.Time
	if l.p.MaxElapsed > 0 {
		end = l.start.Add(l.p.MaxElapsed)
	}
	if deadline, ok := stopBy(ctx, end); ok && deadline.Sub(now) <= delay {
		budget.fail(now)
		l.end(ctx, StopDeadline)
		return 0, false
	}
	if !budget.spend(now) {
		l.end(ctx, StopBudget)
		return 0, false
	}
	if l.r.OnRetry != nil {
		l.r.OnRetry(ctx, Event{Attempt: l.attempt, Err: err, Verdict: l.verdict, Delay: delay})
	}
	return delay, true
}

// Err returns the result of a loop that Next has ended: nil after a
// success, otherwise an *Error as Do returns. While the loop goes on, Err
// returns nil; a caller whose context ends during a delay stops there with
// an error of its own.
func (l *Loop) Err() error { return l.err }

// end ends the loop with reason after its last failed attempt and returns
// the *Error.
func (l *Loop) end(ctx context.Context, reason StopReason) error {
	e := &Error{Attempts: l.attempt, Last: l.last, Verdict: l.verdict, Stop: reason}
	if reason == StopContext {
		e.Cause = context.Cause(ctx)
	}
	l.done, l.err = true, e
	return e
}

// jitter spreads d uniformly over [d*(1-f), d*(1+f)], with u uniform in
// [0, 1): backoff/v4's formula, applied here so that the random source can
// be seeded.
func jitter(d time.Duration, f, u float64) time.Duration {
	if f == 0 {
		return d
	}
	delta := f * float64(d)
	lo, hi := float64(d)-delta, float64(d)+delta
	return time.Duration(lo + u*(hi-lo+1))
}
