package failover_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/fakes/failovertest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// timedRead is one read of a timedReads workload.
type timedRead struct {
	start, end time.Time
	addr       string // the server the connection reached ("" when none was acquired)
	err        error
}

// timedReads is a read workload that records each read: workers each
// acquire a connection, run a SELECT on it and release it, tried once
// with a timeout.
type timedReads struct {
	mu  sync.Mutex
	ops [][]timedRead // by worker
}

func (r *timedReads) run(ctx context.Context, pool *pgxpool.Pool, workers int, timeout time.Duration) *sync.WaitGroup {
	var wg sync.WaitGroup
	r.ops = make([][]timedRead, workers)
	for w := range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				op := timedRead{start: time.Now()}
				qctx, cancel := context.WithTimeout(ctx, timeout)
				conn, err := pool.Acquire(qctx)
				if err == nil {
					op.addr = conn.Conn().PgConn().Conn().RemoteAddr().String()
					var one int
					err = conn.QueryRow(qctx, "SELECT 1").Scan(&one)
					conn.Release()
				}
				cancel()
				if ctx.Err() != nil {
					return
				}
				op.end, op.err = time.Now(), err
				r.mu.Lock()
				r.ops[w] = append(r.ops[w], op)
				r.mu.Unlock()
			}
		})
	}
	return &wg
}

// longestGap returns the longest time a worker went without a successful
// read from `from` to `to`: a pause starts at from at the latest.
func (r *timedReads) longestGap(from, to time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var worst time.Duration
	for _, ops := range r.ops {
		last := from
		for _, op := range ops {
			if op.err != nil || op.end.Before(from) {
				continue
			}
			worst = max(worst, op.end.Sub(last))
			last = op.end
		}
		worst = max(worst, to.Sub(last))
	}
	return worst
}

// failures returns the reads that failed.
func (r *timedReads) failures() []timedRead {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []timedRead
	for _, ops := range r.ops {
		for _, op := range ops {
			if op.err != nil {
				out = append(out, op)
			}
		}
	}
	return out
}

// count returns how many reads succeeded and failed in all.
func (r *timedReads) count() (ok, failed int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ops := range r.ops {
		for _, op := range ops {
			if op.err != nil {
				failed++
			} else {
				ok++
			}
		}
	}
	return ok, failed
}

// after returns the successful reads that started after at, by server.
func (r *timedReads) after(at time.Time) map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for _, ops := range r.ops {
		for _, op := range ops {
			if op.err == nil && op.start.After(at) {
				out[op.addr]++
			}
		}
	}
	return out
}

// TestReaderHealth: a pool of 9 on the reader endpoint of 3 readers under
// a read load of 4 workers; one reader crashes (or hangs) and stays in the
// topology and DNS, as on Aurora until it detects the failure. The
// monitor finds it down (refused at once; a hang within HeartbeatInterval
// + 2×FailureTimeout), the pool's connections to it are cut (the reads in
// flight there end with a *failover.CutError naming it, rather than at
// their timeout), new connections go to the other two, and the reads go
// on. A plain pgxpool under the same hang keeps its reads stuck until
// their timeout.
func TestReaderHealth(t *testing.T) {
	t.Run("crash", func(t *testing.T) { testReaderFault(t, false) })
	t.Run("hang", func(t *testing.T) { testReaderFault(t, true) })
}

