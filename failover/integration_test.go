package failover_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/fakes"
	"github.com/holdfast-db/holdfast/fakes/failovertest"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/internal/failovermon"
	"github.com/holdfast-db/holdfast/retry"
	"github.com/holdfast-db/holdfast/sqldb"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// engine returns the monitor behind m, for what the tests look at that a
// user does not (its routing snapshot; a poke).
func engine(m failover.Monitor) *failovermon.Monitor { return m.(*failovermon.Monitor) }

// policy is a retry policy for the tests' pools: generous bounds.
var policy = retry.Policy{MaxAttempts: 10, Multiplier: 2, InitialInterval: 50 * time.Millisecond,
	MaxInterval: 500 * time.Millisecond, MaxElapsed: 10 * time.Second, AttemptTimeout: 2 * time.Second}

// newPool returns a holdfast pool on the cluster endpoint.
func newPool(ctx context.Context, t *testing.T, c *failovertest.Cluster, opts ...holdfast.Option) (*holdfast.Factory, *pgxpool.Pool) {
	t.Helper()
	f := newFactory(t, opts...)
	return f, poolOn(ctx, t, f, c, c.ClusterEndpoint)
}

// newFactory returns a factory with WithFailover(failover.Config{}) and
// WithRetryPolicy(policy), then opts (a later option of the same kind
// wins), closed when the test ends.
func newFactory(t *testing.T, opts ...holdfast.Option) *holdfast.Factory {
	t.Helper()
	f, err := holdfast.New(append([]holdfast.Option{holdfast.WithFailover(failover.Config{}), holdfast.WithRetryPolicy(policy)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

// poolOn returns a pool of f on c's endpoint host, closed when the test
// ends.
func poolOn(ctx context.Context, t *testing.T, f *holdfast.Factory, c *failovertest.Cluster, host string) *pgxpool.Pool {
	t.Helper()
	cfg, err := c.PoolConfig(host)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := f.NewPool(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// writer is a workload: workers inserting unique ids, each write tried
// once (the test counts what fails; the demo retries).
type writer struct {
	next     atomic.Int64
	mu       sync.Mutex
	acked    []int64
	ackedAt  []time.Time
	failed   int
	errs     map[string]int
	maxPause time.Duration
}

func (w *writer) run(ctx context.Context, pool *pgxpool.Pool, table string, workers int) *sync.WaitGroup {
	return w.runExec(ctx, func(ctx context.Context, sql string, args ...any) error {
		_, err := pool.Exec(ctx, sql, args...)
		return err
	}, table, workers)
}

// runExec is run over any statement executor (database/sql's, too).
func (w *writer) runExec(ctx context.Context, exec func(context.Context, string, ...any) error, table string, workers int) *sync.WaitGroup {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				id := w.next.Add(1)
				start := time.Now()
				wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				err := exec(wctx, "INSERT INTO "+table+" VALUES ($1)", id)
				cancel()
				if ctx.Err() != nil {
					return
				}
				w.mu.Lock()
				w.maxPause = max(w.maxPause, time.Since(start))
				if err != nil {
					w.failed++
					w.errs[errKey(err)]++
				} else {
					w.acked = append(w.acked, id)
					w.ackedAt = append(w.ackedAt, time.Now())
				}
				w.mu.Unlock()
				if err != nil {
					time.Sleep(20 * time.Millisecond) // a failed client's pacing, not synchronisation
				}
			}
		})
	}
	return &wg
}

// waitFor polls done every 10 ms until it is true (true) or ctx ends
// (false).
func waitFor(ctx context.Context, done func() bool) bool {
	for !done() {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(10 * time.Millisecond):
		}
	}
	return true
}

// leaveTopology takes server id out of c's published topology (it stays
// up), as an instance removed from the cluster.
func leaveTopology(ctx context.Context, t *testing.T, c *failovertest.Cluster, id string) {
	t.Helper()
	w, err := pgx.Connect(ctx, c.DSN(c.Addr(c.Writer())))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(context.Background())
	if _, err := w.Exec(ctx, "DELETE FROM holdfast_failover.replica_status WHERE server_id = $1", id); err != nil {
		t.Fatal(err)
	}
}

// standbyOf returns the id of a server of c that is not its writer.
func standbyOf(c *failovertest.Cluster) string {
	for _, id := range c.ServerIDs() {
		if id != c.Writer() {
			return id
		}
	}
	return ""
}

// firstAckAfter returns when the first write acknowledged after t was.
// steady waits until m knows the writer and w's first 20 writes were
// acknowledged: a failover before the monitor's first topology read
// leaves it nothing to route by.
func (w *writer) steady(ctx context.Context, m failover.Monitor) bool {
	return waitFor(ctx, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return m.Status().Writer != "" && len(w.acked) >= 20
	})
}

func (w *writer) firstAckAfter(t time.Time) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, at := range w.ackedAt {
		if at.After(t) {
			return at, true
		}
	}
	return time.Time{}, false
}

