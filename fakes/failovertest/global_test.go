package failovertest_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/fakes/failovertest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// globalWriter writes ids 1, 2, … through a plain pgxpool (the control)
// every 10 ms until stopped, recording each acknowledged id and each
// failure with its time and SQLSTATE.
type globalWriter struct {
	mu     sync.Mutex
	acked  []write
	failed []write
}

type write struct {
	id   int64
	at   time.Time
	code string // the failure's SQLSTATE, "" for another error
}

func (w *globalWriter) run(ctx context.Context, pool *pgxpool.Pool, table string) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for id := int64(1); ; id++ {
		wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		_, err := pool.Exec(wctx, "INSERT INTO "+table+" VALUES ($1)", id)
		cancel()
		w.mu.Lock()
		if err == nil {
			w.acked = append(w.acked, write{id: id, at: time.Now()})
		} else if ctx.Err() == nil {
			x := write{id: id, at: time.Now()}
			var pe *pgconn.PgError
			if errors.As(err, &pe) {
				x.code = pe.Code
			}
			w.failed = append(w.failed, x)
		}
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// ackedIDs returns the acknowledged ids.
func (w *globalWriter) ackedIDs() []int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]int64, len(w.acked))
	for i, a := range w.acked {
		out[i] = a.id
	}
	return out
}

// count returns how many writes were acknowledged and how many failed
// (with code when it is not "*") between a and b.
func (w *globalWriter) count(a, b time.Time, code string) (acked, failed int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, x := range w.acked {
		if x.at.After(a) && x.at.Before(b) {
			acked++
		}
	}
	for _, x := range w.failed {
		if x.at.After(a) && x.at.Before(b) && (code == "*" || x.code == code) {
			failed++
		}
	}
	return acked, failed
}

// startWriter creates table (id) on the writer and starts a globalWriter
// into it on a plain pool on the global writer endpoint; stop ends it and
// closes the pool.
func startWriter(ctx context.Context, t *testing.T, g *failovertest.Global, table string) (w *globalWriter, pool *pgxpool.Pool, stop func()) {
	t.Helper()
	cfg, err := g.PoolConfig(g.GlobalEndpoint, "connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gconn(ctx, t, g, g.Writer()).Exec(ctx, "CREATE TABLE "+table+" (id bigint PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	pool, err = pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(context.Background())
	w = &globalWriter{}
	done := make(chan struct{})
	go func() { defer close(done); w.run(wctx, pool, table) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done; pool.Close() }) }
	t.Cleanup(stop)
	return w, pool, stop
}

