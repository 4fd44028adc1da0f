package retry_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/retry"
)

// epoch is a virtual clock's start, far from the real time.
var epoch = time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)

// stepAll runs a Loop on a virtual clock whose attempts fail with errs[i]
// (the last one repeating) and take 5ms each; it returns the delays and
// the loop's result.
func stepAll(t *testing.T, r *retry.Retrier, start time.Time, rnd *rand.Rand, errs ...error) ([]time.Duration, error) {
	t.Helper()
	l, err := r.Start(start, rnd)
	if err != nil {
		t.Fatal(err)
	}
	now := start
	var delays []time.Duration
	for i := 0; ; i++ {
		now = now.Add(5 * time.Millisecond)
		delay, again := l.Next(context.Background(), now, errs[min(i, len(errs)-1)])
		if !again {
			return delays, l.Err()
		}
		delays = append(delays, delay)
		now = now.Add(delay)
	}
}

func TestLoopDefaultPolicy(t *testing.T) {
	t.Parallel()
	r := &retry.Retrier{Classify: testClassify}
	delays, err := stepAll(t, r, epoch, rand.New(rand.NewPCG(1, 2)), errTransient)
	var re *retry.Error
	if !errors.As(err, &re) || re.Stop != retry.StopExhausted || re.Attempts != 3 || !errors.Is(err, errTransient) {
		t.Fatalf("err = %v, want attempts exhausted after 3 attempts", err)
	}
	base := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}
	if len(delays) != len(base) {
		t.Fatalf("delays = %v, want %d", delays, len(base))
	}
	for i, d := range delays {
		if lo, hi := base[i]*8/10, base[i]*12/10; d < lo || d > hi {
			t.Errorf("delay %d = %v, want within [%v, %v]", i+1, d, lo, hi)
		}
	}
}

func TestLoopSeededJitterRepeats(t *testing.T) {
	t.Parallel()
	r := &retry.Retrier{Policy: retry.Policy{MaxAttempts: 8, InitialInterval: time.Millisecond,
		Multiplier: 2, Jitter: 0.5, MaxInterval: time.Second}, Classify: testClassify}
	a, _ := stepAll(t, r, epoch, rand.New(rand.NewPCG(7, 7)), errTransient)
	b, _ := stepAll(t, r, epoch, rand.New(rand.NewPCG(7, 7)), errTransient)
	c, _ := stepAll(t, r, epoch, rand.New(rand.NewPCG(8, 8)), errTransient)
	if len(a) != 7 || len(b) != 7 {
		t.Fatalf("got %d and %d delays, want 7", len(a), len(b))
	}
	same := true
	for i := range a {
		if a[i] != b[i] {
			t.Errorf("delay %d: %v then %v with the same seed", i+1, a[i], b[i])
		}
		same = same && a[i] == c[i]
	}
	if same {
		t.Error("another seed gave the same delays")
	}
}

func TestLoopSuccessAndFatal(t *testing.T) {
	t.Parallel()
	b, _ := retry.NewBudget(retry.BudgetConfig{Capacity: 10, RetryCost: 5, SuccessRefill: 5})
	r := &retry.Retrier{Policy: fast(), Classify: testClassify, Budget: b}
	delays, err := stepAll(t, r, epoch, nil, errTransient, nil)
	if err != nil || len(delays) != 1 || b.Available() != 10 {
		t.Fatalf("err = %v, delays = %v, Available = %v: want a success after one retry, refunded", err, delays, b.Available())
	}
	var re *retry.Error
	if _, err := stepAll(t, r, epoch, nil, errFatal); !errors.As(err, &re) || re.Stop != retry.StopFatal || re.Attempts != 1 {
		t.Fatalf("err = %v, want not retryable after 1 attempt", err)
	}
	l, _ := r.Start(epoch, nil)
	l.Next(context.Background(), epoch, nil)
	if _, again := l.Next(context.Background(), epoch, errTransient); again || l.Err() != nil {
		t.Fatalf("Next after the end: again = %v, Err = %v; want false, nil", again, l.Err())
	}
}

func TestLoopMaxElapsedOnVirtualClock(t *testing.T) {
	t.Parallel()
	p := retry.Default()
	p.MaxAttempts = 100
	r := &retry.Retrier{Policy: p, Classify: testClassify}
	ctx := context.Background()
	l, _ := r.Start(epoch, nil)
	if _, again := l.Next(ctx, epoch.Add(9*time.Second), errTransient); !again {
		t.Fatalf("9s into a 10s MaxElapsed, a delay of about 100ms fits; err = %v, want a retry", l.Err())
	}
	l, _ = r.Start(epoch, nil)
	var re *retry.Error
	if _, again := l.Next(ctx, epoch.Add(9950*time.Millisecond), errTransient); again ||
		!errors.As(l.Err(), &re) || re.Stop != retry.StopDeadline {
		t.Fatalf("9.95s into a 10s MaxElapsed: again = %v, err = %v; want the deadline stop", again, l.Err())
	}
}

func TestLoopBudgetOnVirtualClock(t *testing.T) {
	t.Parallel()
	b, _ := retry.NewBudget(retry.BudgetConfig{Capacity: 10, RetryCost: 5, RefillPerSecond: 1})
	p := fast()
	p.MaxAttempts, p.MaxElapsed = 2, 0
	r := &retry.Retrier{Policy: p, Classify: testClassify, Budget: b}
	retries := func(at time.Time) (n int) {
		for range 3 {
			l, _ := r.Start(at, nil)
			if _, again := l.Next(context.Background(), at, errTransient); again {
				n++
			}
		}
		return n
	}
	if got := retries(epoch); got != 2 {
		t.Fatalf("a full bucket of 10 allowed %d retries of cost 5, want 2", got)
	}
	if got := retries(epoch.Add(4 * time.Second)); got != 0 {
		t.Fatalf("4 virtual seconds at 1/s allowed %d retries, want 0", got)
	}
	if got := retries(epoch.Add(5 * time.Second)); got != 1 {
		t.Fatalf("5 virtual seconds at 1/s allowed %d retries, want 1", got)
	}
}

func TestStartInvalidPolicy(t *testing.T) {
	t.Parallel()
	r := &retry.Retrier{Policy: retry.Policy{MaxAttempts: -1}}
	var pe *retry.InvalidPolicyError
	if _, err := r.Start(epoch, nil); !errors.As(err, &pe) {
		t.Fatalf("err = %v, want *InvalidPolicyError", err)
	}
}