func errKey(err error) string {
	var ce *failover.CutError
	var he *failover.HoldError
	var ne *failover.NotWriterError
	switch {
	case errors.As(err, &ce):
		return "cut"
	case errors.As(err, &he):
		return "held"
	case errors.As(err, &ne):
		return "not-writer"
	}
	s := err.Error()
	if len(s) > 80 {
		s = s[:80]
	}
	return s
}

// lost returns the acknowledged ids missing on the writer.
func lost(ctx context.Context, t *testing.T, c *failovertest.Cluster, table string, acked []int64) []int64 {
	t.Helper()
	ids, err := c.CommittedIDs(ctx, table)
	if err != nil {
		t.Fatal(err)
	}
	have := make(map[int64]bool, len(ids))
	for _, id := range ids {
		have[id] = true
	}
	var out []int64
	for _, id := range acked {
		if !have[id] {
			out = append(out, id)
		}
	}
	return out
}

// TestFailover plays each kind of failover under a write workload through
// a holdfast pool on the cluster endpoint and checks what the package
// promises: the new writer is routed to within a second of the topology
// naming it, long before DNS moves; a hung writer is found down within
// about a second; writes resume; no acknowledged write is lost; the monitor
// made a handful of connections, not a storm.
func TestFailover(t *testing.T) {
	tests := []struct {
		kind   failovertest.Kind
		engine failovertest.Engine
	}{
		{kind: failovertest.Crash},
		{kind: failovertest.Graceful},
		{kind: failovertest.Hang},
		{kind: failovertest.Failback},
		{kind: failovertest.Crash, engine: failovertest.MultiAZ},
	}
	for _, tt := range tests {
		name := string(tt.kind)
		if tt.engine != "" {
			name += "/" + string(tt.engine)
		}
		t.Run(name, func(t *testing.T) {
			c := failovertest.StartTest(t, failovertest.Config{TTL: time.Second, Engine: tt.engine})
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			f, pool := newPool(ctx, t, c)
			if _, err := pool.Exec(ctx, "CREATE TABLE orders (id bigint PRIMARY KEY)"); err != nil {
				t.Fatal(err)
			}
			m := f.Failover(pool)
			if m == nil {
				t.Fatal("Factory.Failover: no monitor for the pool")
			}
			w := &writer{errs: map[string]int{}}
			wctx, wcancel := context.WithCancel(ctx)
			wg := w.run(wctx, pool, "orders", 4)
			defer func() { wcancel(); wg.Wait() }()
			if !w.steady(ctx, m) {
				t.Fatal("the monitor never read the topology")
			}
			start := time.Now()
			res, err := c.Failover(ctx, failovertest.Scenario{Kind: tt.kind, Detect: 300 * time.Millisecond, DNSLag: 3 * time.Second,
				HangFor: 3 * time.Second, Rejoin: true})
			if err != nil {
				t.Fatal(err)
			}
			promoted, _ := res.At(failovertest.EventPromoted)
			if tt.kind == failovertest.Failback {
				promoted = lastEvent(res, failovertest.EventPromoted)
			}
			// Writes after the failover, so that the audit covers them.
			if !waitFor(ctx, func() bool { _, ok := w.firstAckAfter(promoted.Add(500 * time.Millisecond)); return ok }) {
				t.Fatal("no write went through after the failover")
			}
			wcancel()
			wg.Wait()

			st := m.Status()
			logTimeline(t, start, res, st)
			t.Logf("%d writes acknowledged, %d failed %v; longest pause %v; monitor connections %d, held %d",
				len(w.acked), w.failed, w.errs, w.maxPause, st.MonitorConnects, st.Held)

			if st.Writer != c.Writer() {
				t.Errorf("monitor's writer %q, the cluster's %q", st.Writer, c.Writer())
			}
			newWriter := lastMonitorEvent(st, "new writer")
			if newWriter.IsZero() {
				t.Fatalf("the monitor never saw the new writer: %+v", st.Events)
			}
			topo := lastEvent(res, failovertest.EventTopology)
			if d := newWriter.Sub(topo); d > time.Second {
				t.Errorf("the monitor routed to the new writer %v after the topology named it; want within 1 s", d)
			}
			dns := lastEvent(res, failovertest.EventDNS)
			if !newWriter.Before(dns) {
				t.Errorf("the monitor found the new writer (%v) only after DNS moved (%v)", newWriter.Sub(start), dns.Sub(start))
			}
			resumed, ok := w.firstAckAfter(promoted)
			if !ok || resumed.Sub(promoted) > 1500*time.Millisecond {
				t.Errorf("writes resumed %v after the promotion; want within 1.5 s", resumed.Sub(promoted))
			}
			if tt.kind == failovertest.Hang {
				down, _ := res.At(failovertest.EventWriterDown)
				// Down, or already replaced by the new writer found in
				// the same round of probes.
				seen := firstMonitorEvent(st, "writer down")
				if nw := firstMonitorEvent(st, "new writer"); seen.IsZero() || (!nw.IsZero() && nw.Before(seen)) {
					seen = nw
				}
				if seen.IsZero() || seen.Sub(down) > 1500*time.Millisecond {
					t.Errorf("hung writer found down %v after it stopped; want about 1 s (HeartbeatInterval + 2×FailureTimeout)", seen.Sub(down))
				}
			}
			if l := lost(ctx, t, c, "orders", w.acked); len(l) > 0 {
				t.Errorf("%d acknowledged writes lost: %v", len(l), l)
			}
			if st.MonitorConnects > 40 {
				t.Errorf("the monitor made %d connections; want a handful per failover", st.MonitorConnects)
			}
		})
	}
}

