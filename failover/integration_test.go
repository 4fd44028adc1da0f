package failover_test

import (
	"context"
	"errors"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/fakes/failovertest"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/retry"
)

// startCluster starts a simulated cluster, or skips when PostgreSQL is not
// installed (never with HOLDFAST_REQUIRE_PG=1).
func startCluster(t *testing.T, cfg failovertest.Config) *failovertest.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := failovertest.Start(ctx, cfg)
	if errors.Is(err, failovertest.ErrNotFound) && os.Getenv(pgtest.EnvRequire) != "1" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// writer is a workload: workers inserting ids through exec, each write
// retried whole, as an application would, on a retryable error.
type writer struct {
	name     string
	next     *atomic.Int64
	mu       sync.Mutex
	acked    []int64
	failed   int
	errs     map[string]int
	lastAck  time.Time
	maxPause time.Duration
}

func (w *writer) run(ctx context.Context, exec func(context.Context, int64) error, workers int) *sync.WaitGroup {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				id := w.next.Add(1)
				start := time.Now()
				wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				err := exec(wctx, id)
				cancel()
				if ctx.Err() != nil {
					return
				}
				w.mu.Lock()
				if d := time.Since(start); d > w.maxPause {
					w.maxPause = d
				}
				if err != nil {
					w.failed++
					w.errs[errKey(err)]++
				} else {
					w.acked = append(w.acked, id)
					w.lastAck = time.Now()
				}
				w.mu.Unlock()
				if err != nil {
					time.Sleep(50 * time.Millisecond) // pacing of a client that failed, not synchronisation
				}
			}
		})
	}
	return &wg
}

func errKey(err error) string {
	var ce *failover.CutError
	var he *failover.HoldError
	switch {
	case errors.As(err, &ce):
		return "cut"
	case errors.As(err, &he):
		return "held"
	}
	s := err.Error()
	if len(s) > 60 {
		s = s[:60]
	}
	return s
}

func TestFailoverCrash(t *testing.T) {
	c := startCluster(t, failovertest.Config{TTL: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	f, err := holdfast.New(holdfast.WithFailover(failover.Config{}), holdfast.WithRetryPolicy(retry.Policy{
		MaxAttempts: 10, Multiplier: 2, InitialInterval: 50 * time.Millisecond, MaxInterval: 500 * time.Millisecond, MaxElapsed: 10 * time.Second, AttemptTimeout: 2 * time.Second,
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := c.PoolConfig(c.ClusterEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := f.NewPool(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "CREATE TABLE orders (id bigint PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	m := f.Failover(pool)
	if m == nil {
		t.Fatal("no monitor")
	}

	var next atomic.Int64
	w := &writer{name: "holdfast", next: &next, errs: map[string]int{}}
	wctx, wcancel := context.WithCancel(ctx)
	wg := w.run(wctx, func(ctx context.Context, id int64) error {
		_, err := pool.Exec(ctx, "INSERT INTO orders VALUES ($1)", id)
		return err
	}, 4)

	start := time.Now()
	time.Sleep(500 * time.Millisecond) // steady state before the fault (pacing)
	res, err := c.Failover(ctx, failovertest.Scenario{Kind: failovertest.Crash, Detect: 200 * time.Millisecond, DNSLag: 3 * time.Second, Rejoin: true})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	wcancel()
	wg.Wait()
	for _, e := range res.Events {
		t.Logf("%6.0f ms  %s %s", float64(e.At.Sub(start).Milliseconds()), e.Name, e.Server)
	}
	for _, e := range m.Status().Events {
		t.Logf("%6.0f ms  monitor: %s %s", float64(e.At.Sub(start).Milliseconds()), e.Name, e.Server)
	}
	t.Logf("holdfast: %d acked, %d failed %v, longest pause %v; status %+v", len(w.acked), w.failed, w.errs, w.maxPause, m.Status())
	ids, err := c.CommittedIDs(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	have := map[int64]bool{}
	for _, id := range ids {
		have[id] = true
	}
	var lost []int64
	for _, id := range w.acked {
		if !have[id] {
			lost = append(lost, id)
		}
	}
	sort.Slice(lost, func(i, j int) bool { return lost[i] < lost[j] })
	if len(lost) > 0 {
		t.Errorf("lost %d acknowledged writes: %v", len(lost), lost)
	}
}
