package holdfast_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/retry"
)

// silentServer accepts TCP connections and never answers, like a frozen
// postmaster (SIGSTOP) or a proxy whose backend is gone. It counts the
// connections it accepted.
func silentServer(t *testing.T) (addr string, accepted *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted = &atomic.Int64{}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String(), accepted
}

func boundedPolicy() retry.Policy {
	return retry.Policy{MaxAttempts: 3, InitialInterval: 10 * time.Millisecond, Multiplier: 2, MaxInterval: 50 * time.Millisecond,
		AttemptTimeout: 300 * time.Millisecond, MaxElapsed: 3 * time.Second}
}

// A server that accepts TCP and never answers holds a caller no longer than
// the policy: each attempt (dial, TLS, startup handshake) is bounded by
// AttemptTimeout, doubled after each attempt that timed out (so that a slow
// but alive server connects: TestSlowServerConnects in internal/faults),
// and retried; the loop is bounded by MaxAttempts and MaxElapsed. The
// control, plain pgxpool, holds the caller for its whole deadline.
func TestHungServerIsBoundedByThePolicy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, through := range []string{"Factory.Acquire", "pool.Ping", "NewPool", "control: plain pgxpool"} {
		t.Run(through, func(t *testing.T) {
			t.Parallel()
			addr, accepted := silentServer(t)
			cfg, err := pgxpool.ParseConfig("postgres://u@" + addr + "/db?sslmode=disable")
			if err != nil {
				t.Fatal(err)
			}
			f := newFactory(t, holdfast.WithRetryPolicy(boundedPolicy()), holdfast.WithStartupPolicy(boundedPolicy()))
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			start := time.Now()
			switch through {
			case "Factory.Acquire", "pool.Ping":
				pool := newPool(t, f, cfg)
				if through == "pool.Ping" {
					err = pool.Ping(cctx)
				} else {
					_, err = f.Acquire(cctx, pool)
				}
			case "NewPool":
				var pool *pgxpool.Pool
				pool, err = f.NewPool(cctx, cfg)
				if pool != nil {
					pool.Close()
				}
			default:
				cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				defer cancel()
				pool, perr := pgxpool.NewWithConfig(ctx, cfg)
				if perr != nil {
					t.Fatal(perr)
				}
				defer pool.Close()
				err = pool.Ping(cctx)
			}
			took := time.Since(start)
			t.Logf("MEASURED %s: %v after %v, %d connections accepted", through, err, took.Round(time.Millisecond), accepted.Load())
			if err == nil {
				t.Fatal("succeeded against a silent server")
			}
			if through == "control: plain pgxpool" {
				if took < 1900*time.Millisecond {
					t.Errorf("plain pgxpool returned after %v, before its caller's 2s deadline: the fault does not bite", took)
				}
				return
			}
			// Attempts of 300, 600 and 1200 ms plus backoffs (2.1 s), within
			// MaxElapsed (3 s) from the first dial; NewPool's startup loop
			// retries within its own MaxElapsed from its call, the first
			// connection included (TestIssue30EveryBoundHolds). Generous
			// for a loaded machine.
			p := boundedPolicy()
			bound := p.MaxElapsed + 500*time.Millisecond
			if took > bound {
				t.Errorf("returned after %v, want within %v (AttemptTimeout doubling, within MaxElapsed)", took, bound)
			}
			if n := accepted.Load(); n < 2 {
				t.Errorf("%d connections accepted, want the hung attempt retried", n)
			}
			if v := f.Classify(err); !v.Retryable() {
				t.Errorf("Classify = %v, want transient (the server may come back)", v)
			}
		})
	}
}

// A hung password fetch (a token endpoint that never answers) is bounded
// by AttemptTimeout: the connect fails within the policy, and once the
// endpoint recovers the pool serves again (the slot was not wedged).
func TestHungPasswordFetchIsBounded(t *testing.T) {
	t.Parallel()
	cfg, _ := poolConfig(t, pgtest.DSN(t), "sslmode=disable", "pool_max_conns=2")
	var hung atomic.Bool
	hung.Store(true)
	var calls atomic.Int64
	f := newFactory(t, holdfast.WithRetryPolicy(boundedPolicy()),
		holdfast.WithPasswordFunc(func(ctx context.Context, _ string) (string, error) {
			calls.Add(1)
			if hung.Load() {
				<-ctx.Done() // never answers; only the bound ends it
				return "", ctx.Err()
			}
			return "", nil
		}))
	pool := newPool(t, f, cfg)
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 2 { // both slots
		wg.Go(func() {
			start := time.Now()
			err := pool.Ping(ctx)
			if err == nil {
				t.Error("Ping succeeded through a hung token endpoint")
			}
			if took := time.Since(start); took > 2500*time.Millisecond {
				t.Errorf("a hung token fetch held the caller %v", took)
			}
			if v := f.Classify(err); v.Reason != classify.ReasonTimeout {
				t.Errorf("Classify = %v, want transient/timeout", v)
			}
		})
	}
	wg.Wait()
	hung.Store(false)
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		t.Fatalf("after the token endpoint recovered: %v (a slot is still wedged)", err)
	}
	if s := pool.Stat(); s.TotalConns() != 1 {
		t.Errorf("connections = %d, want 1", s.TotalConns())
	}
	if errors.Is(pctx.Err(), context.DeadlineExceeded) {
		t.Error("recovered only at the deadline")
	}
}