func testReaderFault(t *testing.T, hang bool) {
	const (
		size    = 9
		workers = 4
	)
	kind, bound := "crash", time.Second
	if hang {
		kind, bound = "hang", 2500*time.Millisecond // 1 s, and a margin for two shared cores under -race
	}
	c := failovertest.StartTest(t, failovertest.Config{Replicas: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	readerUsers(ctx, t, c, "hf", "plain")

	f := newFactory(t)
	pool, err := f.NewPool(ctx, readerPoolConfig(t, c, "hf", size))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	openAtOnce(ctx, t, pool, size)
	t.Logf("holdfast: connections per reader (the monitor's probe included) %v", perReader(ctx, t, c, "hf"))

	victim := c.Readers()[0]
	var plain *pgxpool.Pool
	if hang {
		// The control: a plain pgxpool on the reader endpoint. Its
		// connections pile on the one reader the DNS answers: that one
		// hangs.
		if plain, err = pgxpool.NewWithConfig(ctx, readerPoolConfig(t, c, "plain", 4)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(plain.Close)
		openAtOnce(ctx, t, plain, 4)
		pc := perReader(ctx, t, c, "plain")
		for id, n := range pc {
			if n > pc[victim] {
				victim = id
			}
		}
		t.Logf("plain pgxpool: connections per reader %v", pc)
	}
	victimAddr := c.Addr(victim)
	m := f.Failover(pool)

	var rd timedReads
	wctx, stop := context.WithCancel(ctx)
	wg := rd.run(wctx, pool, workers, 5*time.Second)
	var ctl timedReads
	cwg := &sync.WaitGroup{}
	cctx, cstop := context.WithCancel(ctx)
	defer func() { stop(); cstop(); wg.Wait(); cwg.Wait() }()
	// The reads run. (On the pool's connections, spread over every
	// reader; which of them serve the reads is pgxpool's choice: it
	// reuses the connection released last.)
	if !waitFor(ctx, func() bool { ok, _ := rd.count(); return ok >= 200 }) {
		t.Fatalf("before the %s: the reads do not run", kind)
	}
	if ok, failed := rd.count(); ok == 0 || failed > 0 {
		t.Fatalf("before the %s: %d reads succeeded, %d failed %v", kind, ok, failed, rd.failures())
	}

	at := time.Now()
	if hang {
		cwg = ctl.run(cctx, plain, 2, 2*time.Second) // short: the reads' own timeout is what ends them
		err = c.HangReader(ctx, victim)
	} else {
		err = c.CrashReader(ctx, victim)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: the simulator's %s of %s returned after %v (the times below are from its call)", kind, kind, victim, time.Since(at).Round(time.Millisecond))
	if !waitFor(ctx, func() bool { return !lastMonitorEvent(m.Status(), "reader down").IsZero() }) {
		t.Fatalf("the monitor never found %s down", victim)
	}
	downAt := lastMonitorEvent(m.Status(), "reader down")
	if s := engine(m).Snapshot(); !s.ReadersDown[victimAddr] {
		t.Errorf("snapshot ReadersDown %v, want %s", s.ReadersDown, victimAddr)
	}
	// The reads go on, on the others: 3 s of them, measured by the
	// workload itself (a worker paused that long would show as a gap).
	if !waitFor(ctx, func() bool {
		total := 0
		for _, n := range rd.after(downAt) {
			total += n
		}
		return total >= 300 && time.Since(downAt) >= 3*time.Second
	}) {
		t.Fatalf("%s: the reads did not go on after %s was found down", kind, victim)
	}
	end := time.Now()
	stop()
	wg.Wait()
	cstop()
	cwg.Wait()

	resumed := rd.longestGap(at, end)
	ok, _ := rd.count()
	fails := rd.failures()
	t.Logf("reader health: %s: %s found down %v after the %s, reads resumed after %v (longest pause of a worker), %d failed (in flight %d), %d succeeded",
		kind, victim, downAt.Sub(at).Round(time.Millisecond), kind, resumed.Round(time.Millisecond), len(fails), workers, ok)
	if resumed > bound {
		t.Errorf("%s: a worker paused %v, want ≤ %v", kind, resumed, bound)
	}
	if len(fails) > workers {
		t.Errorf("%s: %d reads failed, want ≤ %d (those in flight at the %s)", kind, len(fails), workers, kind)
	}
	for _, op := range fails {
		took := op.end.Sub(at)
		var ce *failover.CutError
		cut := errors.As(op.err, &ce) && ce.Down == victim
		t.Logf("failed: on %s, started %v after the %s, ended %v after: %v", op.addr, op.start.Sub(at).Round(time.Millisecond), kind, took.Round(time.Millisecond), op.err)
		if hang && (!cut || took > bound) {
			t.Errorf("hang: a read in flight on the hung reader ended %v after the hang with %v, want a *failover.CutError naming %s within %v", took, op.err, victim, bound)
		}
		if op.start.After(downAt.Add(100 * time.Millisecond)) { // (the cut follows the event)
			t.Errorf("%s: a read started after %s was found down failed: %v", kind, victim, op.err)
		}
	}
	if n := rd.after(downAt.Add(100 * time.Millisecond))[victimAddr]; n > 0 {
		t.Errorf("%s: %d reads on %s after it was found down", kind, n, victimAddr)
	}

	// None of the pool's connections is left to the reader down.
	idle := pool.AcquireAllIdle(ctx)
	var addrs []string
	for _, pc := range idle {
		addrs = append(addrs, pc.Conn().PgConn().Conn().RemoteAddr().String())
		pc.Release()
	}
	slices.Sort(addrs)
	if slices.Contains(addrs, victimAddr) {
		t.Errorf("%s: the pool still has connections to %s: %v", kind, victimAddr, addrs)
	}
	others := map[string]int{}
	for _, id := range c.Readers() {
		if id != victim {
			n, err := c.Connections(ctx, id, "hf")
			if err != nil {
				t.Fatal(err)
			}
			others[id] = n
		}
	}
	t.Logf("%s: after: the pool's %d idle connections on %v; per other reader (the monitor's probe included) %v", kind, len(idle), addrs, others)

	if hang {
		cok, cfailed := ctl.count()
		var stuck time.Duration
		timeouts := 0
		for _, op := range ctl.failures() {
			stuck = max(stuck, op.end.Sub(op.start))
			if errors.Is(op.err, context.DeadlineExceeded) || pgconn.Timeout(op.err) {
				timeouts++
			}
		}
		t.Logf("reader health: control: plain pgxpool under the hang: %d reads failed (%d timeouts, stuck up to %v), %d succeeded",
			cfailed, timeouts, stuck.Round(time.Millisecond), cok)
		if timeouts == 0 || stuck < 1500*time.Millisecond {
			t.Errorf("control: the plain pgxpool's reads did not hang: %s", fmt.Sprint(ctl.failures()))
		}
	}

	// The reader comes back (Aurora restarts it): the monitor finds it,
	// and the pool's connections and reads return to it.
	var back timedReads
	bctx, bstop := context.WithCancel(ctx)
	bwg := back.run(bctx, pool, workers, 5*time.Second)
	defer func() { bstop(); bwg.Wait() }()
	recovered := time.Now()
	if err := c.RecoverReader(ctx, victim); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: RecoverReader(%s) took %v", kind, victim, time.Since(recovered).Round(time.Millisecond))
	if !waitFor(ctx, func() bool { return lastMonitorEvent(m.Status(), "reader back").After(recovered) }) {
		t.Fatalf("the monitor never found %s back", victim)
	}
	backAt := lastMonitorEvent(m.Status(), "reader back")
	// Its share of the pool's connections (9 over 3 readers: 3) comes
	// back. (Reads follow connections loosely: pgxpool reuses the
	// connection released last, so 4 workers on 9 connections keep to a
	// few of them.)
	var poolConns int
	if !waitFor(ctx, func() bool { poolConns = poolConnsOn(ctx, t, c, victim, "hf"); return poolConns >= 3 }) {
		t.Fatalf("%s: the pool has %d connections on %s after it came back, want its share, 3", kind, poolConns, victim)
	}
	sharedAt := time.Now()
	bstop()
	bwg.Wait()
	if s := engine(m).Snapshot(); s.ReadersDown[victimAddr] {
		t.Errorf("%s: %s back, but still in ReadersDown", kind, victim)
	}
	if _, failed := back.count(); failed > 0 {
		t.Errorf("%s: %d reads failed while %s came back: %v", kind, failed, victim, back.failures())
	}
	t.Logf("reader health: %s: %s back %v after RecoverReader was called, its share of %d connections %v after that; reads since %v",
		kind, victim, backAt.Sub(recovered).Round(time.Millisecond), poolConns, sharedAt.Sub(backAt).Round(time.Millisecond), back.after(backAt))
}

// poolConnsOn returns the connections of user on server id, the failover
// and blue/green monitors' own left out.
func poolConnsOn(ctx context.Context, t *testing.T, c *failovertest.Cluster, id, user string) int {
	t.Helper()
	conn, err := pgx.Connect(ctx, c.DSN(c.Addr(id), "connect_timeout=5"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE usename = $1
		AND application_name NOT IN ('holdfast-failover-monitor', 'holdfast-bluegreen-monitor') AND pid <> pg_backend_pid()`, user).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
