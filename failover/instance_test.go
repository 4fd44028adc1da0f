package failover_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/fakes/failovertest"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestInstanceModeConfig: an invalid instance mode is a *ConfigError, in
// failover.Config (holdfast.New) and in holdfast.PoolInstanceMode
// (Configure).
func TestInstanceModeConfig(t *testing.T) {
	t.Parallel()
	var ce *holdfast.ConfigError
	if _, err := holdfast.New(holdfast.WithFailover(failover.Config{InstancePools: 2})); !errors.As(err, &ce) || ce.Field != "WithFailover" ||
		!strings.Contains(err.Error(), "InstancePools") {
		t.Errorf("New(WithFailover(InstancePools: 2)) = %v; want a *ConfigError naming InstancePools", err)
	}
	f, err := holdfast.New(holdfast.WithFailover(failover.Config{}))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := pgxpool.ParseConfig("postgres://u@orders-1.abc123.us-east-1.rds.amazonaws.com/db")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Configure(cfg, holdfast.PoolInstanceMode(-1)); !errors.As(err, &ce) || ce.Field != "PoolInstanceMode" {
		t.Errorf("Configure(PoolInstanceMode(-1)) = %v; want a *ConfigError for PoolInstanceMode", err)
	}
	if err := f.Configure(cfg, holdfast.PoolInstanceMode(failover.FollowWriter)); err != nil {
		t.Errorf("Configure(PoolInstanceMode(FollowWriter)) = %v", err)
	}
}

