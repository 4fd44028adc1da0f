package failover_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/fakes/failovertest"
	"github.com/holdfast-db/holdfast/retry"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// readerUsers creates login roles on c's writer and waits until every
// reader has replayed them: each pool of a test counts its own
// connections per server (Cluster.Connections).
func readerUsers(ctx context.Context, t *testing.T, c *failovertest.Cluster, users ...string) {
	t.Helper()
	w, err := pgx.Connect(ctx, c.DSN(c.Addr(c.Writer())))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(context.Background())
	for _, u := range users {
		if _, err := w.Exec(ctx, "CREATE ROLE "+u+" LOGIN SUPERUSER"); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range c.Readers() {
		ok := waitFor(ctx, func() bool {
			r, err := pgx.Connect(ctx, c.DSN(c.Addr(id)))
			if err != nil {
				return false
			}
			defer r.Close(context.Background())
			var n int
			return r.QueryRow(ctx, "SELECT count(*) FROM pg_roles WHERE rolname = $1", users[len(users)-1]).Scan(&n) == nil && n == 1
		})
		if !ok {
			t.Fatalf("reader %s never replayed the roles", id)
		}
	}
}

// perReader returns user's connections on each reader of c.
func perReader(ctx context.Context, t *testing.T, c *failovertest.Cluster, user string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, id := range c.Readers() {
		n, err := c.Connections(ctx, id, user)
		if err != nil {
			t.Fatal(err)
		}
		out[id] = n
	}
	return out
}

// spread returns max/min of counts (+Inf when a reader has none).
func spread(counts map[string]int) float64 {
	lo, hi := math.MaxInt, 0
	for _, n := range counts {
		lo, hi = min(lo, n), max(hi, n)
	}
	if lo == 0 {
		return math.Inf(1)
	}
	return float64(hi) / float64(lo)
}

// openAtOnce acquires n connections of pool concurrently, holds them all,
// then releases them: a pool's start under load.
func openAtOnce(ctx context.Context, t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	conns := make([]*pgxpool.Conn, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { conns[i], errs[i] = pool.Acquire(ctx) })
	}
	wg.Wait()
	for i, c := range conns {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		c.Release()
	}
}

// readerPoolConfig returns a config of n connections (MinConns too) on
// c's reader endpoint as user.
func readerPoolConfig(t *testing.T, c *failovertest.Cluster, user string, n int32) *pgxpool.Config {
	t.Helper()
	cfg, err := c.PoolConfig(c.ReaderEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.User = user
	cfg.MinConns, cfg.MaxConns = n, n
	return cfg
}

// reads is a read workload: workers running a SELECT on the pool, each
// tried once, counting what fails.
type reads struct {
	ok, failed atomic.Int64
	mu         sync.Mutex
	errs       []string
}

func (r *reads) run(ctx context.Context, pool *pgxpool.Pool, workers int) *sync.WaitGroup {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				var one int
				err := pool.QueryRow(qctx, "SELECT 1").Scan(&one)
				cancel()
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					r.failed.Add(1)
					r.mu.Lock()
					r.errs = append(r.errs, err.Error())
					r.mu.Unlock()
					continue
				}
				r.ok.Add(1)
			}
		})
	}
	return &wg
}

