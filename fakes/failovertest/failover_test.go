package failovertest_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/fakes/failovertest"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// start starts a cluster with a 100 ms DNS cache and a table t (id).
func start(t *testing.T) *failovertest.Cluster {
	t.Helper()
	c := failovertest.StartTest(t, failovertest.Config{TTL: 100 * time.Millisecond})
	exec(t, c, c.Addr(c.Writer()), "CREATE TABLE t (id bigint PRIMARY KEY)")
	return c
}

func exec(t *testing.T, c *failovertest.Cluster, addr, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.DSN(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatal(err)
	}
}

func TestSyncReplicationHolds(t *testing.T) {
	c := start(t)
	ids := c.ServerIDs()
	writer, replica := c.Addr(ids[0]), c.Addr(ids[1])
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	w, err := pgx.Connect(ctx, c.DSN(writer))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(context.Background())
	r, err := pgx.Connect(ctx, c.DSN(replica))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())

	var state string
	if err := w.QueryRow(ctx, "SELECT sync_state FROM pg_stat_replication").Scan(&state); err != nil || state != "quorum" {
		t.Fatalf("pg_stat_replication.sync_state = %q, %v; want quorum (ANY 1)", state, err)
	}
	// A commit returns once the replica has flushed it: its WAL position
	// is then at least the commit's.
	for i := range 20 {
		var lsn string
		if err := w.QueryRow(ctx, "INSERT INTO t VALUES ($1) RETURNING pg_current_wal_insert_lsn()::text", i).Scan(&lsn); err != nil {
			t.Fatal(err)
		}
		var flushed bool
		if err := r.QueryRow(ctx, "SELECT pg_last_wal_receive_lsn() >= $1::pg_lsn", lsn).Scan(&flushed); err != nil {
			t.Fatal(err)
		}
		if !flushed {
			t.Fatalf("row %d: commit returned before the replica flushed it", i)
		}
	}
	var recovering bool
	if err := r.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&recovering); err != nil || !recovering {
		t.Fatalf("replica pg_is_in_recovery = %v, %v", recovering, err)
	}
	_, err = r.Exec(ctx, "INSERT INTO t VALUES (-1)")
	if pe := (*pgconn.PgError)(nil); !errors.As(err, &pe) || pe.Code != "25006" {
		t.Fatalf("write on the replica: %v; want 25006", err)
	}
	// The replica reads the control table too.
	topo, err := c.Topology(ctx, ids[1])
	if err != nil || len(topo) != 2 || topo[0].SessionID != failovertest.WriterSessionID {
		t.Fatalf("aurora_replica_status() on the replica = %+v, %v", topo, err)
	}
}

// writer writes ids 1, 2, … through a pool on the cluster endpoint until
// stopped, recording which commits were acknowledged and how many failed.
type writer struct {
	mu       sync.Mutex
	acked    []int64
	failed   []time.Time
	failures atomic.Int64
}

// failedBetween reports whether a write failed between a and b.
func (w *writer) failedBetween(a, b time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.ContainsFunc(w.failed, func(t time.Time) bool { return t.After(a) && t.Before(b) })
}

