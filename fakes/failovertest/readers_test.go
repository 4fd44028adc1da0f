package failovertest_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/fakes/failovertest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

func TestConfigErrors(t *testing.T) {
	ctx := context.Background()
	for _, cfg := range []failovertest.Config{
		{Replicas: -1},
		{Replicas: failovertest.MaxReplicas + 1},
		{Replicas: 3, ReplicaHosts: []string{"127.0.0.21"}},
		{Engine: "mysql"},
	} {
		c, err := failovertest.Start(ctx, cfg)
		var ce *failovertest.ConfigError
		if !errors.As(err, &ce) {
			if c != nil {
				_ = c.Close()
			}
			t.Errorf("Start(%+v) = %v, want a *ConfigError", cfg, err)
		}
	}
}

// TestReaders plays the reader simulator on one cluster of three readers:
// the reader endpoint's answers, lag, a reader added and removed, a crash
// and a hang, every reader removed.
func TestReaders(t *testing.T) {
	began := time.Now()
	c := failovertest.StartTest(t, failovertest.Config{Replicas: 3, Seed: 1})
	t.Logf("3 readers started in %v (SingleIP %v)", time.Since(began).Round(time.Millisecond), c.SingleIP)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	writer := c.Writer()
	readers := c.Readers()
	if len(readers) != 3 || slices.Contains(readers, writer) {
		t.Fatalf("Readers() = %v with writer %s, want 3 others", readers, writer)
	}
	exec(t, c, c.Addr(writer), "CREATE TABLE r (id bigint PRIMARY KEY); CREATE ROLE app LOGIN")
	inTopology := func(on, id string) bool {
		t.Helper()
		rows, err := c.Topology(ctx, on)
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(rows, func(r failovertest.Replica) bool { return r.ServerID == id })
	}
	for _, id := range readers {
		if !inTopology(writer, id) || !inTopology(id, id) {
			t.Fatalf("%s is not in the topology", id)
		}
	}

	t.Run("spread", func(t *testing.T) {
		// The cache off: each lookup answers one reader, at random.
		uncached := c.Resolver.Cached(-1)
		seen := map[string]int{}
		for range 60 {
			addrs, err := uncached.Lookup(ctx, c.ReaderEndpoint)
			if err != nil || len(addrs) != 1 {
				t.Fatalf("lookup: %v, %v; want one address", addrs, err)
			}
			seen[addrs[0]]++
		}
		for _, id := range readers {
			if seen[c.Addr(id)] < 5 {
				t.Errorf("%s answered %d of 60 lookups: %v", id, seen[c.Addr(id)], seen)
			}
		}
		if len(seen) != 3 {
			t.Errorf("answers %v, want the 3 readers only", seen)
		}
	})

	t.Run("sticky", func(t *testing.T) {
		// The cache on: one answer per TTL, so a pool that opens its
		// connections at once piles them on one reader.
		cfg, err := c.PoolConfig(c.ReaderEndpoint)
		if err != nil {
			t.Fatal(err)
		}
		cfg.ConnConfig.User = "app"
		cfg.ConnConfig.LookupFunc = c.Resolver.Cached(time.Minute).Lookup
		cfg.MaxConns = 6
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		var held []*pgxpool.Conn
		for range 6 {
			conn, err := pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, conn)
		}
		counts := map[string]int{}
		for _, id := range readers {
			if counts[id], err = c.Connections(ctx, id, "app"); err != nil {
				t.Fatal(err)
			}
		}
		for _, conn := range held {
			conn.Release()
		}
		var on []int
		for _, n := range counts {
			if n > 0 {
				on = append(on, n)
			}
		}
		if !slices.Equal(on, []int{6}) {
			t.Errorf("connections per reader %v, want all 6 on one", counts)
		}
	})

	t.Run("lag", func(t *testing.T) {
		id := readers[0]
		const lag = 2 * time.Second
		if err := c.SetLag(ctx, id, lag); err != nil {
			t.Fatal(err)
		}
		lagOf := func(on string) time.Duration {
			t.Helper()
			rows, err := c.Topology(ctx, on)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				if r.ServerID == id {
					return r.Lag
				}
			}
			t.Fatalf("%s not in %s's topology", id, on)
			return 0
		}
		if got := lagOf(writer); got != lag {
			t.Errorf("replica_lag_in_msec of %s = %v, want %v", id, got, lag)
		}
		r, err := pgx.Connect(ctx, c.DSN(c.Addr(id)))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close(context.Background())
		exec(t, c, c.Addr(writer), "INSERT INTO r VALUES (1)")
		written := time.Now()
		visible := func() bool {
			var n int
			if err := r.QueryRow(ctx, "SELECT count(*) FROM r WHERE id = 1").Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n == 1
		}
		if visible() {
			t.Fatalf("the row is visible on %s at once, lag %v", id, lag)
		}
		if !waitFor(ctx, 10*time.Second, visible) {
			t.Fatalf("the row never reached %s", id)
		}
		if took := time.Since(written); took < lag/2 {
			t.Errorf("the row reached %s after %v, lag %v", id, took, lag)
		} else {
			t.Logf("the row reached %s after %v (lag %v)", id, took, lag)
		}
		if err := c.SetLag(ctx, id, 0); err != nil {
			t.Fatal(err)
		}
		if got := lagOf(id); got != 0 {
			t.Errorf("after SetLag 0, replica_lag_in_msec of %s = %v", id, got)
		}
		exec(t, c, c.Addr(writer), "INSERT INTO r VALUES (2)")
		if !waitFor(ctx, time.Second, func() bool {
			var n int
			return r.QueryRow(ctx, "SELECT count(*) FROM r WHERE id = 2").Scan(&n) == nil && n == 1
		}) {
			t.Errorf("after SetLag 0, a row took over a second to reach %s", id)
		}
	})

	t.Run("add and remove", func(t *testing.T) {
		id, err := c.AddReader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(c.Readers(), id) || !inTopology(writer, id) || !inTopology(id, id) || !inTopology(readers[1], id) {
			t.Fatalf("%s is not in Readers() %v or in the topology", id, c.Readers())
		}
		if !slices.Contains(c.Resolver.Addrs(c.ReaderEndpoint), c.Addr(id)) {
			t.Errorf("%s (%s) is not behind the reader endpoint: %v", id, c.Addr(id), c.Resolver.Addrs(c.ReaderEndpoint))
		}
		if got, err := c.Resolver.Lookup(ctx, c.InstanceEndpoint(id)); err != nil || !slices.Equal(got, []string{c.Addr(id)}) {
			t.Errorf("instance endpoint of %s: %v, %v", id, got, err)
		}
		conn, err := pgx.Connect(ctx, c.DSN(c.Addr(id)))
		if err != nil {
			t.Fatal(err)
		}
		var n int
		err = conn.QueryRow(ctx, "SELECT count(*) FROM r").Scan(&n)
		conn.Close(context.Background())
		if err != nil || n != 2 {
			t.Errorf("reading on %s: %d rows, %v; want 2", id, n, err)
		}

		addr := c.Addr(id)
		if err := c.RemoveReader(ctx, id); err != nil {
			t.Fatal(err)
		}
		if slices.Contains(c.Readers(), id) || inTopology(writer, id) || inTopology(readers[0], id) {
			t.Errorf("%s is still in Readers() %v or in the topology", id, c.Readers())
		}
		if slices.Contains(c.Resolver.Addrs(c.ReaderEndpoint), addr) {
			t.Errorf("%s is still behind the reader endpoint", id)
		}
		var de *net.DNSError
		if _, err := c.Resolver.Lookup(ctx, c.InstanceEndpoint(id)); !errors.As(err, &de) || !de.IsNotFound {
			t.Errorf("instance endpoint of a removed reader: %v, want NXDOMAIN", err)
		}
		exec(t, c, c.Addr(writer), "INSERT INTO r VALUES (3)") // the writer still commits
	})

	t.Run("crash and hang", func(t *testing.T) {
		crashed, hung := readers[2], readers[1]
		if err := c.CrashReader(ctx, crashed); err != nil {
			t.Fatal(err)
		}
		if conn, err := pgx.Connect(ctx, c.DSN(c.Addr(crashed), "connect_timeout=2")); err == nil {
			conn.Close(context.Background())
			t.Errorf("connected to %s, which crashed", crashed)
		}
		if !slices.Contains(c.Readers(), crashed) || !inTopology(writer, crashed) ||
			!slices.Contains(c.Resolver.Addrs(c.ReaderEndpoint), c.Addr(crashed)) {
			t.Errorf("%s left the topology or the DNS at its crash", crashed)
		}
		if err := c.HangReader(ctx, hung); err != nil {
			t.Fatal(err)
		}
		hctx, hcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		conn, err := pgx.Connect(hctx, c.DSN(c.Addr(hung)))
		hcancel()
		if err == nil {
			conn.Close(context.Background())
			t.Errorf("connected to %s, which hangs", hung)
		}
		exec(t, c, c.Addr(writer), "INSERT INTO r VALUES (4)") // one standby left: commits go on
	})

	t.Run("no reader", func(t *testing.T) {
		for _, id := range readers {
			if err := c.RemoveReader(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		if got := c.Readers(); len(got) != 0 {
			t.Errorf("Readers() = %v, want none", got)
		}
		if got, err := c.Resolver.Lookup(ctx, c.ReaderEndpoint); err != nil || !slices.Equal(got, []string{c.Addr(writer)}) {
			t.Errorf("reader endpoint with no reader: %v, %v; want the writer %s", got, err, c.Addr(writer))
		}
		exec(t, c, c.Addr(writer), "INSERT INTO r VALUES (5)") // alone: no standby to wait for
		id, err := c.AddReader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		exec(t, c, c.Addr(writer), "INSERT INTO r VALUES (6)")
		if got := c.Readers(); !slices.Equal(got, []string{id}) {
			t.Errorf("Readers() = %v, want [%s]", got, id)
		}
	})

	t.Run("failover to a lagging reader", func(t *testing.T) {
		// A lagging reader still acknowledges commits (it flushes at once)
		// and applies everything at its promotion: no acknowledged commit
		// is lost.
		other, err := c.AddReader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		lagging := c.Readers()[0]
		if err := c.SetLag(ctx, lagging, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		for i := 10; i < 20; i++ {
			exec(t, c, c.Addr(writer), "INSERT INTO r VALUES ($1)", i)
		}
		res, err := c.Failover(ctx, failovertest.Scenario{Kind: failovertest.Crash, Target: lagging})
		if err != nil {
			t.Fatal(err)
		}
		if res.NewWriter != lagging {
			t.Fatalf("promoted %s, want %s", res.NewWriter, lagging)
		}
		ids, err := c.CommittedIDs(ctx, "r")
		if err != nil {
			t.Fatal(err)
		}
		for i := int64(10); i < 20; i++ {
			if !slices.Contains(ids, i) {
				t.Errorf("row %d, acknowledged before the failover, is lost: %v", i, ids)
			}
		}
		if took := time.Since(res.Events[0].At); took > 4*time.Second {
			t.Errorf("the failover took %v: the promotion waited for the apply delay", took)
		}
		if got := c.Readers(); !slices.Contains(got, other) {
			t.Errorf("Readers() = %v, without %s", got, other)
		}
		exec(t, c, c.Addr(c.Writer()), "INSERT INTO r VALUES (20)")
	})
}

// waitFor polls cond every 10 ms until it holds or d passes.
func waitFor(ctx context.Context, d time.Duration, cond func() bool) bool {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		if cond() {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(10 * time.Millisecond):
		}
	}
}
