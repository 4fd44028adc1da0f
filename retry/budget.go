package retry

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// BudgetConfig sizes a [Budget]. All fields are in tokens; see
// [DefaultBudget].
//
// With FailureCost zero the budget is a plain token bucket, as it was
// before FailureCost existed: retries spend RetryCost, and successes and
// time refill it, whatever the demand. With FailureCost set it is relative
// to demand, as gRPC's retry throttling is: every failed attempt, the first
// ones included, takes FailureCost, so the more attempts fail, the sooner
// retries stop; successes and time give tokens back. A config written for
// the plain bucket (FailureCost and Threshold zero) means what it meant.
type BudgetConfig struct {
	// Capacity is the most tokens the bucket holds; it starts full (> 0).
	Capacity float64
	// RetryCost is spent by each retry (>= 0, at most Capacity; > 0 unless
	// FailureCost is). Capacity/RetryCost retries can run back to back
	// before successes or time refill the bucket.
	RetryCost float64
	// SuccessRefill is returned by each success (>= 0).
	SuccessRefill float64
	// RefillPerSecond is added as time passes (>= 0), so that a process whose
	// connects are rare still regains some retries after an outage.
	RefillPerSecond float64

	// FailureCost is taken by every failed attempt that could be retried
	// (classified Transient), first attempts included, down to zero tokens
	// (>= 0): gRPC's decrement of token_count. Zero charges retries only.
	FailureCost float64
	// Threshold: a retry runs only while more than Threshold tokens are
	// left once its failure is charged (0 <= Threshold < Capacity), as gRPC
	// retries only while token_count > max_tokens/2. The tokens between
	// zero and Threshold are the memory of an outage: successes and time
	// must refill them before retries resume.
	Threshold float64
}

// DefaultBudget returns the plain token bucket: 100 tokens, a retry costs
// 5, a success refunds 1, and 1 token comes back per second. A sustained
// outage therefore allows at most 20 retries at once, then one every 5
// seconds per budget, however many goroutines are failing and whatever the
// demand: a small share of a busy process's first attempts, a large one of
// a quiet process's (41 % at 2 requests per second per pod in the storm
// simulation). See [DemandBudget] for a budget whose retries shrink as
// failures grow.
//
// It was holdfast's default budget until the factory's default became
// [DemandBudget] (with a pool's startup exempt from the budget); its name
// stays for the configurations that use it.
func DefaultBudget() BudgetConfig {
	return BudgetConfig{Capacity: 100, RetryCost: 5, SuccessRefill: 1, RefillPerSecond: 1}
}

// DemandBudget returns a budget relative to demand, gRPC's retry
// throttling (gRFC A6) scaled to connects: 5 tokens; every failed attempt
// takes 1, first attempts included; a retry runs only while more than 2.5
// are left (gRPC: more than max_tokens/2) and costs nothing more; a
// success gives back 0.1 (gRPC's token_ratio in its examples) and time 0.2
// a second (gRPC has no time refill: an RPC client's successes are many, a
// pool's connects few).
//
// A healthy pool, whose bucket is full, therefore retries a lone failure
// at once, and one connect gets its policy's attempts (3 by default: two
// failures leave 3 tokens). A third failure in a row, of any loop, leaves
// 2: retries stop until successes and time have refilled the bucket above
// 3.5 (about 7.5 s when nothing fails meanwhile; a fully drained bucket
// takes about 17.5 s). While attempts fail faster than 0.2 a second (plus
// a tenth of the successes) the bucket stays empty, so a fleet in an
// outage makes its first attempts and about two retries per budget, at
// any request rate: in the storm simulation, 0.3 to 3.9 % of first attempts from
// 2 to 20 requests per second per pod, where DefaultBudget allows 4.2 to
// 47 %.
//
// Give each Factory its own (holdfast.WithRetryBudget). A holdfast
// Factory's default budget follows the same rule with a bucket four times
// as large (20 tokens, retries above 10). The price of this one: two
// failures in a row use what the bucket allows, so a burst of failures
// across a pool gets about two retries, not twenty, too few for a
// failover's first second; and a loop that retries whole connects, each
// of whose dials is a failure, gets one connect, which is why holdfast
// bounds a pool's startup by its startup policy alone and charges nothing
// of it to the budget.
func DemandBudget() BudgetConfig {
	return BudgetConfig{Capacity: 5, FailureCost: 1, Threshold: 2.5, SuccessRefill: 0.1, RefillPerSecond: 0.2}
}

