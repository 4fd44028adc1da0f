package conn

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestCredCacheSingleFlight: N concurrent gets while the call is in flight
// make one call of the function, and all get its answer.
func TestCredCacheSingleFlight(t *testing.T) {
	release := make(chan struct{})
	var calls atomic.Int32
	cc := newCredCache(testConnector(), func(ctx context.Context, host string) (Credentials, error) {
		calls.Add(1)
		select {
		case <-release:
		case <-ctx.Done():
			return Credentials{}, ctx.Err()
		}
		return Credentials{User: "u", Password: "pw-1", TTL: time.Hour}, nil
	})
	const n = 32
	var wg sync.WaitGroup
	errs := make(chan error, n)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range n {
		wg.Go(func() {
			cr, err := cc.get(ctx, "db")
			if err == nil && (cr.User != "u" || cr.Password != "pw-1") {
				err = errors.New("wrong credentials for user " + cr.User)
			}
			errs <- err
		})
	}
	// Let every goroutine reach the wait before the answer comes.
	deadline := time.Now().Add(5 * time.Second)
	for calls.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := calls.Load(); got != 1 {
		t.Fatalf("%d concurrent gets made %d calls, want 1", n, got)
	}
	// Cached: no call.
	for range 10 {
		if _, err := cc.get(ctx, "db"); err != nil {
			t.Fatal(err)
		}
	}
	if got := calls.Load(); got != 1 {
		t.Fatalf("cached gets made %d calls in all, want 1", got)
	}
}

// TestCredCacheWaitBounded: a get that waits for a call in flight (one
// whose function ignores its context) returns when its own context ends.
func TestCredCacheWaitBounded(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{})
	cc := newCredCache(testConnector(), func(ctx context.Context, host string) (Credentials, error) {
		close(started)
		<-release // ignores ctx: a misbehaving source
		return Credentials{Password: "pw-1"}, nil
	})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(release)
	wg.Go(func() { _, _ = cc.get(context.Background(), "db") })
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := cc.get(ctx, "db")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the waiter's deadline", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("the wait took %s past its 100ms context", took)
	}
}

// TestCredCacheRefused: refused credentials are never served again; the
// forced call is told which were refused; a TTL of 0 caches nothing.
func TestCredCacheRefused(t *testing.T) {
	var calls atomic.Int32
	var told []Credentials
	var mu sync.Mutex
	ttl := time.Hour
	cc := newCredCache(testConnector(), func(ctx context.Context, host string) (Credentials, error) {
		n := calls.Add(1)
		if r, ok := Refused(ctx); ok {
			mu.Lock()
			told = append(told, r)
			mu.Unlock()
		}
		pw := "pw-old"
		if n > 1 {
			pw = "pw-new"
		}
		return Credentials{User: "app", Password: pw, TTL: ttl}, nil
	})
	ctx := context.Background()
	cr, _ := cc.get(ctx, "db")
	if cr.Password != "pw-old" {
		t.Fatalf("first: %v", cr)
	}
	cc.refuse("app", "pw-old")
	cc.refuse("app", "pw-old") // a second refusal of the same: still one call
	cr, _ = cc.get(ctx, "db")
	if cr.Password != "pw-new" || calls.Load() != 2 {
		t.Fatalf("after the refusal: %v, %d calls", cr, calls.Load())
	}
	if len(told) != 1 || told[0].Password != "pw-old" || told[0].User != "app" {
		t.Fatalf("RefusedCredentials told %v", told)
	}
	cc.refuse("app", "pw-old") // stale refusal: the cache holds pw-new
	if cr, _ = cc.get(ctx, "db"); cr.Password != "pw-new" || calls.Load() != 2 {
		t.Fatalf("a stale refusal dropped the new credentials: %v, %d calls", cr, calls.Load())
	}

	ttl = 0
	cc2 := newCredCache(testConnector(), cc.fn)
	before := calls.Load()
	for range 3 {
		_, _ = cc2.get(ctx, "db")
	}
	if got := calls.Load() - before; got != 3 {
		t.Fatalf("TTL 0: %d calls for 3 gets, want 3", got)
	}
}

// TestCredCacheAbandonedLeader: when the caller whose call was in flight
// gives up (its context ends), a waiter calls again instead of taking the
// other's deadline as its own failure.
func TestCredCacheAbandonedLeader(t *testing.T) {
	var calls atomic.Int32
	entered := make(chan struct{}, 2)
	cc := newCredCache(testConnector(), func(ctx context.Context, host string) (Credentials, error) {
		n := calls.Add(1)
		entered <- struct{}{}
		if n == 1 {
			<-ctx.Done()
			return Credentials{}, ctx.Err()
		}
		return Credentials{Password: "pw-1", TTL: time.Hour}, nil
	})
	lctx, lcancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = cc.get(lctx, "db") })
	<-entered
	res := make(chan error, 1)
	wg.Go(func() {
		_, err := cc.get(context.Background(), "db")
		res <- err
	})
	time.Sleep(20 * time.Millisecond)
	lcancel()
	wg.Wait()
	if err := <-res; err != nil {
		t.Fatalf("the waiter failed with the leader's cancellation: %v", err)
	}
	if calls.Load() != 2 {
		t.Fatalf("%d calls, want 2", calls.Load())
	}
}

// TestCredCachePanic: a panicking function fails its callers with a
// *panicError (Fatal "panic"), and the next get calls again.
func TestCredCachePanic(t *testing.T) {
	var calls atomic.Int32
	cc := newCredCache(testConnector(), func(ctx context.Context, host string) (Credentials, error) {
		if calls.Add(1) == 1 {
			panic("boom")
		}
		return Credentials{Password: "pw-1", TTL: time.Hour}, nil
	})
	_, err := cc.get(context.Background(), "db")
	var pe *panicError
	if !errors.As(err, &pe) || pe.value != "boom" {
		t.Fatalf("err = %v, want the panic's error", err)
	}
	if cr, err := cc.get(context.Background(), "db"); err != nil || cr.Password != "pw-1" {
		t.Fatalf("after the panic: %v %v", cr, err)
	}
}

// testConnector is a connector with no telemetry.
func testConnector() *connector { return &connector{} }
