package admit

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// At most InFlight holders at once, whatever the number of goroutines,
// and every one of them is admitted in the end.
func TestLimiterBoundsHolders(t *testing.T) {
	for _, tc := range []struct {
		name       string
		inFlight   int
		goroutines int
	}{
		{"one slot", 1, 50},
		{"four slots", 4, 200},
		{"more slots than callers", 64, 10},
		{"zero means one", 0, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := New(tc.inFlight, 0, 0)
			var in, peak, done atomic.Int64
			var wg sync.WaitGroup
			for range tc.goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := l.Acquire(context.Background(), time.Now().Add(10*time.Second)); err != nil {
						t.Error(err)
						return
					}
					n := in.Add(1)
					for {
						p := peak.Load()
						if n <= p || peak.CompareAndSwap(p, n) {
							break
						}
					}
					time.Sleep(100 * time.Microsecond)
					in.Add(-1)
					l.Release()
					done.Add(1)
				}()
			}
			wg.Wait()
			if want := int64(max(tc.inFlight, 1)); peak.Load() > want {
				t.Errorf("peak holders %d > %d", peak.Load(), want)
			}
			if done.Load() != int64(tc.goroutines) {
				t.Errorf("%d of %d admitted", done.Load(), tc.goroutines)
			}
			if h := l.Holders(); h != 0 {
				t.Errorf("%d slots still held", h)
			}
		})
	}
}

func TestLimiterTryAcquire(t *testing.T) {
	l := New(2, 0, 0)
	steps := []struct {
		op   string
		want bool
	}{{"try", true}, {"try", true}, {"try", false}, {"release", true}, {"try", true}, {"try", false}}
	for i, s := range steps {
		switch s.op {
		case "try":
			if got := l.TryAcquire(); got != s.want {
				t.Fatalf("step %d: TryAcquire = %v, want %v", i, got, s.want)
			}
		case "release":
			l.Release()
		}
	}
	var nilL *Limiter
	if !nilL.TryAcquire() || nilL.Acquire(context.Background(), time.Time{}) != nil {
		t.Error("a nil Limiter must admit everything")
	}
	nilL.Release()
}

// A connect waiting for a slot leaves at its context's end or deadline,
// holding nothing, and the slot it would have had goes to the next one.
func TestLimiterWaitEnds(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cancel   bool
		deadline time.Duration
		want     error
	}{
		{"canceled while queued", true, 0, context.Canceled},
		{"deadline while queued", false, 30 * time.Millisecond, ErrTimeout},
		{"deadline already passed", false, -time.Millisecond, ErrTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := New(1, 0, 0)
			if !l.TryAcquire() {
				t.Fatal("first slot")
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var dl time.Time
			if tc.deadline != 0 {
				dl = time.Now().Add(tc.deadline)
			}
			errc := make(chan error, 1)
			go func() { errc <- l.Acquire(ctx, dl) }()
			if tc.cancel {
				time.Sleep(20 * time.Millisecond)
				cancel()
			}
			start := time.Now()
			select {
			case err := <-errc:
				if !errors.Is(err, tc.want) {
					t.Errorf("Acquire = %v, want %v", err, tc.want)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Acquire did not return")
			}
			if took := time.Since(start); took > time.Second {
				t.Errorf("returned after %v", took)
			}
			if h := l.Holders(); h != 1 {
				t.Errorf("holders %d after a failed wait, want 1", h)
			}
			// The next waiter gets the slot when it is released.
			got := make(chan error, 1)
			go func() { got <- l.Acquire(context.Background(), time.Now().Add(5*time.Second)) }()
			time.Sleep(10 * time.Millisecond)
			l.Release()
			if err := <-got; err != nil {
				t.Errorf("next waiter: %v", err)
			}
			l.Release()
			if h := l.Holders(); h != 0 {
				t.Errorf("holders %d at the end", h)
			}
		})
	}
}

