package faults_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// Slow but working links are not failures: through a bandwidth limit (64
// KB/s each way) or a slicer (every chunk cut into pieces of 32 to 96
// bytes, 100 µs apart, each way), 8 goroutines' requests for an 8 KB value
// all succeed through holdfast, with no retry and one dial per connection
// the pool made.
func TestSlowButWorking(t *testing.T) {
	if testing.Short() {
		t.Skip("measures seconds of injected latency against wall-clock bounds: skipped with -short")
	}
	t.Parallel()
	dsn, addr := serverAddr(t)
	for _, tc := range []struct {
		name, typ, attrs string
		slowest          time.Duration // at least: the toxic bites
	}{
		{"bandwidth", "bandwidth", `"rate":64`, 100 * time.Millisecond},
		{"slicer", "slicer", `"average_size":64,"size_variation":32,"delay":100`, 20 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newProxy(t, addr)
			p.toxic(t, tc.typ, "upstream", tc.attrs)
			p.toxic(t, tc.typ, "downstream", tc.attrs)
			d := &dialCounter{}
			f, b := newHoldfast(t, testPolicy())
			pool := holdfastPool(t, f, configAt(t, dsn, p.addr, d, "&pool_max_conns=4"))
			const workers, requests = 8, 3
			var mu sync.Mutex
			var slowest time.Duration
			var wg sync.WaitGroup
			began := time.Now()
			for range workers {
				wg.Go(func() {
					for range requests {
						ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
						start := time.Now()
						var v string
						err := pool.QueryRow(ctx, "SELECT repeat('x', 8192)").Scan(&v)
						took := time.Since(start)
						cancel()
						if err != nil || len(v) != 8192 {
							t.Errorf("a request through the %s: %d bytes, %v", tc.name, len(v), err)
							return
						}
						mu.Lock()
						slowest = max(slowest, took)
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			all := time.Since(began)
			made := pool.Stat().NewConnsCount()
			t.Logf("MEASURED %s: %d requests in %v, slowest %v; %d dials for %d connections; %d retries",
				tc.name, workers*requests, all.Round(time.Millisecond), slowest.Round(time.Millisecond), d.dials(), made, b.Retries())
			if n := b.Retries(); n != 0 {
				t.Errorf("%d retries on a slow but working link", n)
			}
			if d.dials() != made {
				t.Errorf("%d dials for %d connections: a dial was repeated", d.dials(), made)
			}
			if slowest < tc.slowest {
				t.Errorf("the slowest request took %v, under %v: the toxic does not bite", slowest, tc.slowest)
			}
		})
	}
}

// A slow but alive server connects: behind a second of latency (a far
// region, a loaded proxy), a handshake needs more than an AttemptTimeout
// of 300 ms, and each retry of an attempt that timed out gets twice the
// time (300, 600, 1200 ms): the third connects. A silent server still
// fails within MaxElapsed. The control, the same policy without the
// doubling (an AttemptTimeout of 300 ms for every attempt, as before),
// never connects.
func TestSlowServerConnects(t *testing.T) {
	if testing.Short() {
		t.Skip("injects seconds of latency and waits out the timeouts: skipped with -short")
	}
	t.Parallel()
	dsn, addr := serverAddr(t)
	policy := testPolicy()
	policy.AttemptTimeout = 300 * time.Millisecond
	policy.MaxElapsed = 5 * time.Second
	for _, tc := range []struct {
		name    string
		latency int // ms, server to client; -1: silent
	}{
		{"1 s latency", 1000},
		{"silent", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newProxy(t, addr)
			if tc.latency >= 0 {
				p.toxic(t, "latency", "downstream", fmt.Sprintf(`"latency":%d`, tc.latency))
			} else {
				p.toxic(t, "timeout", "downstream", `"timeout":0`)
			}
			d := &dialCounter{}
			f, _ := newHoldfast(t, policy)
			pool := holdfastPool(t, f, configAt(t, dsn, p.addr, d, "&pool_max_conns=1"))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			start := time.Now()
			err := pool.Ping(ctx)
			took := time.Since(start)
			t.Logf("MEASURED %s: Ping %v after %v, %d dials", tc.name, err, took.Round(time.Millisecond), d.dials())
			if tc.latency < 0 {
				if err == nil {
					t.Fatal("connected to a silent server")
				}
				if bound := policy.AttemptTimeout + policy.MaxElapsed + time.Second; took > bound {
					t.Errorf("failed after %v, want within MaxElapsed (%v)", took, bound)
				}
				return
			}
			if err != nil {
				t.Fatalf("a slow but alive server did not connect: %v", err)
			}
			if took < time.Second {
				t.Errorf("connected in %v: the latency does not bite", took)
			}
		})
	}
}
