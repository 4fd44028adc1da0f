package retry

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// BudgetConfig sizes a [Budget]. All fields are in tokens; see [DefaultBudget].
type BudgetConfig struct {
	// Capacity is the most tokens the bucket holds; it starts full (> 0).
	Capacity float64
	// RetryCost is spent by each retry (> 0). Capacity/RetryCost retries can
	// run back to back before successes or time refill the bucket.
	RetryCost float64
	// SuccessRefill is returned by each success (>= 0).
	SuccessRefill float64
	// RefillPerSecond is added as time passes (>= 0), so that a process whose
	// connects are rare still regains some retries after an outage.
	RefillPerSecond float64
}

// DefaultBudget returns the default budget: 100 tokens, a retry costs 5, a
// success refunds 1, and 1 token comes back per second. A sustained outage
// therefore allows at most 20 retries at once, then one every 5 seconds per
// budget, however many goroutines are failing.
func DefaultBudget() BudgetConfig {
	return BudgetConfig{Capacity: 100, RetryCost: 5, SuccessRefill: 1, RefillPerSecond: 1}
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
	case !ok(c.RetryCost) || c.RetryCost <= 0:
		return bad("RetryCost", "must be positive and finite", c.RetryCost)
	case c.RetryCost > c.Capacity:
		return bad("RetryCost", "must not exceed Capacity", c.RetryCost)
	case !ok(c.SuccessRefill) || c.SuccessRefill < 0:
		return bad("SuccessRefill", "must be zero or positive", c.SuccessRefill)
	case !ok(c.RefillPerSecond) || c.RefillPerSecond < 0:
		return bad("RefillPerSecond", "must be zero or positive", c.RefillPerSecond)
	}
	return nil
}

// Budget is a retry budget: a token bucket in the style of gRPC retry
// throttling and the AWS SDK retry quota. First attempts never touch it;
// each retry spends RetryCost tokens and is refused when too few are left;
// each success refunds SuccessRefill, and time refunds RefillPerSecond.
// Share one Budget between the loops that reach one dependency (holdfast
// gives each Factory its own, for one database) so that an outage seen by
// thousands of goroutines cannot multiply the load on a token API or a
// database.
//
// A Budget is safe for concurrent use. A nil *Budget allows every retry.
// Success costs one atomic load while the bucket is full.
type Budget struct {
	capacity, cost, refill int64 // milli-tokens
	perSecond              float64
	now                    func() time.Time

	tokens atomic.Int64 // milli-tokens

	mu   sync.Mutex // guards last (time refill happens on the retry path only)
	last time.Time  // of the last time refill; zero until the first retry

	spent, denied atomic.Int64
}

const milli = 1000

// NewBudget returns a full Budget, or an error if c is invalid.
func NewBudget(c BudgetConfig) (*Budget, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	b := &Budget{
		capacity:  int64(c.Capacity * milli),
		cost:      int64(c.RetryCost * milli),
		refill:    int64(c.SuccessRefill * milli),
		perSecond: c.RefillPerSecond,
		now:       time.Now,
	}
	b.tokens.Store(b.capacity)
	return b, nil
}

// Spend takes the cost of one retry and reports whether the retry may run.
func (b *Budget) Spend() bool {
	if b == nil {
		return true
	}
	return b.spend(time.Time{})
}

// spend is Spend at time now, or at b.now() when now is zero: a [Loop]
// passes the time of its own clock. The bucket is full until the first
// retry, so time starts counting then.
func (b *Budget) spend(now time.Time) bool {
	if b == nil {
		return true
	}
	if b.perSecond > 0 {
		b.mu.Lock()
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
		b.mu.Unlock()
	}
	for {
		cur := b.tokens.Load()
		if cur < b.cost {
			b.denied.Add(1)
			return false
		}
		if b.tokens.CompareAndSwap(cur, cur-b.cost) {
			b.spent.Add(1)
			return true
		}
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
