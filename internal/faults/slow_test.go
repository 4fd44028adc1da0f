package faults_test

import (
	"context"
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
