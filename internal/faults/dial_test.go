package faults_test

import (
	"context"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/classify"
)

// ping runs pool.Ping with a safety deadline far beyond every bound the
// tests assert, and returns how long it took and its error.
func ping(pool interface{ Ping(context.Context) error }, deadline time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	began := time.Now()
	err := pool.Ping(ctx)
	return time.Since(began), err
}

// outcome is "ok" (err is nil) or how f classifies err, for MEASURED lines.
func outcome(f *holdfast.Factory, err error) string {
	if err == nil {
		return "ok"
	}
	return f.Classify(err).String()
}

// A refused dial (the proxy is down: nothing listens on its port) is
// retried within the policy: MaxAttempts dials, then a transient error
// within the backoffs; when the listener is back before the second
// attempt, that attempt connects. Control: plain pgxpool fails at the
// first refusal.
func TestRefusedDials(t *testing.T) {
	t.Parallel()
	dsn, addr := serverAddr(t)
	for _, tc := range []struct {
		name      string
		plain     bool
		back      bool  // the listener is back before the second dial
		wantDials int64 // exactly
	}{
		{name: "holdfast, down", wantDials: 3},
		{name: "holdfast, back after the first attempt", back: true, wantDials: 2},
		{name: "control: plain pgxpool, down", plain: true, wantDials: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newProxy(t, addr)
			p.p.Stop() // its port now refuses
			d := &dialCounter{}
			if tc.back {
				d.before = func(n int64) {
					if n == 2 {
						if err := p.p.Start(); err != nil {
							t.Error(err)
						}
					}
				}
			}
			cfg := configAt(t, dsn, p.addr, d, "")
			f, b := newHoldfast(t, testPolicy())
			var err error
			var took time.Duration
			if tc.plain {
				took, err = ping(plainPool(t, cfg), 20*time.Second)
			} else {
				took, err = ping(holdfastPool(t, f, cfg), 20*time.Second)
			}
			t.Logf("MEASURED %s: %d dials, %d retries, %v, %s", tc.name, d.dials(), b.Retries(), took.Round(time.Millisecond), outcome(f, err))
			if got := d.dials(); got != tc.wantDials {
				t.Errorf("dials = %d, want %d", got, tc.wantDials)
			}
			if tc.back {
				if err != nil {
					t.Fatalf("the listener came back before the second attempt, and Ping = %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Ping succeeded against a refused port")
			}
			if v := f.Classify(err); v.Reason != classify.ReasonConnRefused {
				t.Errorf("Classify = %v, want transient/%s", v, classify.ReasonConnRefused)
			}
			within(t, "a refused connect", took, time.Second) // backoffs of 10 and 20 ms
		})
	}
}