func (w *writer) run(ctx context.Context, pool *pgxpool.Pool) {
	for id := int64(1); ctx.Err() == nil; id++ {
		wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		_, err := pool.Exec(wctx, "INSERT INTO t VALUES ($1)", id)
		cancel()
		if err != nil {
			w.failures.Add(1)
			w.mu.Lock()
			w.failed = append(w.failed, time.Now())
			w.mu.Unlock()
			time.Sleep(20 * time.Millisecond)
			continue
		}
		w.mu.Lock()
		w.acked = append(w.acked, id)
		w.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
}

func TestFailover(t *testing.T) {
	for _, kind := range failovertest.Kinds() {
		t.Run(string(kind), func(t *testing.T) {
			c := start(t)
			first := c.Writer()
			ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
			defer cancel()

			cfg, err := c.PoolConfig(c.ClusterEndpoint, "connect_timeout=1")
			if err != nil {
				t.Fatal(err)
			}
			pool, err := pgxpool.NewWithConfig(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			var w writer
			wctx, stop := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { defer close(done); w.run(wctx, pool) }()
			time.Sleep(200 * time.Millisecond)

			s := failovertest.Scenario{Kind: kind, Detect: 200 * time.Millisecond,
				DNSLag: time.Second, HangFor: 1500 * time.Millisecond, Rejoin: true}
			started := time.Now()
			res, err := c.Failover(ctx, s)
			if err != nil {
				stop()
				<-done
				t.Fatal(err)
			}
			for _, e := range res.Events {
				t.Logf("%6.2fs %-26s %s", e.At.Sub(started).Seconds(), e.Name, e.Server)
			}
			// Writes go through again once the DNS moved and the cache expired.
			time.Sleep(300 * time.Millisecond)
			w.mu.Lock()
			n := len(w.acked)
			w.mu.Unlock()
			time.Sleep(500 * time.Millisecond)
			stop()
			<-done
			if len(w.acked) == n {
				t.Errorf("no write acknowledged after the failover")
			}
			// The simulation bites: between the promotion and the DNS
			// move, the cluster endpoint still leads to the old writer.
			promoted, _ := res.At(failovertest.EventPromoted)
			moved, _ := res.At(failovertest.EventDNS)
			if !w.failedBetween(promoted, moved) {
				t.Errorf("the pool saw no failure during the DNS lag (%d failures in all)", w.failures.Load())
			}
			t.Logf("acknowledged %d writes, %d failed", len(w.acked), w.failures.Load())

			want := res.NewWriter
			if kind == failovertest.Failback {
				want = first
			} else if want == first {
				t.Errorf("new writer %s = old writer", want)
			}
			if got := c.Writer(); got != want {
				t.Errorf("writer = %s, want %s", got, want)
			}
			if got := c.Resolver.Addrs(c.ClusterEndpoint); !slices.Equal(got, []string{c.Addr(want)}) {
				t.Errorf("cluster endpoint resolves to %v, want %s", got, c.Addr(want))
			}
			topo, err := c.Topology(ctx, want)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range topo {
				if (r.SessionID == failovertest.WriterSessionID) != (r.ServerID == want) {
					t.Errorf("aurora_replica_status() on %s: %+v", want, topo)
				}
			}
			exec(t, c, c.Addr(want), "INSERT INTO t VALUES (-1)")

			// Every acknowledged write is on the new writer.
			ids, err := c.CommittedIDs(ctx, "t")
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range w.acked {
				if _, ok := slices.BinarySearch(ids, id); !ok {
					t.Errorf("acknowledged write %d is missing on %s", id, want)
				}
			}

			// The old writer is a reader.
			old := res.OldWriter
			if kind == failovertest.Failback {
				old = c.ServerIDs()[1]
			}
			conn, err := pgx.Connect(ctx, c.DSN(c.Addr(old)))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(context.Background())
			_, err = conn.Exec(ctx, "INSERT INTO t VALUES (-2)")
			if pe := (*pgconn.PgError)(nil); !errors.As(err, &pe) || pe.Code != "25006" {
				t.Errorf("write on the old writer %s: %v; want 25006", old, err)
			}
		})
	}
}

// With two replicas, a crash promotes one; the other follows the new writer
// and has every acknowledged write, and the old writer rejoins as a third.
func TestThreeServers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of real servers: skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	c, err := failovertest.Start(ctx, failovertest.Config{Replicas: 2, TTL: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	ids := c.ServerIDs()
	if len(ids) != 3 {
		t.Fatalf("servers %v", ids)
	}
	exec(t, c, c.Addr(ids[0]), "CREATE TABLE t (id bigint PRIMARY KEY)")
	for i := range 50 {
		exec(t, c, c.Addr(ids[0]), "INSERT INTO t VALUES ($1)", i)
	}
	started := time.Now()
	res, err := c.Failover(ctx, failovertest.Scenario{Kind: failovertest.Crash, Detect: 100 * time.Millisecond, DNSLag: 200 * time.Millisecond, Rejoin: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range res.Events {
		t.Logf("%6.2fs %-26s %s", e.At.Sub(started).Seconds(), e.Name, e.Server)
	}
	got, err := c.CommittedIDs(ctx, "t")
	if err != nil || len(got) != 50 {
		t.Fatalf("%d rows on the new writer %s, %v; want 50", len(got), res.NewWriter, err)
	}
	exec(t, c, c.Addr(res.NewWriter), "INSERT INTO t VALUES (100)")
	other := ids[1]
	if other == res.NewWriter {
		other = ids[2]
	}
	conn, err := pgx.Connect(ctx, c.DSN(c.Addr(other)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	for deadline := time.Now().Add(5 * time.Second); n != 1 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM t WHERE id = 100").Scan(&n); err != nil {
			t.Fatal(err)
		}
	}
	if n != 1 {
		t.Fatalf("%s does not follow the new writer %s", other, res.NewWriter)
	}
	if got, want := c.Resolver.Addrs(c.ReaderEndpoint), []string{c.Addr(other), c.Addr(res.OldWriter)}; !slices.Equal(got, want) {
		t.Errorf("reader endpoint %v, want %v", got, want)
	}
	topo, err := c.Topology(ctx, other)
	if err != nil || len(topo) != 3 {
		t.Fatalf("aurora_replica_status() on %s: %+v, %v", other, topo, err)
	}
	for _, r := range topo {
		if (r.SessionID == failovertest.WriterSessionID) != (r.ServerID == res.NewWriter) {
			t.Errorf("aurora_replica_status() on %s: %+v", other, topo)
		}
	}
}

// Where the loopback addresses cannot be bound, every server listens on
// 127.0.0.1 with a port of its own, and the names still lead to them.
func TestSingleIP(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of real servers: skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// 192.0.2.1 (TEST-NET-1) is not a local address.
	c, err := failovertest.Start(ctx, failovertest.Config{WriterHost: "192.0.2.1", TTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	if !c.SingleIP {
		t.Fatal("SingleIP = false")
	}
	res, err := c.Failover(ctx, failovertest.Scenario{Kind: failovertest.Graceful})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := c.PoolConfig(c.ClusterEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var id string
	if err := conn.QueryRow(ctx, "SELECT aurora_db_instance_identifier()").Scan(&id); err != nil || id != res.NewWriter {
		t.Fatalf("cluster endpoint leads to %q, %v; want %s", id, err, res.NewWriter)
	}
}
