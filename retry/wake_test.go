package retry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/internal/pause"
	"github.com/holdfast-db/holdfast/retry"
)

// TestWakeEndsTheSleep: a wake in ctx (holdfast's transaction runner puts
// a failover monitor's Changed there) ends a backoff's sleep, the next
// attempt made at once; without it the same loop sleeps its step.
func TestWakeEndsTheSleep(t *testing.T) {
	blip := errors.New("blip")
	r := &retry.Retrier{
		Policy:   retry.Policy{MaxAttempts: 2, InitialInterval: time.Hour, Multiplier: 1, MaxInterval: time.Hour, MaxElapsed: 2 * time.Hour},
		Classify: func(error) classify.Verdict { return classify.Verdict{Class: classify.Transient, Reason: "blip"} },
	}
	woken := make(chan struct{})
	calls := 0
	ctx := pause.WithWake(context.Background(), func() <-chan struct{} { calls++; return woken })
	attempts := 0
	done := make(chan error, 1)
	go func() {
		done <- r.Do(ctx, func(context.Context) error {
			attempts++
			if attempts == 1 {
				close(woken) // the monitor's change, while the first attempt fails
				return blip
			}
			return nil
		})
	}()
	select {
	case err := <-done:
		if err != nil || attempts != 2 || calls != 1 {
			t.Fatalf("Do: %v after %d attempts, wake read %d times; want nil after 2, once", err, attempts, calls)
		}
	case <-time.After(time.Minute):
		t.Fatal("the wake did not end the hour's sleep")
	}

	// The control: no wake, the sleep is the step's (ended by ctx here).
	cctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	attempts = 0
	err := r.Do(cctx, func(context.Context) error { attempts++; return blip })
	if attempts != 1 || err == nil {
		t.Fatalf("without a wake: %d attempts, %v; want 1 and the context's stop", attempts, err)
	}
}