// logTimeline logs the simulator's and the monitor's events, in ms from
// start.
func logTimeline(t *testing.T, start time.Time, res failovertest.Result, st failover.Status) {
	t.Helper()
	for _, e := range res.Events {
		t.Logf("%6d ms  simulator: %s %s", e.At.Sub(start).Milliseconds(), e.Name, e.Server)
	}
	for _, e := range st.Events {
		t.Logf("%6d ms  monitor:   %s %s", e.At.Sub(start).Milliseconds(), e.Name, e.Server)
	}
}

// after returns how long after from t was, or "never" for a zero t.
func after(t, from time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.Sub(from).String()
}

func lastEvent(r failovertest.Result, name string) time.Time {
	var at time.Time
	for _, e := range r.Events {
		if e.Name == name {
			at = e.At
		}
	}
	return at
}

func lastMonitorEvent(st failover.Status, name string) time.Time {
	var at time.Time
	for _, e := range st.Events {
		if e.Name == name {
			at = e.At
		}
	}
	return at
}

func firstMonitorEvent(st failover.Status, name string) time.Time {
	for _, e := range st.Events {
		if e.Name == name {
			return e.At
		}
	}
	return time.Time{}
}

// TestStartDuringFailover: a service that starts while its writer is down
// and the writer endpoint's DNS still leads there. Its monitor cannot
// connect by the writer endpoint, so it reads the topology by the reader
// endpoint, holds the pool's connects until the replica is promoted and
// sends them to the new writer before DNS moves. The control, a plain
// pgxpool, cannot write before DNS moved; without the reader-endpoint
// fallback holdfast cannot either.
func TestStartDuringFailover(t *testing.T) {
	c := failovertest.StartTest(t, failovertest.Config{TTL: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, err := pgx.Connect(ctx, c.DSN(c.Addr(c.Writer())))
	if err != nil {
		t.Fatal(err)
	}
	_, err = admin.Exec(ctx, "CREATE TABLE orders (id bigint PRIMARY KEY)")
	admin.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	down := make(chan struct{})
	var once sync.Once
	type result struct {
		res failovertest.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := c.Failover(ctx, failovertest.Scenario{Kind: failovertest.Crash, Detect: time.Second, DNSLag: 4 * time.Second, Rejoin: true,
			OnEvent: func(e failovertest.Event) {
				if e.Name == failovertest.EventWriterDown {
					once.Do(func() { close(down) })
				}
			}})
		done <- result{res, err}
	}()
	select {
	case <-down:
	case r := <-done:
		t.Fatalf("the failover ended before the writer went down: %v", r.err)
	}

	// holdfast's pool is built during the failover and writes once; the
	// control, a plain pool, tries a write every 20 ms until the failover
	// is over. Each write is bounded.
	var (
		holdfastWrote time.Time
		f             *holdfast.Factory
		m             failover.Monitor
		mu            sync.Mutex
		plainOK       []time.Time // the control's successful writes
		plainFailed   []time.Time // and its failed ones
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // holdfast: NewPool starts the monitor and waits, bounded, for a writer
		f = newFactory(t)
		cfg, err := c.PoolConfig(c.ClusterEndpoint)
		if err != nil {
			t.Error(err)
			return
		}
		pool, err := f.NewPool(ctx, cfg)
		if err != nil {
			t.Errorf("NewPool during the failover: %v", err)
			return
		}
		defer pool.Close()
		m = f.Failover(pool)
		for ctx.Err() == nil {
			wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
			_, err := pool.Exec(wctx, "INSERT INTO orders VALUES (1)")
			wcancel()
			if err == nil {
				holdfastWrote = time.Now()
				return
			}
			time.Sleep(20 * time.Millisecond) // a failed client's pacing
		}
	})
	wg.Go(func() { // the control
		cfg, err := c.PoolConfig(c.ClusterEndpoint)
		if err != nil {
			t.Error(err)
			return
		}
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			t.Error(err)
			return
		}
		defer pool.Close()
		for id := int64(2); ; id++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			wctx, wcancel := context.WithTimeout(ctx, 3*time.Second)
			_, err := pool.Exec(wctx, "INSERT INTO orders VALUES ($1)", id)
			wcancel()
			mu.Lock()
			if err == nil {
				plainOK = append(plainOK, time.Now())
			} else {
				plainFailed = append(plainFailed, time.Now())
			}
			mu.Unlock()
		}
	})
	r := <-done
	close(stop)
	wg.Wait()
	if r.err != nil {
		t.Fatal(r.err)
	}
	start, _ := r.res.At(failovertest.EventWriterDown)
	if m != nil {
		logTimeline(t, start, r.res, m.Status())
	}
	promoted, _ := r.res.At(failovertest.EventPromoted)
	dns := lastEvent(r.res, failovertest.EventDNS)
	// The control: every write it tried between the promotion and DNS
	// moving failed (it may never write again: a connection that DNS
	// still sent to the old writer, back as a reader, is kept and answers
	// 25006 — what holdfast refuses).
	tried := 0
	for _, at := range plainFailed {
		if at.After(promoted) && at.Before(dns) {
			tried++
		}
	}
	var plainFirst time.Time
	for _, at := range plainOK {
		if at.After(promoted) {
			plainFirst = at
			break
		}
	}
	t.Logf("first write after the promotion: holdfast %s, plain pgxpool %s (%d failed before DNS moved, %d writes in all); DNS moved %v after it",
		after(holdfastWrote, promoted), after(plainFirst, promoted), tried, len(plainOK), dns.Sub(promoted))
	if tried == 0 || (!plainFirst.IsZero() && plainFirst.Before(dns)) {
		t.Errorf("control: the plain pool wrote %v after the promotion, before DNS moved (%d failed writes in between): the failover did not bite",
			plainFirst.Sub(promoted), tried)
	}
	if holdfastWrote.IsZero() || holdfastWrote.Sub(promoted) > 1500*time.Millisecond || !holdfastWrote.Before(dns) {
		t.Errorf("holdfast's first write %v after the promotion (DNS moved %v after it); want within 1.5 s, before DNS",
			holdfastWrote.Sub(promoted), dns.Sub(promoted))
	}
}

