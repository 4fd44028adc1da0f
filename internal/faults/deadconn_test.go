package faults_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/retry"
)

// recovery runs workers issuing SELECT 1 (1 s each at most) through pool,
// then, once every worker has succeeded, silently drops every established
// connection (the proxy they go through stops passing data, closing
// nothing) while new connections reach the server by another route (a
// failover, a NAT or load-balancer idle timeout: the old connections are
// dead, the database is fine). It returns how long after the drop the
// first request succeeded again.
func recovery(t *testing.T, pool *pgxpool.Pool, drop func()) time.Duration {
	t.Helper()
	const workers = 8
	var dropped atomic.Int64 // unix nanos of the drop, 0 before
	var firstOK atomic.Int64 // unix nanos of the first success after the drop
	var warm sync.WaitGroup
	warm.Add(workers)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			warmed := false
			for i := 0; i < 2000; i++ { // bounded: 2000 requests of at most 1 s
				select {
				case <-stop:
					return
				default:
				}
				began := time.Now().UnixNano()
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				var one int
				err := pool.QueryRow(ctx, "SELECT 1").Scan(&one)
				cancel()
				if err == nil {
					if !warmed {
						warmed = true
						warm.Done()
					}
					if d := dropped.Load(); d != 0 && began > d {
						// A request that began after the drop was in place.
						firstOK.CompareAndSwap(0, time.Now().UnixNano())
					}
				} else if dropped.Load() == 0 {
					t.Errorf("worker %d failed before the drop: %v", w, err)
				}
			}
		})
	}
	warm.Wait()
	drop()
	dropped.Store(time.Now().UnixNano())
	deadline := time.Now().Add(30 * time.Second)
	for firstOK.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // polling a measured condition, bounded
	}
	close(stop)
	wg.Wait()
	if firstOK.Load() == 0 {
		return 30 * time.Second
	}
	return time.Duration(firstOK.Load() - dropped.Load())
}

// idleRecovery warms pool's 4 connections, lets them sit idle, silently
// drops them while idle (drop: the proxy they go through stops passing
// data, closing nothing, and new connections reach the server by another
// route), waits idle more, then starts 8 workers issuing SELECT 1 (1 s
// each at most). It returns how long after the requests arrived the first
// one succeeded: half-open connections found at the next request, after
// the pool sat idle (pgxpool pings a connection idle over 1 s before
// handing it out).
func idleRecovery(t *testing.T, pool *pgxpool.Pool, drop func(), idle time.Duration) time.Duration {
	t.Helper()
	const conns, workers = 4, 8
	var warm sync.WaitGroup
	for range conns {
		warm.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if _, err := pool.Exec(ctx, "SELECT pg_sleep(0.1)"); err != nil {
				t.Errorf("warming up: %v", err)
			}
		})
	}
	warm.Wait()
	if n := pool.Stat().IdleConns(); n != conns {
		t.Errorf("%d idle connections after warming up, want %d", n, conns)
	}
	time.Sleep(idle / 2)
	drop()
	time.Sleep(idle / 2)
	arrived := time.Now()
	var firstOK atomic.Int64 // unix nanos
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range 100 { // bounded: 100 requests of at most 1 s
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				var one int
				err := pool.QueryRow(ctx, "SELECT 1").Scan(&one)
				cancel()
				if err == nil {
					firstOK.CompareAndSwap(0, time.Now().UnixNano())
					return
				}
			}
		})
	}
	deadline := arrived.Add(30 * time.Second)
	for firstOK.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // polling a measured condition, bounded
	}
	close(stop)
	wg.Wait()
	if firstOK.Load() == 0 {
		return 30 * time.Second
	}
	return time.Duration(firstOK.Load() - arrived.UnixNano())
}

// compareDrop measures, with measure, how long holdfast and plain pgxpool
// (the control) take to serve again after a silent drop of their
// connections, and checks that holdfast takes at most 3 s and the control
// the long way (pgx drains a dead connection for up to 15 s while the pool
// keeps its slot).
func compareDrop(t *testing.T, what string, measure func(t *testing.T, pool *pgxpool.Pool, drop func()) time.Duration) {
	t.Helper()
	dsn, addr := serverAddr(t)
	got := map[string]time.Duration{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, client := range []string{"holdfast", "pgxpool"} {
		wg.Go(func() {
			old, fresh := newProxy(t, addr), newProxy(t, addr)
			var route atomic.Value
			route.Store(old.addr)
			cfg := routedConfig(t, dsn, func() string { return route.Load().(string) }, "&pool_max_conns=4")
			var pool *pgxpool.Pool
			if client == "holdfast" {
				p := retry.Default()
				p.InitialInterval = 10 * time.Millisecond
				f, err := holdfast.New(holdfast.WithRetryPolicy(p), holdfast.WithRetryBudget(nil))
				if err != nil {
					t.Error(err)
					return
				}
				if pool, err = f.NewPool(context.Background(), cfg); err != nil {
					t.Error(err)
					return
				}
			} else {
				var err error
				if pool, err = pgxpool.NewWithConfig(context.Background(), cfg); err != nil {
					t.Error(err)
					return
				}
			}
			defer pool.Close()
			d := measure(t, pool, func() {
				old.freeze(t)
				route.Store(fresh.addr)
			})
			t.Logf("MEASURED %s: first success %v after %s", client, d.Round(time.Millisecond), what)
			mu.Lock()
			got[client] = d
			mu.Unlock()
		})
	}
	wg.Wait()
	if d := got["holdfast"]; d > 3*time.Second {
		t.Errorf("holdfast: first success %v after %s, want within 3 s", d, what)
	}
	if d := got["pgxpool"]; d < 8*time.Second {
		t.Errorf("control: plain pgxpool recovered in %v; the fault does not bite (expected ~16 s)", d)
	}
}

// Connections silently dropped by the network are found and replaced within
// seconds: requests succeed again within 3 s of the drop through holdfast,
// where plain pgxpool (the control) keeps each dead connection's slot while
// pgx drains it for up to 15 s.
func TestSilentDropRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a silently dropped connection's timeout: skipped with -short")
	}
	t.Parallel()
	compareDrop(t, "the silent drop", recovery)
}

// Idle connections that die while the pool is idle (half-open: the peer
// vanished without a FIN or RST) are found when requests arrive: the first
// request succeeds within 3 s of their arrival through holdfast (about
// 1.1 s: pgxpool's pings of the dead connections run until the requests'
// 1 s deadline, then each closes at once, without a cancel request, and
// the next requests connect anew), where plain pgxpool (the control) takes
// the long way.
func TestIdleHalfOpenRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a half-open connection's keepalive timeout: skipped with -short")
	}
	t.Parallel()
	compareDrop(t, "the requests arrived", func(t *testing.T, pool *pgxpool.Pool, drop func()) time.Duration {
		return idleRecovery(t, pool, drop, 1500*time.Millisecond)
	})
}
