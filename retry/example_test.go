package retry_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/retry"
)

func ExampleRetrier_Do() {
	errBlip := errors.New("token API returned 503")
	r := &retry.Retrier{
		Policy: retry.Policy{MaxAttempts: 3, InitialInterval: time.Millisecond, Multiplier: 2, MaxInterval: 10 * time.Millisecond},
		Classify: func(err error) classify.Verdict {
			if errors.Is(err, errBlip) {
				return classify.Verdict{Class: classify.Transient, Reason: "token-fetch-503"}
			}
			return classify.Classify(err)
		},
		OnRetry: func(_ context.Context, e retry.Event) {
			fmt.Printf("attempt %d failed (%s), retrying\n", e.Attempt, e.Verdict.Reason)
		},
	}
	attempts := 0
	err := r.Do(context.Background(), func(context.Context) error {
		attempts++
		if attempts == 1 {
			return errBlip
		}
		return nil
	})
	fmt.Println("err:", err, "attempts:", attempts)
	// Output:
	// attempt 1 failed (token-fetch-503), retrying
	// err: <nil> attempts: 2
}

func ExampleBudget() {
	b, _ := retry.NewBudget(retry.BudgetConfig{Capacity: 2, RetryCost: 1})
	r := &retry.Retrier{
		Policy:   retry.Policy{MaxAttempts: 3, InitialInterval: time.Microsecond, Multiplier: 1, MaxInterval: time.Microsecond},
		Classify: func(error) classify.Verdict { return classify.Verdict{Class: classify.Transient, Reason: "outage"} },
		Budget:   b,
	}
	for i := range 3 {
		err := r.Do(context.Background(), func(context.Context) error { return errors.New("down") })
		var re *retry.Error
		errors.As(err, &re)
		fmt.Printf("request %d: %d attempts, %s\n", i+1, re.Attempts, re.Stop)
	}
	// Output:
	// request 1: 3 attempts, attempts exhausted
	// request 2: 1 attempts, retry budget exhausted
	// request 3: 1 attempts, retry budget exhausted
}

// The budget relative to demand: a lone failure is retried at once, and
// one request keeps its three attempts; then every failed attempt, first
// ones included, keeps the bucket at or below its threshold, so further
// requests make one attempt each until successes and time refill it.
func ExampleDemandBudget() {
	b, _ := retry.NewBudget(retry.DemandBudget())
	r := &retry.Retrier{
		Policy:   retry.Policy{MaxAttempts: 3, InitialInterval: time.Microsecond, Multiplier: 1, MaxInterval: time.Microsecond},
		Classify: func(error) classify.Verdict { return classify.Verdict{Class: classify.Transient, Reason: "outage"} },
		Budget:   b,
	}
	blip := 0
	err := r.Do(context.Background(), func(context.Context) error {
		if blip++; blip == 1 {
			return errors.New("token API returned 503")
		}
		return nil
	})
	fmt.Printf("a lone 503: %d attempts, err %v\n", blip, err)
	b, _ = retry.NewBudget(retry.DemandBudget()) // a healthy pool's full bucket
	r.Budget = b
	for i := range 4 {
		err := r.Do(context.Background(), func(context.Context) error { return errors.New("down") })
		var re *retry.Error
		errors.As(err, &re)
		fmt.Printf("outage, request %d: %d attempts, %s (%.0f tokens left)\n", i+1, re.Attempts, re.Stop, b.Available())
	}
	// Output:
	// a lone 503: 2 attempts, err <nil>
	// outage, request 1: 3 attempts, attempts exhausted (2 tokens left)
	// outage, request 2: 1 attempts, retry budget exhausted (1 tokens left)
	// outage, request 3: 1 attempts, retry budget exhausted (0 tokens left)
	// outage, request 4: 1 attempts, retry budget exhausted (0 tokens left)
}

// A Loop stepped on a virtual clock, as an event loop or a simulation
// steps it: no goroutine sleeps, and a seeded source makes the jitter
// repeatable.
func ExampleRetrier_Start() {
	r := &retry.Retrier{
		Classify: func(error) classify.Verdict { return classify.Verdict{Class: classify.Transient, Reason: "outage"} },
	}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	l, _ := r.Start(now, rand.New(rand.NewPCG(1, 2)))
	for {
		now = now.Add(5 * time.Millisecond) // an attempt that fails fast
		delay, again := l.Next(context.Background(), now, errors.New("connection refused"))
		if !again {
			break
		}
		fmt.Printf("retry in %v\n", delay.Round(time.Millisecond))
		now = now.Add(delay)
	}
	fmt.Println(l.Err())
	// Output:
	// retry in 107ms
	// retry in 197ms
	// retry: gave up after 3 attempts (attempts exhausted; transient outage): connection refused
}