// Validate returns an *InvalidPolicyError for nonsense values, or nil.
func (c BudgetConfig) Validate() error {
	bad := func(field, why string, v float64) error {
		return &InvalidPolicyError{Field: "Budget." + field, Value: fmt.Sprint(v), Why: why}
	}
	ok := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && v <= 1e9 }
	switch {
	case !ok(c.Capacity) || c.Capacity <= 0:
		return bad("Capacity", "must be positive and finite", c.Capacity)
	case !ok(c.FailureCost) || c.FailureCost < 0:
		return bad("FailureCost", "must be zero or positive", c.FailureCost)
	case !ok(c.RetryCost) || c.RetryCost < 0 || (c.RetryCost == 0 && c.FailureCost == 0):
		return bad("RetryCost", "must be positive and finite (or zero with a positive FailureCost)", c.RetryCost)
	case c.RetryCost > c.Capacity:
		return bad("RetryCost", "must not exceed Capacity", c.RetryCost)
	case !ok(c.Threshold) || c.Threshold < 0 || c.Threshold >= c.Capacity:
		return bad("Threshold", "must be zero or positive and below Capacity", c.Threshold)
	case !ok(c.SuccessRefill) || c.SuccessRefill < 0:
		return bad("SuccessRefill", "must be zero or positive", c.SuccessRefill)
	case !ok(c.RefillPerSecond) || c.RefillPerSecond < 0:
		return bad("RefillPerSecond", "must be zero or positive", c.RefillPerSecond)
	}
	return nil
}

// Budget is a retry budget shared by the loops that reach one dependency
// (holdfast gives each Factory its own, for one database), so that an
// outage seen by thousands of goroutines cannot multiply the load on a
// token API or a database. First attempts are never refused.
//
// It is a token bucket that starts full. Each retry spends RetryCost and
// is refused when too few tokens are left; each success refunds
// SuccessRefill, and time refunds RefillPerSecond ([DefaultBudget]). With a
// FailureCost ([DemandBudget]) it is relative to demand, as gRPC's retry
// throttling (gRFC A6) is: every failed attempt that could be retried, a
// first attempt as much as a retry, takes FailureCost, and a retry runs
// only while more than Threshold tokens are left. Retries then stop after
// a few failures in a row however many requests fail, and come back as
// successes and time refill the bucket; a lone failure in a healthy pool,
// whose bucket is full, is retried at once. gRPC charges 1 per failure,
// refunds token_ratio (0.1 in its examples) per success and retries above
// max_tokens/2, with no time refill: an RPC client's successes are many,
// a pool's connects few. The AWS SDK's retry quota (500 tokens, 5 a retry,
// 10 a timeout's retry, 1 back per success) is the plain bucket: it
// charges retries only, so its allowance does not shrink as failures grow.
//
// A Budget is safe for concurrent use. A nil *Budget allows every retry.
// Success costs one atomic load while the bucket is full; a failure, an
// atomic compare-and-swap (and, with RefillPerSecond, a short mutex).
type Budget struct {
	capacity, cost, refill int64 // milli-tokens
	failCost, threshold    int64 // milli-tokens
	perSecond              float64
	now                    func() time.Time

	tokens atomic.Int64 // milli-tokens

	mu   sync.Mutex // guards last (time refill happens on the failure path only)
	last time.Time  // of the last time refill; zero until the first failure

	spent, denied, failed atomic.Int64
}