// A black-holed connect (TCP accepted, nothing passes: a frozen proxy or
// load balancer) is bounded per attempt by AttemptTimeout: MaxAttempts
// dials of 500 ms each, then a transient timeout; when the black hole
// clears before the second attempt, that attempt connects. Control: plain
// pgxpool holds the caller for its whole deadline (2 s here).
func TestBlackHoledDials(t *testing.T) {
	if testing.Short() {
		t.Skip("measures seconds of real attempt timeouts against wall-clock bounds: skipped with -short")
	}
	t.Parallel()
	dsn, addr := serverAddr(t)
	for _, tc := range []struct {
		name      string
		plain     bool
		clears    bool
		wantDials int64
	}{
		{name: "holdfast, black hole", wantDials: 3},
		{name: "holdfast, clears after the first attempt", clears: true, wantDials: 2},
		{name: "control: plain pgxpool, black hole", plain: true, wantDials: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newProxy(t, addr)
			p.freeze(t)
			d := &dialCounter{}
			if tc.clears {
				d.before = func(n int64) {
					if n == 2 {
						p.clear()
					}
				}
			}
			cfg := configAt(t, dsn, p.addr, d, "")
			f, b := newHoldfast(t, testPolicy())
			var err error
			var took time.Duration
			if tc.plain {
				took, err = ping(plainPool(t, cfg), 2*time.Second)
			} else {
				took, err = ping(holdfastPool(t, f, cfg), 20*time.Second)
			}
			t.Logf("MEASURED %s: %d dials, %d retries, %v, %s", tc.name, d.dials(), b.Retries(), took.Round(time.Millisecond), outcome(f, err))
			if got := d.dials(); got != tc.wantDials {
				t.Errorf("dials = %d, want %d", got, tc.wantDials)
			}
			switch {
			case tc.clears:
				if err != nil {
					t.Fatalf("the black hole cleared before the second attempt, and Ping = %v", err)
				}
				within(t, "a connect whose first attempt was black-holed", took, 2*time.Second)
			case tc.plain:
				if err == nil || took < 1900*time.Millisecond {
					t.Errorf("control: Ping = %v after %v, want the caller held for its whole 2 s deadline", err, took)
				}
			default:
				if err == nil {
					t.Fatal("Ping succeeded through a black hole")
				}
				if v := f.Classify(err); v.Reason != classify.ReasonTimeout {
					t.Errorf("Classify = %v, want transient/%s", v, classify.ReasonTimeout)
				}
				if took < 3400*time.Millisecond {
					t.Errorf("returned after %v, before 3 attempts of 500, 1000 and 2000 ms", took)
				}
				within(t, "a black-holed connect", took, 4500*time.Millisecond) // 500 + 1000 + 2000 ms (each timed-out attempt doubles the next one's bound) + 30 ms of backoff
			}
		})
	}
}

// A slow connect (300 ms of latency on every reply) under AttemptTimeout
// (1 s) succeeds with one dial and no retry (Ping: 300 ms of handshake,
// 300 ms of ping). Over it (AttemptTimeout 200 ms), the first attempt
// times out and the retry gets twice the time (400 ms): it connects, with
// two dials, where plain pgxpool, with no per-attempt bound, connects in
// 300 ms with one. (Before the doubling, every attempt timed out.)
func TestSlowDials(t *testing.T) {
	if testing.Short() {
		t.Skip("measures seconds of real attempt timeouts against wall-clock bounds: skipped with -short")
	}
	t.Parallel()
	dsn, addr := serverAddr(t)
	for _, tc := range []struct {
		name      string
		plain     bool
		attempt   time.Duration // AttemptTimeout
		wantOK    bool
		wantDials int64
	}{
		{name: "holdfast, under AttemptTimeout", attempt: time.Second, wantOK: true, wantDials: 1},
		{name: "holdfast, over AttemptTimeout", attempt: 200 * time.Millisecond, wantOK: true, wantDials: 2},
		{name: "control: plain pgxpool", plain: true, wantOK: true, wantDials: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newProxy(t, addr)
			p.toxic(t, "latency", "downstream", `"latency":300`)
			d := &dialCounter{}
			cfg := configAt(t, dsn, p.addr, d, "")
			policy := testPolicy()
			policy.AttemptTimeout = tc.attempt
			f, b := newHoldfast(t, policy)
			var err error
			var took time.Duration
			if tc.plain {
				took, err = ping(plainPool(t, cfg), 20*time.Second)
			} else {
				took, err = ping(holdfastPool(t, f, cfg), 20*time.Second)
			}
			t.Logf("MEASURED %s: %d dials, %d retries, %v, %s", tc.name, d.dials(), b.Retries(), took.Round(time.Millisecond), outcome(f, err))
			if got := d.dials(); got != tc.wantDials {
				t.Errorf("dials = %d, want %d", got, tc.wantDials)
			}
			if (err == nil) != tc.wantOK {
				t.Fatalf("Ping = %v, want success %v", err, tc.wantOK)
			}
			if tc.wantOK {
				if n := b.Retries(); n != tc.wantDials-1 && !tc.plain {
					t.Errorf("%d retries of a slow but working connect, want %d", n, tc.wantDials-1)
				}
				if took < 300*time.Millisecond {
					t.Errorf("connected in %v, under the toxic's 300 ms: the fault does not bite", took)
				}
				within(t, "a slow connect and a ping", took, 2*time.Second)
			}
		})
	}
}
