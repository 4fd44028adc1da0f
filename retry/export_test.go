package retry

import "time"

// SetBudgetClock replaces b's clock for a test.
func SetBudgetClock(b *Budget, now func() time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.now = now
	b.last = now()
}

// RefillBudget applies the time refill due now on b's clock.
func RefillBudget(b *Budget) { b.refillAt(time.Time{}) }