// TestReaderRouting: a pool of 12 on the reader endpoint of 3 readers,
// opened at once, spreads evenly (a plain pgxpool, whose DNS cache answers
// one reader for 5 s, piles up); a reader that joins gets its share within
// 10 s; a reader that is removed has its connections cut and the reads go
// on.
func TestReaderRouting(t *testing.T) {
	c := failovertest.StartTest(t, failovertest.Config{Replicas: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	readerUsers(ctx, t, c, "hf", "plain")
	const size = 12

	plain, err := pgxpool.NewWithConfig(ctx, readerPoolConfig(t, c, "plain", size))
	if err != nil {
		t.Fatal(err)
	}
	openAtOnce(ctx, t, plain, size)
	pc := perReader(ctx, t, c, "plain")
	plain.Close()
	t.Logf("plain pgxpool: connections per reader %v, max/min %.2f", pc, spread(pc))

	f := newFactory(t, holdfast.WithFailover(failover.Config{RefreshInterval: 500 * time.Millisecond}))
	pool, err := f.NewPool(ctx, readerPoolConfig(t, c, "hf", size))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	openAtOnce(ctx, t, pool, size)
	hc := perReader(ctx, t, c, "hf")
	t.Logf("holdfast: connections per reader %v, max/min %.2f", hc, spread(hc))
	if r := spread(hc); r > 1.25 {
		t.Errorf("holdfast: connections per reader %v: max/min %.2f, want ≤ 1.25", hc, r)
	}

	var rd reads
	wctx, stop := context.WithCancel(ctx)
	wg := rd.run(wctx, pool, 4)
	defer func() { stop(); wg.Wait() }()

	// A reader joins: it gets its fair share within 10 s.
	added, err := c.AddReader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	joined := time.Now()
	fair := float64(size) / float64(len(c.Readers()))
	var got int
	var share time.Duration
	for time.Since(joined) < 10*time.Second {
		if got, err = c.Connections(ctx, added, "hf"); err != nil {
			t.Fatal(err)
		}
		if float64(got) >= 0.8*fair {
			share = time.Since(joined)
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(100 * time.Millisecond): // a poll of the server's count
		}
	}
	after := perReader(ctx, t, c, "hf")
	if share == 0 {
		t.Errorf("the added reader %s holds %d connections 10 s after it joined (fair share %.1f), want ≥ 80%%; per reader %v", added, got, fair, after)
	} else {
		t.Logf("the added reader %s held %d connections (fair share %.1f) %v after AddReader returned; per reader %v", added, got, fair, share.Round(time.Millisecond), after)
	}

	// A reader is removed: its connections are cut, the reads go on.
	gone := c.Readers()[0]
	before := rd.failed.Load()
	okBefore := rd.ok.Load()
	if err := c.RemoveReader(ctx, gone); err != nil {
		t.Fatal(err)
	}
	removed := time.Now()
	m := f.Failover(pool)
	if !waitFor(ctx, func() bool { return !lastMonitorEvent(m.Status(), "instance left").IsZero() }) {
		t.Fatalf("the monitor never saw %s leave", gone)
	}
	// Reads carry on, on the readers left.
	if !waitFor(ctx, func() bool { return rd.ok.Load() > okBefore+200 }) {
		t.Fatal("the reads stopped after RemoveReader")
	}
	failed := rd.failed.Load() - before
	rest := perReader(ctx, t, c, "hf")
	t.Logf("after RemoveReader(%s) (%v ago): %d reads failed, %d succeeded since; per reader %v",
		gone, time.Since(removed).Round(time.Millisecond), failed, rd.ok.Load()-okBefore, rest)
	if failed > 4 { // the workers' reads in flight at the removal
		rd.mu.Lock()
		t.Errorf("%d reads failed after RemoveReader, want ≤ 4 (those in flight): %v", failed, rd.errs)
		rd.mu.Unlock()
	}
	total := 0
	for _, n := range rest {
		total += n
	}
	if total == 0 {
		t.Errorf("no connection of the pool on the readers left: %v", rest)
	}
}

// serversAtOnce acquires n connections of pool concurrently and returns
// the server id of each, then releases them.
func serversAtOnce(ctx context.Context, t *testing.T, pool *pgxpool.Pool, n int) map[string]int {
	t.Helper()
	ids := make([]string, n)
	errs := make([]error, n)
	conns := make([]*pgxpool.Conn, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if conns[i], errs[i] = pool.Acquire(ctx); errs[i] == nil {
				errs[i] = conns[i].QueryRow(ctx, "SELECT aurora_db_instance_identifier()").Scan(&ids[i])
			}
		})
	}
	wg.Wait()
	out := map[string]int{}
	for i := range n {
		if conns[i] != nil {
			conns[i].Release()
		}
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		out[ids[i]]++
	}
	return out
}