// TestInstancePools plays a crash of the writer under a write workload by
// a pool on the writer's instance endpoint. With FollowWriter the pool
// follows the writer role: writes resume on the new writer, by address
// (the instance endpoint's DNS still names the old writer, back as a
// reader), every row written after the promotion is on the new writer,
// no acknowledged write is lost, and new connections after a Reset go to
// the new writer too. With Pinned (the default, the control) the pool
// reconnects to its instance, a reader after the failover, where writes
// fail with 25006.
func TestInstancePools(t *testing.T) {
	for _, tt := range []struct {
		name string
		mode failover.InstanceMode
	}{{"follow-writer", failover.FollowWriter}, {"pinned", failover.Pinned}} {
		mode := tt.mode
		t.Run(tt.name, func(t *testing.T) {
			c := failovertest.StartTest(t, failovertest.Config{TTL: time.Second})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			f := newFactory(t, holdfast.WithFailover(failover.Config{InstancePools: mode}))
			oldID := c.Writer()
			host := c.InstanceEndpoint(oldID)
			pool := poolOn(ctx, t, f, c, host)
			// The server that ran each insert, computed there.
			if _, err := pool.Exec(ctx, "CREATE TABLE instance_writes (id bigint PRIMARY KEY, server text NOT NULL DEFAULT current_setting('holdfast.server_id'))"); err != nil {
				t.Fatal(err)
			}
			m := f.Failover(pool)
			if m == nil {
				t.Fatal("Factory.Failover: no monitor for the pool")
			}
			var readOnly atomic.Int64 // 25006
			w := &writer{errs: map[string]int{}}
			wctx, wcancel := context.WithCancel(ctx)
			wg := w.runExec(wctx, func(ctx context.Context, sql string, args ...any) error {
				_, err := pool.Exec(ctx, sql, args...)
				if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == "25006" {
					readOnly.Add(1)
				}
				return err
			}, "instance_writes", 4)
			defer func() { wcancel(); wg.Wait() }()
			if !w.steady(ctx, m) {
				t.Fatal("the monitor never read the topology")
			}
			res, err := c.Failover(ctx, failovertest.Scenario{Kind: failovertest.Crash, Detect: 300 * time.Millisecond,
				DNSLag: time.Second, Rejoin: true}) // returns with the old writer back as a reader
			if err != nil {
				t.Fatal(err)
			}
			promoted, _ := res.At(failovertest.EventPromoted)
			back := lastEvent(res, failovertest.EventBackAsReader)
			newID := res.NewWriter
			if mode == failover.Pinned {
				// The control: the pool's connections reach its instance,
				// now a reader, and its writes fail with 25006.
				if !waitFor(ctx, func() bool { return readOnly.Load() >= 10 }) {
					t.Fatalf("control: %d writes failed with 25006 after the failover; want the pinned pool on a reader (errors %v)", readOnly.Load(), w.errs)
				}
				wcancel()
				wg.Wait()
				var sid string
				if err := pool.QueryRow(ctx, "SELECT current_setting('holdfast.server_id')").Scan(&sid); err != nil || sid != oldID {
					t.Errorf("control: the pinned pool reaches %q (%v); want its instance %s", sid, err, oldID)
				}
				t.Logf("pinned: %d writes acknowledged, %d failed (%d with 25006) %v; the pool on %s reaches %s, a reader",
					len(w.acked), w.failed, readOnly.Load(), w.errs, oldID, sid)
				if l := lost(ctx, t, c, "instance_writes", w.acked); len(l) > 0 {
					t.Errorf("%d acknowledged writes lost: %v", len(l), l)
				}
				return
			}
			// FollowWriter: writes after the old writer is back as a
			// reader, and after new connections (Reset) by the instance
			// endpoint, whose DNS names the old writer.
			if !waitFor(ctx, func() bool { _, ok := w.firstAckAfter(back.Add(200 * time.Millisecond)); return ok }) {
				t.Fatalf("no write after the old writer was back as a reader (errors %v)", w.errs)
			}
			reset := time.Now()
			pool.Reset()
			if !waitFor(ctx, func() bool { _, ok := w.firstAckAfter(reset.Add(200 * time.Millisecond)); return ok }) {
				t.Fatalf("no write after the pool's reset (errors %v)", w.errs)
			}
			wcancel()
			wg.Wait()
			st := m.Status()
			resumed, _ := w.firstAckAfter(promoted)
			t.Logf("follow-writer: %d writes acknowledged, %d failed (%d with 25006) %v; longest pause %v; wrote again %s (old writer back as a reader %s); monitor %s → %s, routing %s",
				len(w.acked), w.failed, readOnly.Load(), w.errs, w.maxPause, after(resumed, promoted), after(back, promoted), oldID, st.Writer, st.Routing)
			if d := resumed.Sub(promoted); d > 3*time.Second {
				t.Errorf("writes resumed %v after the promotion; want within 3 s", d)
			}
			if w.maxPause > 5*time.Second {
				t.Errorf("longest pause %v; want within 5 s", w.maxPause)
			}
			if n := readOnly.Load(); n > 0 {
				t.Errorf("%d writes failed with 25006: a connection of the pool reached a reader", n)
			}
			if st.Writer != newID || st.Routing != "normal" {
				t.Errorf("monitor: writer %q, routing %q; want %s, normal (an instance endpoint's DNS is not the writer's)", st.Writer, st.Routing, newID)
			}
			if l := lost(ctx, t, c, "instance_writes", w.acked); len(l) > 0 {
				t.Errorf("%d acknowledged writes lost: %v", len(l), l)
			}
			// Every row by its server: the old writer before the
			// failover, the new one after; none anywhere else.
			ackedAt := map[int64]time.Time{}
			w.mu.Lock()
			for i, id := range w.acked {
				ackedAt[id] = w.ackedAt[i]
			}
			w.mu.Unlock()
			rows, err := pool.Query(ctx, "SELECT id, server FROM instance_writes")
			if err != nil {
				t.Fatal(err)
			}
			by := map[string]int{}
			for rows.Next() {
				var id int64
				var server string
				if err := rows.Scan(&id, &server); err != nil {
					t.Fatal(err)
				}
				by[server]++
				if at, ok := ackedAt[id]; ok && at.After(promoted) && server != newID {
					t.Errorf("row %d acknowledged %s after the promotion was written by %s; want the new writer %s", id, at.Sub(promoted), server, newID)
				}
				if server != oldID && server != newID {
					t.Errorf("row %d written by %s", id, server)
				}
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			t.Logf("rows by server: %v", by)
			if by[newID] == 0 {
				t.Errorf("no row on the new writer %s: %v", newID, by)
			}
			if sid := serverIDOf(ctx, t, pool); sid != newID {
				t.Errorf("a connection by %s after the failover reaches %s; want the new writer %s", host, sid, newID)
			}
		})
	}
}

// serverIDOf returns the simulator's id of the server a connection of
// pool reaches.
func serverIDOf(ctx context.Context, t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var id string
	if err := pool.QueryRow(ctx, "SELECT current_setting('holdfast.server_id')").Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestInstancePoolsReader: a pool on a reader's instance endpoint with
// FollowWriter goes to the writer (it asked for the writer role, as the
// AWS wrappers' strict-writer); with Pinned it stays on the reader.
func TestInstancePoolsReader(t *testing.T) {
	c := failovertest.StartTest(t, failovertest.Config{TTL: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reader := standbyOf(c)
	f := newFactory(t)
	follow, pinned := poolOnWith(ctx, t, f, c, c.InstanceEndpoint(reader), holdfast.PoolInstanceMode(failover.FollowWriter)),
		poolOn(ctx, t, f, c, c.InstanceEndpoint(reader))
	if _, err := follow.Exec(ctx, "CREATE TABLE reader_follow (id bigint)"); err != nil {
		t.Fatalf("a write by the FollowWriter pool on the reader %s: %v", reader, err)
	}
	if sid := serverIDOf(ctx, t, follow); sid != c.Writer() {
		t.Errorf("FollowWriter pool on reader %s reaches %s; want the writer %s", reader, sid, c.Writer())
	}
	if sid := serverIDOf(ctx, t, pinned); sid != reader {
		t.Errorf("Pinned pool on reader %s reaches %s; want the reader", reader, sid)
	}
}

// poolOnWith is poolOn with pool options.
func poolOnWith(ctx context.Context, t *testing.T, f *holdfast.Factory, c *failovertest.Cluster, host string, opts ...holdfast.PoolOption) *pgxpool.Pool {
	t.Helper()
	cfg, err := c.PoolConfig(host)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := f.NewPool(ctx, cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}
