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
// A [Budget] is a token bucket shared by the loops that hold it, in the
// style of gRPC retry throttling and the AWS SDK retry quota. First attempts
// never spend from it, retries do, and successes and time refill it. During a
// sustained outage the budget empties and further failures are returned after
// one attempt: thousands of goroutines cannot multiply the load on a token
// API or a database. holdfast gives each Factory a budget of its own, so
// that one dead database does not spend another's retries;
// holdfast.ProcessBudget is one budget for a whole process.
//
// # Concurrency
//
// A Retrier and a Budget are safe for concurrent use. Each call to
// [Retrier.Do] builds its own backoff/v4 ExponentialBackOff, which is not
// safe to share, and only when a first attempt has failed. When the first
// attempt succeeds, Do allocates nothing but, with an AttemptTimeout, the
// context that bounds the attempt.
package retry