// TestReaderMaxLag: a reader lagging beyond MaxLag gets no new
// connections once the monitor has read its lag; with every reader
// lagging, a pool connects to the writer and with Hold fails, after its
// bound, with a *failover.HoldError.
func TestReaderMaxLag(t *testing.T) {
	c := failovertest.StartTest(t, failovertest.Config{Replicas: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	readers := c.Readers()
	lagging, fresh := readers[0], readers[1]
	if err := c.SetLag(ctx, lagging, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	rc := failover.ReaderConfig{MaxLag: time.Second}
	f := newFactory(t, holdfast.WithFailover(failover.Config{RefreshInterval: 200 * time.Millisecond, Readers: rc}))
	cfg, err := c.PoolConfig(c.ReaderEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 6
	pool, err := f.NewPool(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := pool.Ping(ctx); err != nil { // starts the monitor
		t.Fatal(err)
	}
	m := engine(f.Failover(pool))
	lagAddr := c.Addr(lagging)
	if !waitFor(ctx, func() bool { return m.Snapshot().Lag[lagAddr] > time.Second }) {
		t.Fatalf("the monitor never read %s's lag: %v", lagging, m.Snapshot().Lag)
	}
	pool.Reset()
	got := serversAtOnce(ctx, t, pool, 6)
	t.Logf("with %s lagging 3 s (MaxLag 1 s): connections per server %v", lagging, got)
	if got[lagging] != 0 || got[fresh] != 6 {
		t.Errorf("connections per server %v, want all 6 on %s, none on the lagging %s", got, fresh, lagging)
	}

	// Every reader lags: without Hold, the pool connects to the writer.
	if err := c.SetLag(ctx, fresh, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	freshAddr := c.Addr(fresh)
	if !waitFor(ctx, func() bool { return m.Snapshot().Lag[freshAddr] > time.Second }) {
		t.Fatalf("the monitor never read %s's lag", fresh)
	}
	pool.Reset()
	got = serversAtOnce(ctx, t, pool, 2)
	if got[c.Writer()] != 2 {
		t.Errorf("every reader lagging, no Hold: connections per server %v, want both on the writer %s", got, c.Writer())
	}

	// Hold: the connect fails after HoldTimeout with a *HoldError.
	rc.Hold, rc.HoldTimeout = true, 300*time.Millisecond
	fh := newFactory(t, holdfast.WithFailover(failover.Config{RefreshInterval: 200 * time.Millisecond, Readers: rc}),
		holdfast.WithRetryPolicy(retry.Policy{MaxAttempts: 1, InitialInterval: 50 * time.Millisecond, Multiplier: 2, MaxInterval: time.Second}))
	hcfg, err := c.PoolConfig(c.ReaderEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	// The monitor starts with a pool on the writer endpoint: a monitor
	// whose first read is on a lagging reader of the simulator sees the
	// topology's lag rows that late.
	wp := poolOn(ctx, t, fh, c, c.ClusterEndpoint)
	if err := wp.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	hm := engine(fh.Failover(wp))
	if !waitFor(ctx, func() bool { s := hm.Snapshot(); return s.Lag[lagAddr] > time.Second && s.Lag[freshAddr] > time.Second }) {
		t.Fatalf("the second monitor never read the lag: %v", hm.Snapshot().Lag)
	}
	start := time.Now()
	hp, err := fh.NewPool(ctx, hcfg) // its first connection is held, then fails
	if err == nil {
		t.Cleanup(hp.Close)
		actx, acancel := context.WithTimeout(ctx, 10*time.Second)
		defer acancel()
		var conn *pgxpool.Conn
		if conn, err = hp.Acquire(actx); err == nil {
			t.Logf("connection to %s; lag %v", serverID(ctx, t, conn), hm.Snapshot().Lag)
			conn.Release()
		}
	}
	var nre *failover.HoldError
	if !errors.As(err, &nre) || !nre.Reader || nre.Readers != 2 {
		t.Fatalf("Hold with every reader lagging: Acquire = %v after %v, want a *failover.HoldError of a reader pool naming 2 readers", err, time.Since(start))
	}
	t.Logf("Hold: %v after %v", err, time.Since(start).Round(time.Millisecond))
}