// TestAlias: a pool on a name of your own (a CNAME of the cluster
// endpoint) is routed through a failover like the endpoint when
// Config.Aliases names it: writes resume within 1.5 s of the promotion,
// before DNS moves. The control, the same factory setup with only the
// instance template, cuts the old writer's connections but is not
// redirected: it cannot write before DNS moved.
func TestAlias(t *testing.T) {
	c := failovertest.StartTest(t, failovertest.Config{TTL: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const alias = "db.orders.internal"
	c.Resolver.Alias(alias, c.ClusterEndpoint)
	template := "?" + strings.TrimPrefix(c.InstanceEndpoint(c.Writer()), c.Writer())
	fa := newFactory(t, holdfast.WithFailover(failover.Config{Aliases: map[string]string{alias: c.ClusterEndpoint}}))
	fc := newFactory(t, holdfast.WithFailover(failover.Config{InstanceTemplate: template}))
	pools := []*pgxpool.Pool{poolOn(ctx, t, fa, c, alias), poolOn(ctx, t, fc, c, alias)}
	monitors := []failover.Monitor{fa.Failover(pools[0]), fc.Failover(pools[1])}
	ws := []*writer{{errs: map[string]int{}}, {errs: map[string]int{}}}
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	var wgs []*sync.WaitGroup
	for i, table := range []string{"aliased", "control"} {
		if _, err := pools[i].Exec(ctx, "CREATE TABLE "+table+" (id bigint PRIMARY KEY)"); err != nil {
			t.Fatal(err)
		}
		wgs = append(wgs, ws[i].run(wctx, pools[i], table, 2))
	}
	defer func() {
		wcancel()
		for _, wg := range wgs {
			wg.Wait()
		}
	}()
	if !ws[0].steady(ctx, monitors[0]) || !ws[1].steady(ctx, monitors[1]) {
		t.Fatal("no steady state before the failover")
	}
	res, err := c.Failover(ctx, failovertest.Scenario{Kind: failovertest.Crash, Detect: 300 * time.Millisecond, DNSLag: 3 * time.Second, Rejoin: true})
	if err != nil {
		t.Fatal(err)
	}
	promoted, _ := res.At(failovertest.EventPromoted)
	dns := lastEvent(res, failovertest.EventDNS)
	// Writes after the failover, so that the audit covers them. (The
	// control may never write again: a connection that DNS still sent to
	// the old writer, back as a reader, answers 25006 and only a pool by
	// the writer endpoint refuses it.)
	if !waitFor(ctx, func() bool { _, ok := ws[0].firstAckAfter(dns); return ok }) {
		t.Fatal("no write went through after the failover")
	}
	wcancel()
	for _, wg := range wgs {
		wg.Wait()
	}
	logTimeline(t, promoted, res, monitors[0].Status())
	resumed, _ := ws[0].firstAckAfter(promoted)
	control, wrote := ws[1].firstAckAfter(promoted)
	t.Logf("first write after the promotion: aliased %s, control %s (%d failed in all); DNS moved %v after it",
		after(resumed, promoted), after(control, promoted), ws[1].failed, dns.Sub(promoted))
	if d := resumed.Sub(promoted); d > 1500*time.Millisecond || !resumed.Before(dns) {
		t.Errorf("the aliased pool wrote again %v after the promotion; want within 1.5 s, before DNS moved (%v)", d, dns.Sub(promoted))
	}
	if wrote && control.Before(dns) {
		t.Errorf("control: the pool without the alias wrote %v before DNS moved: nothing to show", dns.Sub(control))
	}
	if st := monitors[0].Status(); st.Writer != c.Writer() || st.Failovers != 1 {
		t.Errorf("aliased pool's monitor %+v; want writer %s after 1 failover", st, c.Writer())
	}
	for i, w := range ws {
		if l := lost(ctx, t, c, []string{"aliased", "control"}[i], w.acked); len(l) > 0 {
			t.Errorf("%d acknowledged writes lost: %v", len(l), l)
		}
	}
}

// TestAliasHint: a write by a name of your own that reaches a standby
// (25006) logs, once per pool, that the name may belong in
// Config.Aliases; by the reader endpoint, a name holdfast knows, it does
// not.
func TestAliasHint(t *testing.T) {
	c := failovertest.StartTest(t, failovertest.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	standby := standbyOf(c)
	const name = "db.orders.internal"
	c.Resolver.Alias(name, c.InstanceEndpoint(standby)) // a CNAME that leads to a standby
	template := "?" + strings.TrimPrefix(c.InstanceEndpoint(standby), standby)
	logs := &fakes.LogBuffer{}
	f := newFactory(t, holdfast.WithFailover(failover.Config{InstanceTemplate: template}),
		holdfast.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	const hint = "list it in failover.Config.Aliases"
	for _, host := range []string{name, name, c.ReaderEndpoint} {
		pool := poolOn(ctx, t, f, c, host)
		for range 2 {
			_, err := pool.Exec(ctx, "CREATE TABLE hint (id int)")
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != "25006" {
				t.Fatalf("a write by %s: %v, want 25006 from the standby", host, err)
			}
		}
	}
	if n := strings.Count(logs.String(), hint); n != 2 {
		t.Errorf("%d hints, want one for each of the two pools on %s and none for the reader endpoint:\n%s", n, name, logs)
	}
}

// TestNoFalseFailover loads both cores (busy goroutines and a write
// workload) for a few seconds with the default detection bounds: the
// monitor may suspect the writer, but never declares it down nor routes
// anywhere else, and no connection is cut.
func TestNoFalseFailover(t *testing.T) {
	c := failovertest.StartTest(t, failovertest.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, pool := newPool(ctx, t, c)
	if _, err := pool.Exec(ctx, "CREATE TABLE load (id bigint PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	m := f.Failover(pool)
	lctx, lcancel := context.WithTimeout(ctx, 4*time.Second)
	defer lcancel()
	var busy sync.WaitGroup
	for range 2 * runtime.NumCPU() {
		busy.Go(func() {
			for lctx.Err() == nil {
				for i := 0; i < 1e5; i++ {
					_ = i * i
				}
			}
		})
	}
	w := &writer{errs: map[string]int{}}
	wg := w.run(lctx, pool, "load", 8)
	wg.Wait()
	busy.Wait()
	st := m.Status()
	t.Logf("%d writes, %d failed %v; monitor %+v", len(w.acked), w.failed, w.errs, st)
	if w.failed > 0 {
		t.Errorf("%d writes failed without a fault: %v", w.failed, w.errs)
	}
	for _, e := range st.Events {
		if e.Name != "suspect" {
			t.Errorf("event %q without a fault: %+v", e.Name, st.Events)
		}
	}
	if st.Failovers != 0 || st.Routing != "normal" {
		t.Errorf("status %+v without a fault", st)
	}
}

// TestWithBlueGreen runs failover and blue/green routing on one pool: a
// deployment in CREATED (the blue/green metadata published on the cluster)
// and a writer crash. The failover is handled as without blue/green; the
// blue/green router keeps routing nothing.
func TestWithBlueGreen(t *testing.T) {
	c := failovertest.StartTest(t, failovertest.Config{TTL: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f, pool := newPool(ctx, t, c, holdfast.WithBlueGreen(bluegreen.Config{IncreasedInterval: 100 * time.Millisecond, BaselineInterval: 100 * time.Millisecond}))
	for _, q := range []string{
		"CREATE TABLE orders (id bigint PRIMARY KEY)",
		`CREATE FUNCTION pg_catalog.get_blue_green_fast_switchover_metadata(text)
			RETURNS TABLE (version text, endpoint text, port int, role text, status text) LANGUAGE sql AS
			$$ VALUES ('1.0'::text, '` + c.ClusterEndpoint + `'::text, 5432, 'BLUE_GREEN_DEPLOYMENT_SOURCE'::text, 'AVAILABLE'::text) $$`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	bg, m := f.BlueGreen(pool), f.Failover(pool)
	if !waitFor(ctx, func() bool { return bg.Status().Phase == bluegreen.Created && m.Status().Writer != "" }) {
		t.Fatalf("blue/green %v, failover %+v", bg.Status().Phase, m.Status())
	}
	w := &writer{errs: map[string]int{}}
	wctx, wcancel := context.WithCancel(ctx)
	wg := w.run(wctx, pool, "orders", 4)
	res, err := c.Failover(ctx, failovertest.Scenario{Kind: failovertest.Crash, Detect: 300 * time.Millisecond, DNSLag: 3 * time.Second, Rejoin: true})
	if err != nil {
		t.Fatal(err)
	}
	promoted, _ := res.At(failovertest.EventPromoted)
	if !waitFor(ctx, func() bool { _, ok := w.firstAckAfter(promoted.Add(500 * time.Millisecond)); return ok }) {
		t.Fatal("no write after the failover")
	}
	wcancel()
	wg.Wait()
	resumed, _ := w.firstAckAfter(promoted)
	t.Logf("%d acknowledged, %d failed %v; resumed %v after the promotion; blue/green %v", len(w.acked), w.failed, w.errs,
		resumed.Sub(promoted), bg.Status().Phase)
	if d := resumed.Sub(promoted); d > 1500*time.Millisecond {
		t.Errorf("writes resumed %v after the promotion; want within 1.5 s", d)
	}
	if st := bg.Status(); st.Phase != bluegreen.Created || !st.Routing.Normal {
		t.Errorf("blue/green phase %v routing %v after the failover; want CREATED, routing nothing", st.Phase, st.Routing.Phase)
	}
	if l := lost(ctx, t, c, "orders", w.acked); len(l) > 0 {
		t.Errorf("%d acknowledged writes lost", len(l))
	}
}

// serverID returns the id of the server a connection of pool reaches.
func serverID(ctx context.Context, t *testing.T, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) string {
	t.Helper()
	var id string
	if err := q.QueryRow(ctx, "SELECT aurora_db_instance_identifier()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestStaleClientDNS: a pool whose own DNS cache keeps the old writer's
// address for a minute (longer than the monitor's) still writes to the new
// writer after the old one is back as a reader: its dials to a topology
// reader go to the writer. A plain pool with the same cache connects to the
// old writer and fails with 25006 (the control).
func TestStaleClientDNS(t *testing.T) {
	c := failovertest.StartTest(t, failovertest.Config{TTL: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f, first := newPool(ctx, t, c) // the monitor resolves through this pool's 1 s cache
	if _, err := first.Exec(ctx, "CREATE TABLE orders (id bigint PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	stale := func() *pgxpool.Config {
		cfg, err := c.PoolConfig(c.ClusterEndpoint)
		if err != nil {
			t.Fatal(err)
		}
		cfg.ConnConfig.LookupFunc = c.Resolver.Cached(time.Minute).Lookup
		return cfg
	}
	pool, err := f.NewPool(ctx, stale())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	plain, err := pgxpool.NewWithConfig(ctx, stale())
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	old := c.Writer()
	for _, p := range []*pgxpool.Pool{pool, plain} {
		if id := serverID(ctx, t, p); id != old { // both caches now hold the old writer's address
			t.Fatalf("connected to %s, want the writer %s", id, old)
		}
	}
	if _, err := c.Failover(ctx, failovertest.Scenario{Kind: failovertest.Graceful, Detect: 200 * time.Millisecond,
		DNSLag: 500 * time.Millisecond, Rejoin: true}); err != nil {
		t.Fatal(err)
	}
	m := f.Failover(pool)
	if !waitFor(ctx, func() bool { return m.Status().Routing == "normal" && m.Status().Writer == c.Writer() }) {
		t.Fatalf("monitor %+v", m.Status())
	}
	pool.Reset()
	plain.Reset()
	for i := range 20 {
		if _, err := pool.Exec(ctx, "INSERT INTO orders VALUES ($1)", i); err != nil {
			t.Fatalf("holdfast write %d: %v", i, err)
		}
	}
	if id := serverID(ctx, t, pool); id != c.Writer() {
		t.Errorf("holdfast reached %s, want the writer %s", id, c.Writer())
	}
	_, err = plain.Exec(ctx, "INSERT INTO orders VALUES (1000)")
	if id := serverID(ctx, t, plain); id != old || err == nil {
		t.Errorf("the control (plain pgxpool, same cache) reached %s and wrote (%v): the stale DNS did not bite", id, err)
	}
}

// TestInstanceLeft: an instance that leaves the topology has its
// connections cut, in the pools of the reader endpoint too: an idle one is
// closed, one in use fails its next statement with a *failover.CutError,
// which the factory classifies as transient.
func TestInstanceLeft(t *testing.T) {
	c := failovertest.StartTest(t, failovertest.Config{TTL: time.Second, Replicas: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := newFactory(t, holdfast.WithFailover(failover.Config{RefreshInterval: 100 * time.Millisecond}))
	pool := poolOn(ctx, t, f, c, c.ReaderEndpoint)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	gone := serverID(ctx, t, conn)
	m := f.Failover(pool)
	if !waitFor(ctx, func() bool { return m.Status().Writer != "" }) {
		t.Fatal("the monitor never read the topology")
	}
	leaveTopology(ctx, t, c, gone)
	if !waitFor(ctx, func() bool { return !lastMonitorEvent(m.Status(), "instance left").IsZero() }) {
		t.Fatalf("the monitor never saw %s leave: %+v", gone, m.Status())
	}
	_, err = conn.Exec(ctx, "SELECT 1")
	var ce *failover.CutError
	if !errors.As(err, &ce) || ce.Left != gone {
		t.Fatalf("statement on a connection to %s, which left: %v, want a *failover.CutError naming it", gone, err)
	}
	if v := f.Classify(err); !v.Retryable() || v.Reason != "failover-cut" {
		t.Errorf("Classify(%v) = %v, want transient failover-cut", err, v)
	}
}

// TestSharedMonitor: the factory's pools on one cluster (writer and reader
// endpoints) share one monitor, which Factory.Close stops.
func TestSharedMonitor(t *testing.T) {
	c := failovertest.StartTest(t, failovertest.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, writers := newPool(ctx, t, c)
	readers := poolOn(ctx, t, f, c, c.ReaderEndpoint)
	// A transaction the application made read-only answers 25006 on the
	// writer: the connection is kept (it is not a reader), nothing moves.
	conn, err := writers.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS ro (id int)"); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	_, err = tx.Exec(ctx, "INSERT INTO ro VALUES (1)")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "25006" {
		t.Fatalf("INSERT in a read-only transaction: %v, want 25006", err)
	}
	_ = tx.Rollback(ctx)
	if conn.Conn().IsClosed() {
		t.Error("the connection was closed after a 25006 of a read-only transaction on the writer")
	}
	conn.Release()

	mw, mr := f.Failover(writers), f.Failover(readers)
	if mw == nil || mw != mr {
		t.Fatalf("Failover(writer pool) = %p, Failover(reader pool) = %p: want one monitor", mw, mr)
	}
	if f.Failover(nil) != nil {
		t.Error("Failover(nil) is not nil")
	}
	plainCfg, err := c.PoolConfig(c.ReaderEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := pgxpool.NewWithConfig(ctx, plainCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if f.Failover(plain) != nil {
		t.Error("Failover of a pool the factory did not configure is not nil")
	}
}

// TestUnconfirmedWriter: the topology names a standby as the writer while
// it does not take writes (a topology ahead of the promotion, or wrong):
// nothing is routed to it and no connection is cut; the monitor holds
// connects by the writer endpoint (the named writer is not the one that
// answers) until the topology and the servers agree again.
func TestUnconfirmedWriter(t *testing.T) {
	c := failovertest.StartTest(t, failovertest.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reader := sdkmetric.NewManualReader()
	f, pool := newPool(ctx, t, c, holdfast.WithFailover(failover.Config{RefreshInterval: 100 * time.Millisecond}),
		holdfast.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	m := f.Failover(pool)
	writer := c.Writer()
	if !waitFor(ctx, func() bool { return m.Status().Writer == writer }) {
		t.Fatalf("monitor %+v", m.Status())
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	admin, err := pgx.Connect(ctx, c.DSN(c.Addr(writer)))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	name := func(w string) { // the topology names w the writer
		t.Helper()
		if _, err := admin.Exec(ctx, `UPDATE holdfast_failover.replica_status SET session_id = CASE server_id WHEN $1 THEN 'MASTER_SESSION_ID' ELSE 'x-'||server_id END`, w); err != nil {
			t.Fatal(err)
		}
	}
	var standby string
	for _, id := range c.ServerIDs() {
		if id != writer {
			standby = id
		}
	}
	name(standby)
	// The named writer does not take writes, and the writer that does is
	// not named: no writer is confirmed, so connects are held.
	if !waitFor(ctx, func() bool { return !lastMonitorEvent(m.Status(), "writer down").IsZero() }) {
		t.Fatalf("the monitor did not hold while the topology named %s: %+v", standby, m.Status())
	}
	name(writer)
	if !waitFor(ctx, func() bool {
		st := m.Status()
		return engine(m).Snapshot().Normal() && st.Writer == writer && !lastMonitorEvent(st, "writer back").IsZero()
	}) {
		t.Fatalf("the routing did not return to normal on %s: %+v", writer, m.Status())
	}
	st := m.Status()
	t.Logf("%+v", st)
	if st.Failovers != 0 || lastMonitorEvent(st, "new writer") != (time.Time{}) {
		t.Errorf("routed to the unconfirmed writer %s: %+v", standby, st)
	}
	if _, err := conn.Exec(ctx, "SELECT 1"); err != nil {
		t.Errorf("a connection to the writer was cut: %v", err)
	}
	// The events are counted in holdfast.failover.events, by event: the
	// metric and the timeline agree once no event is in flight (the
	// monitor counts an event, then records it).
	diff := map[string]int64{}
	actx, acancel := context.WithTimeout(ctx, 10*time.Second)
	defer acancel()
	agree := waitFor(actx, func() bool {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(ctx, &rm); err != nil {
			t.Fatal(err)
		}
		st = m.Status()
		clear(diff)
		for _, sm := range rm.ScopeMetrics {
			for _, mt := range sm.Metrics {
				if mt.Name != "holdfast.failover.events" {
					continue
				}
				for _, dp := range mt.Data.(metricdata.Sum[int64]).DataPoints {
					ev, _ := dp.Attributes.Value("holdfast.failover.event")
					diff[ev.AsString()] += dp.Value
				}
			}
		}
		for _, e := range st.Events {
			diff[e.Name]--
		}
		for _, n := range diff {
			if n != 0 {
				return false
			}
		}
		return true
	})
	if !agree {
		t.Errorf("holdfast.failover.events differs from the timeline (metric minus events, by event): %v; events %+v", diff, st.Events)
	}
	if len(st.Events) == 0 {
		t.Error("no events to count")
	}
}

// TestDatabaseSQL: database/sql over a holdfast pool (package sqldb) gets
// the same routing: writes resume within 1.5 s of the promotion, none lost.
func TestDatabaseSQL(t *testing.T) {
	c := failovertest.StartTest(t, failovertest.Config{TTL: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f, pool := newPool(ctx, t, c)
	db := sqldb.OpenDB(pool)
	defer db.Close()
	m := f.Failover(pool)
	if _, err := db.ExecContext(ctx, "CREATE TABLE orders (id bigint PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	w := &writer{errs: map[string]int{}}
	wctx, wcancel := context.WithCancel(ctx)
	wg := w.runExec(wctx, func(ctx context.Context, sql string, args ...any) error {
		_, err := db.ExecContext(ctx, sql, args...)
		return err
	}, "orders", 4)
	if !w.steady(ctx, m) {
		wcancel()
		wg.Wait()
		t.Fatalf("no steady state before the failover: %d writes acknowledged, monitor %+v", len(w.acked), m.Status())
	}
	res, err := c.Failover(ctx, failovertest.Scenario{Kind: failovertest.Crash, Detect: 300 * time.Millisecond, DNSLag: 3 * time.Second, Rejoin: true})
	wcancel()
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	promoted, _ := res.At(failovertest.EventPromoted)
	resumed, _ := w.firstAckAfter(promoted)
	t.Logf("%d writes acknowledged; resumed %s after the promotion", len(w.acked), after(resumed, promoted))
	if resumed.IsZero() || resumed.Sub(promoted) > 1500*time.Millisecond {
		t.Errorf("database/sql writes resumed %s after the promotion; want within 1.5 s", after(resumed, promoted))
	}
	if l := lost(ctx, t, c, "orders", w.acked); len(l) > 0 {
		t.Errorf("%d acknowledged writes lost", len(l))
	}
}

// TestMonitorErrorsRedacted: a token endpoint whose error echoes a token
// the factory issued does not leak it through the monitor's Status (or
// its log lines, which carry the same text).
func TestMonitorErrorsRedacted(t *testing.T) {
	c := failovertest.StartTest(t, failovertest.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const token = "tok-SECRET-8d1f42"
	passwords := func(_ context.Context, host string) (string, error) {
		if host == c.ClusterEndpoint {
			return token, nil
		}
		return "", fmt.Errorf("token endpoint: %s revoked for %s", token, host) // echoes the secret
	}
	f, pool := newPool(ctx, t, c, holdfast.WithPasswordFunc(passwords),
		holdfast.WithRetryPolicy(retry.Policy{MaxAttempts: 1, Multiplier: 2, InitialInterval: time.Millisecond, MaxInterval: time.Millisecond}))
	m := f.Failover(pool)
	if !waitFor(ctx, func() bool { return m.Status().Writer != "" }) {
		t.Fatalf("the monitor never read the topology: %+v", m.Status())
	}
	// The monitor's connection ends; it reconnects to the writer's
	// instance endpoint, whose token fetch fails.
	if _, err := pool.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'holdfast-failover-monitor'"); err != nil {
		t.Fatal(err)
	}
	if !waitFor(ctx, func() bool { return m.Status().Error != "" }) {
		t.Fatalf("no monitor error: %+v", m.Status())
	}
	st := m.Status()
	if strings.Contains(st.Error, token) || !strings.Contains(st.Error, "revoked") {
		t.Errorf("monitor error %q: want the cause without the token", st.Error)
	}
}