// gconn connects to server id by address.
func gconn(ctx context.Context, t *testing.T, g *failovertest.Global, id string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, g.DSN(g.Addr(id), "connect_timeout=5"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func readOnlyErr(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "25006"
}

// instanceRow is a row of aurora_global_db_instance_status(), regionRow
// one of aurora_global_db_status().
type (
	instanceRow struct {
		ID, Session, Region string
		Lag                 *float32
	}
	regionRow struct {
		Region   string
		RPO, Dur *int64
	}
)

func globalInstances(ctx context.Context, conn *pgx.Conn) ([]instanceRow, error) {
	return queryAll[instanceRow](ctx, conn, "SELECT server_id, session_id, aws_region, visibility_lag_in_msec FROM aurora_global_db_instance_status()")
}

func globalRegions(ctx context.Context, conn *pgx.Conn) ([]regionRow, error) {
	return queryAll[regionRow](ctx, conn, "SELECT aws_region, rpo_lag_in_msec, durability_lag_in_msec FROM aurora_global_db_status()")
}

// queryAll returns the rows of query, each scanned into a T by position.
func queryAll[T any](ctx context.Context, conn *pgx.Conn, query string) ([]T, error) {
	rows, err := conn.Query(ctx, query)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[T])
}

// checkWriterEverywhere checks that every server of the global cluster
// names writer, in writerRegion, in aurora_global_db_instance_status(),
// and writerRegion the primary in aurora_global_db_status().
func checkWriterEverywhere(ctx context.Context, t *testing.T, g *failovertest.Global, writer, writerRegion string) {
	t.Helper()
	for _, r := range g.Regions() {
		for _, id := range r.Servers {
			conn := gconn(ctx, t, g, id)
			rows, err := globalInstances(ctx, conn)
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != 4 || rows[0].ID != writer || rows[0].Session != failovertest.WriterSessionID || rows[0].Region != writerRegion {
				t.Errorf("aurora_global_db_instance_status() on %s: %+v; want %s of %s first, the writer", id, rows, writer, writerRegion)
			}
			regions, err := globalRegions(ctx, conn)
			if err != nil {
				t.Fatal(err)
			}
			if len(regions) != 2 || regions[0].Region != writerRegion || regions[0].RPO == nil || *regions[0].RPO != -1 {
				t.Errorf("aurora_global_db_status() on %s: %+v; want %s first, rpo_lag_in_msec -1", id, regions, writerRegion)
			}
		}
	}
}

// roles returns the primary Region and the secondary now.
func roles(g *failovertest.Global) (primary, secondary failovertest.GlobalRegion) {
	r := g.Regions()
	if r[0].Name != g.WriterRegion() {
		r[0], r[1] = r[1], r[0]
	}
	return r[0], r[1]
}

func logEvents(t *testing.T, started time.Time, events []failovertest.Event) {
	for _, e := range events {
		t.Logf("%6.2fs %-24s %s", e.At.Sub(started).Seconds(), e.Name, e.Server)
	}
}

func TestGlobalConfigErrors(t *testing.T) {
	for _, cfg := range []failovertest.GlobalConfig{
		{Regions: [2]string{"eu-west-1", "eu-west-1"}},
		{Regions: [2]string{"", failovertest.DefaultRegion}},
		{Readers: 4},
		{Readers: -1},
	} {
		_, err := failovertest.StartGlobal(context.Background(), cfg)
		var ce *failovertest.ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("StartGlobal(%+v): %v; want a *ConfigError", cfg, err)
		}
	}
}

// TestGlobal starts one global cluster (its servers' start is most of the
// cost) and plays on it a managed switchover, then a failover with data
// loss back to the first Region, each under a plain pgxpool on the global
// writer endpoint (the control), with TLS. Each subtest plays from the
// state it finds.
func TestGlobal(t *testing.T) {
	const lag, ttl = 300 * time.Millisecond, 500 * time.Millisecond
	begun := time.Now()
	g := failovertest.StartGlobalTest(t, failovertest.GlobalConfig{Lag: lag, TTL: ttl, TLS: true})
	t.Logf("started in %.1fs", time.Since(begun).Seconds())
	t.Run("status", func(t *testing.T) { testGlobalStatus(t, g, lag) })
	t.Run("switchover", func(t *testing.T) { testGlobalSwitchover(t, g, ttl) })
	t.Run("failover", func(t *testing.T) { testGlobalFailover(t, g, lag) })
}