const milli = 1000

// NewBudget returns a full Budget, or an *InvalidPolicyError if c is
// invalid.
func NewBudget(c BudgetConfig) (*Budget, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	b := &Budget{
		capacity:  int64(c.Capacity * milli),
		cost:      int64(c.RetryCost * milli),
		refill:    int64(c.SuccessRefill * milli),
		failCost:  int64(c.FailureCost * milli),
		threshold: int64(c.Threshold * milli),
		perSecond: c.RefillPerSecond,
		now:       time.Now,
	}
	b.tokens.Store(b.capacity)
	return b, nil
}

// Spend records a failed attempt that the caller would retry: it takes
// FailureCost, then the cost of one retry if the retry may run, and
// reports whether it may.
func (b *Budget) Spend() bool {
	if b == nil {
		return true
	}
	return b.spend(time.Time{})
}

// Failure records a failed attempt that will not be retried (the caller's
// attempts or time ran out): it takes FailureCost, and does nothing to a
// budget without one.
func (b *Budget) Failure() {
	if b == nil {
		return
	}
	b.fail(time.Time{})
}

// spend is Spend at time now, or at b.now() when now is zero: a [Loop]
// passes the time of its own clock.
func (b *Budget) spend(now time.Time) bool {
	if b == nil {
		return true
	}
	b.refillAt(now)
	if b.failCost > 0 {
		b.failed.Add(1)
	}
	for {
		cur := b.tokens.Load()
		next := max(cur-b.failCost, 0)
		if next <= b.threshold || next < b.cost {
			if next == cur || b.tokens.CompareAndSwap(cur, next) {
				b.denied.Add(1)
				return false
			}
			continue
		}
		if b.tokens.CompareAndSwap(cur, next-b.cost) {
			b.spent.Add(1)
			return true
		}
	}
}

// fail is Failure at time now (b.now() when zero).
func (b *Budget) fail(now time.Time) {
	if b == nil || b.failCost == 0 {
		return
	}
	b.refillAt(now)
	b.failed.Add(1)
	for {
		cur := b.tokens.Load()
		if cur == 0 || b.tokens.CompareAndSwap(cur, max(cur-b.failCost, 0)) {
			return
		}
	}
}

// refillAt adds the time refill due at now (b.now() when zero). The
// bucket is full until the first failure, so time starts counting then.
func (b *Budget) refillAt(now time.Time) {
	if b.perSecond <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.IsZero() {
		now = b.now()
	}
	if b.last.IsZero() {
		b.last = now
	}
	if add := int64(now.Sub(b.last).Seconds() * b.perSecond * milli); add > 0 {
		b.last = now
		b.add(add)
	}
}

// Success refunds the bucket after a successful operation.
func (b *Budget) Success() {
	if b == nil || b.refill == 0 {
		return
	}
	b.add(b.refill)
}

func (b *Budget) add(n int64) {
	for {
		cur := b.tokens.Load()
		if cur >= b.capacity {
			return
		}
		if b.tokens.CompareAndSwap(cur, min(cur+n, b.capacity)) {
			return
		}
	}
}

// Available returns the tokens currently in the bucket.
func (b *Budget) Available() float64 {
	if b == nil {
		return math.Inf(1)
	}
	return float64(b.tokens.Load()) / milli
}

// Retries returns how many retries the budget has allowed.
func (b *Budget) Retries() int64 {
	if b == nil {
		return 0
	}
	return b.spent.Load()
}

// Denied returns how many retries the budget has refused.
func (b *Budget) Denied() int64 {
	if b == nil {
		return 0
	}
	return b.denied.Load()
}

// Failures returns how many failed attempts the budget has charged
// FailureCost for (zero without a FailureCost).
func (b *Budget) Failures() int64 {
	if b == nil {
		return 0
	}
	return b.failed.Load()
}