// Many waiters that give up while others release never lose a slot.
func TestLimiterChurn(t *testing.T) {
	l := New(3, 0, 0)
	var wg sync.WaitGroup
	for i := range 300 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%7)*time.Millisecond)
			defer cancel()
			if err := l.Acquire(ctx, time.Time{}); err == nil {
				time.Sleep(time.Duration(i%3) * time.Millisecond)
				l.Release()
			}
		}()
	}
	wg.Wait()
	if h := l.Holders(); h != 0 {
		t.Fatalf("holders %d after churn", h)
	}
	for range 3 {
		if !l.TryAcquire() {
			t.Fatal("a slot was lost")
		}
	}
}

func TestLimiterFastPathAllocs(t *testing.T) {
	l := New(4, 0, 0)
	if n := testing.AllocsPerRun(1000, func() {
		if !l.TryAcquire() {
			t.Fatal("no slot")
		}
		l.Release()
	}); n != 0 {
		t.Errorf("fast path allocates %v", n)
	}
	ctx := context.Background()
	if n := testing.AllocsPerRun(1000, func() {
		_ = l.Acquire(ctx, time.Time{})
		l.Release()
	}); n != 0 {
		t.Errorf("Acquire without waiting allocates %v", n)
	}
}

// The bucket on a clock of its own: burst tokens at once, then one per
// interval; Reserve refuses a token beyond its limit without taking it.
func TestBucketReserve(t *testing.T) {
	const sec = int64(time.Second)
	for _, tc := range []struct {
		name      string
		rate      float64
		burst     int
		at        []int64 // times of the reservations
		limit     int64   // relative to each time; 0: none
		wantWaits []time.Duration
		wantOK    []bool
	}{
		{"burst 1 at 10/s", 10, 1, []int64{sec, sec, sec}, 0,
			[]time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond}, []bool{true, true, true}},
		{"burst 3 at 10/s", 10, 3, []int64{sec, sec, sec, sec}, 0,
			[]time.Duration{0, 0, 0, 100 * time.Millisecond}, []bool{true, true, true, true}},
		{"refills over time", 2, 1, []int64{sec, sec + sec/2, 2 * sec}, 0,
			[]time.Duration{0, 0, 0}, []bool{true, true, true}},
		{"limit refuses without taking", 1, 1, []int64{sec, sec, sec}, sec / 2,
			[]time.Duration{0, 0, 0}, []bool{true, false, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBucket(tc.rate, tc.burst)
			for i, at := range tc.at {
				limit := int64(0)
				if tc.limit != 0 {
					limit = at + tc.limit
				}
				w, ok := b.Reserve(at, limit)
				if w != tc.wantWaits[i] || ok != tc.wantOK[i] {
					t.Errorf("reservation %d at %v: (%v, %v), want (%v, %v)", i, time.Duration(at), w, ok, tc.wantWaits[i], tc.wantOK[i])
				}
			}
		})
	}
	b := NewBucket(1, 1)
	if _, ok := b.Reserve(sec, 0); !ok {
		t.Fatal("first token")
	}
	b.Reserve(sec, 0) // usable at 2 s
	b.Unreserve()
	if w, _ := b.Reserve(sec, 0); w != time.Second {
		t.Errorf("after Unreserve the next token waits %v, want 1s", w)
	}
}

func TestLimiterRate(t *testing.T) {
	l := New(10, 20, 1) // 20/s: one every 50 ms
	ctx := context.Background()
	start := time.Now()
	for range 5 {
		if err := l.Acquire(ctx, time.Now().Add(5*time.Second)); err != nil {
			t.Fatal(err)
		}
		l.Release()
	}
	if took := time.Since(start); took < 90*time.Millisecond || took > 2*time.Second {
		t.Errorf("5 connects at 20/s took %v, want about 200 ms (4 intervals of 25 to 75 ms)", took)
	}
	// A token that comes after the deadline is not waited for.
	if err := l.Acquire(ctx, time.Now().Add(time.Millisecond)); !errors.Is(err, ErrTimeout) {
		t.Errorf("Acquire = %v, want ErrTimeout", err)
	}
	if h := l.Holders(); h != 0 {
		t.Errorf("holders %d", h)
	}
}
