// Package retry runs an operation again after transient failures, within
// strict bounds, under a retry budget that many loops can share.
//
// A [Retrier] combines a [Policy] (plain data: attempts, exponential backoff
// with jitter, an overall bound and a per-attempt timeout), a classifier
// (classify.Classify by default: only Transient failures are retried; anything
// unknown is Fatal) and an optional [Budget].
//
// # Bounds
//
// Every loop is bounded four ways: MaxAttempts, MaxElapsed, the caller's
// context (a loop never sleeps past its deadline: when the next delay would
// overrun it, the loop returns at once), and the Budget. Each bound has its
// own [StopReason] in the returned [*Error], which wraps the last failure so
// that errors.Is and errors.As reach it.
//
// # Budget
//
// A [Budget] is a token bucket shared by the loops that hold it. First
// attempts are never refused; retries are, when the bucket is too low.
// It comes in two shapes, both set by a [BudgetConfig]:
//
//   - The plain bucket, [DefaultBudget], in the style of the AWS SDK's
//     retry quota: retries spend from it, successes and time refill it.
//     During a sustained outage it allows a fixed number of retries at
//     once (20) and then a fixed rate (one per 5 s), whatever the demand:
//     a small share of the first attempts of a busy process, a large one
//     of a quiet process's.
//   - The budget relative to demand, [DemandBudget], gRPC's retry
//     throttling (gRFC A6): every failed attempt, first attempts
//     included, takes a token (FailureCost), and a retry runs only while
//     more than a threshold is left (Threshold; gRPC: half the bucket).
//     A healthy pool, whose bucket is full, retries a lone failure at
//     once; once a few attempts in a row have failed, retries stop
//     however many requests fail, and come back as successes and time
//     refill the bucket. Retries are then a share of the demand: in
//     the storm simulation's fleet, under 4 % of first attempts from 2 to 20
//     requests per second per pod, where the plain bucket gives 4 to 47 %.
//
// holdfast's factories use a budget relative to demand by default,
// DemandBudget's rule with a bucket of 20 tokens, 9 retries in a burst
// (holdfast.WithRetryBudget to choose another). Its retry layers nest (the
// first connection at startup retries a connect that retries its dials,
// up to 9 attempts for one operation), and a bucket small enough to keep
// a fleet's outage at a few retries per pod would cut that short, so a
// pool's startup is bounded by its startup policy alone and draws nothing
// from the budget: the budget bounds what requests retry.
//
// During a sustained outage either budget empties and further failures
// are returned after one attempt: thousands of goroutines cannot multiply
// the load on a token API or a database. holdfast gives each Factory a
// budget of its own, so that one dead database does not spend another's
// retries; for one budget over a whole process, build one with NewBudget
// and give it to every factory.
//
// # Concurrency
//
// A Retrier and a Budget are safe for concurrent use. Each call to
// [Retrier.Do] builds its own backoff/v4 ExponentialBackOff, which is not
// safe to share, and only when a first attempt has failed. When the first
// attempt succeeds, Do allocates nothing but, with an AttemptTimeout, the
// context that bounds the attempt.
package retry