// testGlobalStatus: the names, the lag and the status functions.
func testGlobalStatus(t *testing.T, g *failovertest.Global, lag time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	primary, secondary := roles(g)
	writer, head, reader := primary.Servers[0], secondary.Servers[0], secondary.Servers[1]

	// Names: one hash per Region; the global writer endpoint is a CNAME
	// of the writer Region's cluster endpoint, itself a CNAME of the
	// writer's instance endpoint, which names the hash and the Region.
	if primary.Hash == secondary.Hash || !strings.Contains(primary.ClusterEndpoint, ".cluster-"+primary.Hash+"."+primary.Name+".") {
		t.Errorf("Regions %+v, %+v", primary, secondary)
	}
	if got := g.Resolver.CNAME(g.GlobalEndpoint); got != primary.ClusterEndpoint {
		t.Errorf("CNAME of %s = %q, want %s", g.GlobalEndpoint, got, primary.ClusterEndpoint)
	}
	if got, err := g.Resolver.LookupCNAME(ctx, g.GlobalEndpoint); err != nil || got != g.InstanceEndpoint(writer)+"." {
		t.Errorf("canonical name of %s = %q, %v; want %s.", g.GlobalEndpoint, got, err, g.InstanceEndpoint(writer))
	}
	// The secondary's cluster endpoint is inactive: it leads to a
	// standby, which the certificate names too.
	cfg, err := g.PoolConfig(secondary.ClusterEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	inactive, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer inactive.Close(context.Background())
	if _, err := inactive.Exec(ctx, "CREATE TABLE probe (id bigint)"); !readOnlyErr(err) {
		t.Errorf("a write through the secondary's cluster endpoint: %v; want 25006", err)
	}

	// The lag is real: a commit reaches the secondary about lag later.
	conn := gconn(ctx, t, g, writer)
	if _, err := conn.Exec(ctx, "CREATE TABLE t_lag (id bigint PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	var at time.Time
	if err := conn.QueryRow(ctx, "INSERT INTO t_lag VALUES (1) RETURNING clock_timestamp()").Scan(&at); err != nil {
		t.Fatal(err)
	}
	hc := gconn(ctx, t, g, head)
	seen := waitFor(ctx, 5*time.Second, func() bool {
		var n int
		return hc.QueryRow(ctx, "SELECT count(*) FROM t_lag").Scan(&n) == nil && n == 1
	})
	if since := time.Since(at); !seen || since < lag*8/10 {
		t.Errorf("the row on the secondary after %v (seen %v); want about %v", since, seen, lag)
	}

	// On a secondary reader: its own Region in aurora_replica_status(),
	// with no writer; the whole global cluster in
	// aurora_global_db_instance_status(); the lag measured.
	rc := gconn(ctx, t, g, reader)
	rows, err := rc.Query(ctx, "SELECT server_id FROM aurora_replica_status() WHERE session_id <> 'MASTER_SESSION_ID'")
	if err != nil {
		t.Fatal(err)
	}
	local, err := pgx.CollectRows(rows, pgx.RowTo[string])
	var all int
	if err == nil {
		err = rc.QueryRow(ctx, "SELECT count(*) FROM aurora_replica_status()").Scan(&all)
	}
	if err != nil || !slices.Equal(local, secondary.Servers) || all != len(local) {
		t.Errorf("aurora_replica_status() on %s: %v of %d, %v; want %v, none the writer", reader, local, all, err, secondary.Servers)
	}
	var rpo int64
	if !waitFor(ctx, 5*time.Second, func() bool {
		regions, err := globalRegions(ctx, rc)
		if err != nil || len(regions) != 2 || regions[1].RPO == nil {
			return false
		}
		rpo = *regions[1].RPO
		return rpo >= lag.Milliseconds()/2
	}) || rpo > (lag+time.Second).Milliseconds() {
		t.Errorf("rpo_lag_in_msec of %s = %d; want about %d", secondary.Name, rpo, lag.Milliseconds())
	}
	inst, err := globalInstances(ctx, rc)
	if err != nil || len(inst) != 4 || inst[0].ID != writer || inst[3].Region != secondary.Name ||
		inst[3].Lag == nil || *inst[3].Lag < float32(lag.Milliseconds()/2) {
		t.Errorf("aurora_global_db_instance_status() on %s: %+v, %v", reader, inst, err)
	}
	var owner bool
	if err := rc.QueryRow(ctx, `SELECT bool_and(r.rolsuper) FROM pg_proc p JOIN pg_roles r ON r.oid = p.proowner
		WHERE p.proname IN ('aurora_global_db_instance_status', 'aurora_global_db_status') AND p.pronamespace = 'pg_catalog'::regnamespace`).Scan(&owner); err != nil || !owner {
		t.Errorf("the status functions owned by a superuser: %v, %v", owner, err)
	}
}

// testGlobalSwitchover: a managed switchover loses no acknowledged write;
// the control pool, whose connections went back to the old writer (a
// secondary now) while its cached answer named it, keeps failing with
// 25006 after the DNS moved, until it is reset.
func testGlobalSwitchover(t *testing.T, g *failovertest.Global, ttl time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	primary, secondary := roles(g)
	writer, head := primary.Servers[0], secondary.Servers[0]
	w, pool, stop := startWriter(ctx, t, g, "t_switchover")
	if !waitFor(ctx, 5*time.Second, func() bool { return len(w.ackedIDs()) >= 5 }) {
		t.Fatal("the control pool does not write")
	}
	started := time.Now()
	res, err := g.Switchover(ctx, failovertest.GlobalScenario{DNSLag: 500 * time.Millisecond})
	logEvents(t, started, res.Events)
	if err != nil {
		t.Fatal(err)
	}
	if res.NewWriter != head || res.NewRegion != secondary.Name || g.Writer() != head || g.WriterRegion() != secondary.Name {
		t.Fatalf("result %+v; writer %s in %s", res, g.Writer(), g.WriterRegion())
	}
	var names []string
	for _, e := range res.Events {
		names = append(names, e.Name)
	}
	want := []string{failovertest.EventWritesBlocked, failovertest.EventSynced, failovertest.EventWriterDown, failovertest.EventPromoted,
		failovertest.EventDemoted, failovertest.EventTopology, failovertest.EventDNS}
	if !slices.Equal(names, want) {
		t.Errorf("events %v, want %v", names, want)
	}
	blocked, _ := res.At(failovertest.EventWritesBlocked)
	moved, _ := res.At(failovertest.EventDNS)
	// The control bites: its connections went back to the old writer, a
	// secondary now, and stay there after the DNS moved and its cache
	// expired.
	if !waitFor(ctx, 5*time.Second, func() bool {
		_, n := w.count(moved.Add(ttl), time.Now(), "25006")
		return n > 0
	}) {
		t.Error("the plain pool wrote nowhere read-only after the DNS moved")
	}
	_, ro := w.count(blocked, time.Now(), "25006")
	_, failed := w.count(blocked, time.Now(), "*")
	t.Logf("plain pgxpool: %d writes failed from the block on, %d with 25006", failed, ro)
	pool.Reset() // what a pool must do to catch up
	resumed := time.Now()
	if !waitFor(ctx, 5*time.Second, func() bool { n, _ := w.count(resumed, time.Now(), ""); return n > 0 }) {
		t.Error("no write acknowledged after the pool's reset")
	}
	var id string
	if err := pool.QueryRow(ctx, "SELECT aurora_db_instance_identifier()").Scan(&id); err != nil || id != head {
		t.Errorf("the reset pool writes to %q, %v; want %s", id, err, head)
	}
	stop()

	// No acknowledged write is lost.
	committed, err := g.CommittedIDs(ctx, "t_switchover")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range w.ackedIDs() {
		if _, ok := slices.BinarySearch(committed, id); !ok {
			t.Errorf("acknowledged write %d is missing on %s", id, head)
		}
	}
	// The old writer is a secondary: read-only.
	if _, err := gconn(ctx, t, g, writer).Exec(ctx, "INSERT INTO t_switchover VALUES (-2)"); !readOnlyErr(err) {
		t.Errorf("a write on the old writer %s: %v; want 25006", writer, err)
	}
	if got := g.Resolver.CNAME(g.GlobalEndpoint); got != secondary.ClusterEndpoint {
		t.Errorf("CNAME of %s = %q, want %s", g.GlobalEndpoint, got, secondary.ClusterEndpoint)
	}
	checkWriterEverywhere(ctx, t, g, head, secondary.Name)
}

// testGlobalFailover: a failover with data loss: the writes the old
// primary acknowledged in its last lag are lost and listed; the control
// pool's writes fail until the DNS moves and its cache expires (its
// connections died with the Region), then land on the new writer; the
// old Region comes back as the secondary.
func testGlobalFailover(t *testing.T, g *failovertest.Global, lag time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	primary, secondary := roles(g)
	writer, head := primary.Servers[0], secondary.Servers[0]
	lag *= 2
	g.SetLag(lag) // more to lose
	w, _, stop := startWriter(ctx, t, g, "t_failover")
	// Writing for more than the lag (the first writes on the secondary
	// already), and the lag measured.
	conn, hc := gconn(ctx, t, g, writer), gconn(ctx, t, g, head)
	if !waitFor(ctx, 10*time.Second, func() bool {
		var n int
		regions, err := globalRegions(ctx, conn)
		return err == nil && len(regions) == 2 && regions[1].RPO != nil && *regions[1].RPO >= lag.Milliseconds()/2 &&
			hc.QueryRow(ctx, "SELECT count(*) FROM t_failover").Scan(&n) == nil && n >= 20
	}) {
		t.Fatal("no writes on the secondary, or no lag measured")
	}
	started := time.Now()
	res, err := g.Failover(ctx, failovertest.GlobalScenario{Detect: 200 * time.Millisecond, DNSLag: 500 * time.Millisecond, Audit: "t_failover", Rejoin: true})
	logEvents(t, started, res.Events)
	if err != nil {
		t.Fatal(err)
	}
	down, _ := res.At(failovertest.EventRegionDown)
	moved, _ := res.At(failovertest.EventDNS)
	t.Logf("rpo_lag_in_msec before the failure %v; %d rows lost: %v", res.RPOLag, len(res.Lost), res.Lost)
	if res.NewWriter != head || g.Writer() != head || res.RPOLag < lag/2 || res.RPOLag > lag+time.Second {
		t.Errorf("result %+v", res)
	}

	// Writes fail until the DNS moved and the cache expired, then land on
	// the new writer.
	if !waitFor(ctx, 5*time.Second, func() bool { n, _ := w.count(moved, time.Now(), ""); return n > 0 }) {
		t.Error("no write acknowledged after the DNS moved")
	}
	stop()
	if acked, failed := w.count(down, moved, "*"); acked != 0 || failed == 0 {
		t.Errorf("between the outage and the DNS move: %d writes acknowledged, %d failed; want none, some", acked, failed)
	}

	// What the old primary acknowledged in its last lag is lost, and
	// listed: the last writes before the outage, not the first.
	committed, err := g.CommittedIDs(ctx, "t_failover")
	if err != nil {
		t.Fatal(err)
	}
	var lostAcked, kept []int64
	for _, id := range w.ackedIDs() {
		if _, ok := slices.BinarySearch(committed, id); ok {
			kept = append(kept, id)
			continue
		}
		lostAcked = append(lostAcked, id)
		if _, listed := slices.BinarySearch(res.Lost, id); !listed {
			t.Errorf("acknowledged write %d is lost but not listed", id)
		}
	}
	if len(lostAcked) == 0 || len(kept) == 0 || lostAcked[0] < kept[0] {
		t.Errorf("acknowledged writes lost %v, kept %d from %v; want the last ones lost", lostAcked, len(kept), kept[:min(len(kept), 1)])
	}
	for _, id := range res.Lost {
		if _, ok := slices.BinarySearch(committed, id); ok {
			t.Errorf("listed as lost, %d is on the new writer", id)
		}
	}
	t.Logf("%d acknowledged writes lost, %d kept", len(lostAcked), len(kept))

	// The old Region is back as the secondary.
	if _, err := gconn(ctx, t, g, writer).Exec(ctx, "INSERT INTO t_failover VALUES (-2)"); !readOnlyErr(err) {
		t.Errorf("a write on the old writer %s: %v; want 25006", writer, err)
	}
	checkWriterEverywhere(ctx, t, g, head, secondary.Name)
}
