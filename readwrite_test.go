package holdfast_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/fakes/failovertest"
	"github.com/holdfast-db/holdfast/internal/conn"
	"github.com/holdfast-db/holdfast/retry"
)

// rwPolicy is the retry policy of the read/write tests' factories:
// generous bounds, as the failover tests'.
var rwPolicy = retry.Policy{MaxAttempts: 10, Multiplier: 2, InitialInterval: 50 * time.Millisecond,
	MaxInterval: 500 * time.Millisecond, MaxElapsed: 10 * time.Second, AttemptTimeout: 2 * time.Second}

// rwFactory returns a factory with rwPolicy, a budget of its own and
// opts, closed when the test ends.
func rwFactory(t *testing.T, opts ...holdfast.Option) *holdfast.Factory {
	t.Helper()
	b, err := retry.NewBudget(retry.DefaultBudget())
	if err != nil {
		t.Fatal(err)
	}
	f, err := holdfast.New(append([]holdfast.Option{holdfast.WithRetryPolicy(rwPolicy), holdfast.WithRetryBudget(b)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

// TestReadWriteConfig: ReaderConfig derives the reader endpoint's config
// from a cluster endpoint's (host, fallbacks, TLS name; an alias to the
// reader's alias), and refuses what names no cluster with a *ConfigError
// that says to pass the reader's config.
func TestReadWriteConfig(t *testing.T) {
	const (
		writer = "orders.cluster-abc123.us-east-1.rds.amazonaws.com"
		reader = "orders.cluster-ro-abc123.us-east-1.rds.amazonaws.com"
	)
	f := rwFactory(t)
	cfg, err := pgxpool.ParseConfig("postgres://app@" + writer + ":5432/app?sslmode=prefer&pool_max_conns=7")
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.TLSConfig.ServerName = writer // as verify-full sets it
	rc, err := f.ReaderConfigForTest(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rc.ConnConfig.Host != reader || rc.ConnConfig.TLSConfig.ServerName != reader {
		t.Errorf("reader host %q, TLS name %q, want %q", rc.ConnConfig.Host, rc.ConnConfig.TLSConfig.ServerName, reader)
	}
	for _, fb := range rc.ConnConfig.Fallbacks {
		if fb.Host != reader {
			t.Errorf("fallback host %q, want %q", fb.Host, reader)
		}
	}
	if rc.MaxConns != 7 || rc.ConnConfig.User != "app" || rc.ConnConfig.Database != "app" {
		t.Errorf("reader config: MaxConns %d, user %q, database %q: want the writer's", rc.MaxConns, rc.ConnConfig.User, rc.ConnConfig.Database)
	}
	if cfg.ConnConfig.Host != writer || cfg.ConnConfig.TLSConfig.ServerName != writer {
		t.Errorf("the writer's config changed: host %q, TLS name %q", cfg.ConnConfig.Host, cfg.ConnConfig.TLSConfig.ServerName)
	}

	// An alias of the cluster endpoint: the reader endpoint's alias.
	fa := rwFactory(t, holdfast.WithFailover(failover.Config{Aliases: map[string]string{
		"db.orders.internal":    writer,
		"ro.db.orders.internal": reader,
	}}))
	acfg, err := pgxpool.ParseConfig("postgres://app@db.orders.internal:5432/app?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	if rc, err := fa.ReaderConfigForTest(acfg); err != nil || rc.ConnConfig.Host != "ro.db.orders.internal" {
		t.Errorf("alias: ReaderConfig = %v, %v, want host ro.db.orders.internal", rc, err)
	}

	for _, host := range []string{reader, "orders-1.abc123.us-east-1.rds.amazonaws.com", "10.0.0.1", "db.orders.internal",
		"orders.cluster-custom-abc123.us-east-1.rds.amazonaws.com"} {
		c, err := pgxpool.ParseConfig("postgres://app@" + host + ":5432/app?sslmode=disable")
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.ReaderConfigForTest(c)
		var ce *holdfast.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, errInvalidConfig) {
			t.Errorf("ReaderConfig(%s) = %v, want a *ConfigError", host, err)
		} else {
			t.Logf("%s: %v", host, err)
		}
	}
	if err := f.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReaderConfigForTest(cfg); !errors.Is(err, errInvalidConfig) {
		t.Errorf("ReaderConfig of a configured config = %v, want a *ConfigError", err)
	}
	ctx := context.Background()
	if _, err := f.NewReadWrite(ctx, nil, nil); !errors.Is(err, errInvalidConfig) {
		t.Errorf("NewReadWrite(nil) = %v, want a *ConfigError", err)
	}
	if _, err := f.NewReadWrite(ctx, rc, rc); !errors.Is(err, errInvalidConfig) {
		t.Errorf("NewReadWrite(cfg, cfg) = %v, want a *ConfigError", err)
	}
	if conn.ReadYourWrites(ctx) || !conn.ReadYourWrites(holdfast.ReadYourWrites(ctx)) {
		t.Error("the engine does not see ReadYourWrites")
	}
}

// where runs SELECT pg_is_in_recovery() and the server's "ip:port" on q.
func where(ctx context.Context, t *testing.T, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (recovery bool, addr string) {
	t.Helper()
	if err := q.QueryRow(ctx, "SELECT pg_is_in_recovery(), host(inet_server_addr()) || ':' || inet_server_port()").Scan(&recovery, &addr); err != nil {
		t.Fatal(err)
	}
	return recovery, addr
}

// rwWaitFor polls done every 10 ms until it is true (true) or ctx ends.
func rwWaitFor(ctx context.Context, done func() bool) bool {
	for !done() {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(10 * time.Millisecond):
		}
	}
	return true
}

// TestReadWrite: on a cluster of a writer and two streaming readers, a
// ReadWrite of one factory with WithFailover sends writes to the writer
// and reads to the readers, its pools share the cluster's monitor, a
// read-only transaction refuses a write with a *ReadOnlyError, a
// ReadYourWrites read sees a write that a lagging reader does not, the
// same works without WithFailover, and through a crash of the writer
// writes resume on the new writer while reads go on.
func TestReadWrite(t *testing.T) {
	c := failovertest.StartTest(t, failovertest.Config{Replicas: 2, Engine: failovertest.Aurora})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	f := rwFactory(t, holdfast.WithFailover(failover.Config{RefreshInterval: 200 * time.Millisecond}))
	cfg, err := c.PoolConfig(c.ClusterEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 4
	rw, err := f.NewReadWrite(ctx, cfg, nil, holdfast.PoolName("orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	readerAddrs := func() []string {
		var out []string
		for _, id := range c.Readers() {
			out = append(out, c.Addr(id))
		}
		return out
	}

	t.Run("pools", func(t *testing.T) {
		if got := rw.Reader().Config().ConnConfig.Host; got != c.ReaderEndpoint {
			t.Errorf("reader pool host %q, want %q", got, c.ReaderEndpoint)
		}
		if w, r := conn.OfPool(rw.Writer()).Name(), conn.OfPool(rw.Reader()).Name(); w != "orders" || r != "orders-ro" {
			t.Errorf("pool names %q, %q, want orders, orders-ro", w, r)
		}
		mw, mr := f.Failover(rw.Writer()), f.Failover(rw.Reader())
		if mw == nil || mw != mr {
			t.Errorf("monitors: writer %p, reader %p, want one, shared", mw, mr)
		}
	})

	t.Run("routing", func(t *testing.T) {
		writer := c.Addr(c.Writer())
		if rec, addr := where(ctx, t, rw.Write()); rec || addr != writer {
			t.Errorf("Write: in recovery %v on %s, want the writer %s", rec, addr, writer)
		}
		if rec, addr := where(ctx, t, rw.Read(holdfast.ReadYourWrites(ctx))); rec || addr != writer {
			t.Errorf("Read(ReadYourWrites): in recovery %v on %s, want the writer %s", rec, addr, writer)
		}
		readers := readerAddrs()
		seen := map[string]int{}
		for range 8 {
			rec, addr := where(ctx, t, rw.Read(ctx))
			if !rec || !slices.Contains(readers, addr) {
				t.Errorf("Read: in recovery %v on %s, want a reader of %v", rec, addr, readers)
			}
			seen[addr]++
		}
		t.Logf("8 reads by Read: per server %v", seen)
		var rec bool
		if err := f.RunTx(ctx, rw.Read(ctx), pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&rec)
		}); err != nil || !rec {
			t.Errorf("ReadTx: in recovery %v, %v; want a reader", rec, err)
		}
		if err := f.RunTx(ctx, rw.Write(), pgx.TxOptions{}, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&rec)
		}); err != nil || rec {
			t.Errorf("WriteTx: in recovery %v, %v; want the writer", rec, err)
		}
	})

	// The table of the next subtests, replayed by every reader.
	if _, err := rw.Write().Exec(ctx, "CREATE TABLE rw (id bigint PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	for _, a := range readerAddrs() {
		ok := rwWaitFor(ctx, func() bool {
			conn, err := pgx.Connect(ctx, c.DSN(a))
			if err != nil {
				return false
			}
			defer conn.Close(context.Background())
			var n int
			return conn.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename = 'rw'").Scan(&n) == nil && n == 1
		})
		if !ok {
			t.Fatalf("reader %s never replayed the table", a)
		}
	}

	t.Run("read-only", func(t *testing.T) {
		runs := 0
		err := f.RunTx(ctx, rw.Read(ctx), pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
			runs++
			_, err := tx.Exec(ctx, "INSERT INTO rw VALUES (1)")
			return err
		})
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "25006" || f.Classify(err).Retryable() {
			t.Fatalf("a write in a read-only transaction: %v, want 25006, not retryable", err)
		}
		if runs != 1 {
			t.Errorf("the function ran %d times, want once", runs)
		}
		t.Logf("a write in a read-only transaction: %v", err)
		var n int
		if err := rw.Write().QueryRow(ctx, "SELECT count(*) FROM rw").Scan(&n); err != nil || n != 0 {
			t.Errorf("rows on the writer: %d, %v; want none", n, err)
		}
	})

	t.Run("read-your-writes", func(t *testing.T) {
		const lag = 2 * time.Second
		for _, id := range c.Readers() {
			if err := c.SetLag(ctx, id, lag); err != nil {
				t.Fatal(err)
			}
		}
		defer func() {
			for _, id := range c.Readers() {
				if err := c.SetLag(ctx, id, 0); err != nil { // returns once caught up
					t.Error(err)
				}
			}
		}()
		if err := f.RunTx(ctx, rw.Write(), pgx.TxOptions{}, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "INSERT INTO rw VALUES (2)")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		written := time.Now()
		count := func(q interface {
			QueryRow(context.Context, string, ...any) pgx.Row
		}) (n int, rec bool) {
			if err := q.QueryRow(ctx, "SELECT count(*), pg_is_in_recovery() FROM rw WHERE id = 2").Scan(&n, &rec); err != nil {
				t.Fatal(err)
			}
			return n, rec
		}
		n, rec := count(rw.Read(ctx))
		ryw := holdfast.ReadYourWrites(ctx)
		m, mrec := count(rw.Read(ryw))
		var k int
		if err := f.RunTx(ryw, rw.Read(ryw), pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, "SELECT count(*) FROM rw WHERE id = 2").Scan(&k)
		}); err != nil {
			t.Fatal(err)
		}
		since := time.Since(written)
		t.Logf("%v after the write (readers lagging %v): Read saw %d row (in recovery %v), Read(ReadYourWrites) %d (in recovery %v), ReadTx(ReadYourWrites) %d",
			since.Round(time.Millisecond), lag, n, rec, m, mrec, k)
		if since >= lag {
			t.Skipf("the reads took %v, beyond the lag: the machine is too slow for this check", since)
		}
		if n != 0 || !rec {
			t.Errorf("Read on a reader lagging %v: %d rows (in recovery %v), want 0 on a reader", lag, n, rec)
		}
		if m != 1 || mrec || k != 1 {
			t.Errorf("ReadYourWrites: Read %d rows (in recovery %v), ReadTx %d rows; want 1 on the writer", m, mrec, k)
		}
		// The reader applies it after its lag.
		if !rwWaitFor(ctx, func() bool { n, _ := count(rw.Read(ctx)); return n == 1 }) {
			t.Error("the reader never applied the write")
		}
	})

	t.Run("without-failover", func(t *testing.T) {
		fp := rwFactory(t)
		pcfg, err := c.PoolConfig(c.ClusterEndpoint)
		if err != nil {
			t.Fatal(err)
		}
		prw, err := fp.NewReadWrite(ctx, pcfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer prw.Close()
		if fp.Failover(prw.Writer()) != nil || fp.Failover(prw.Reader()) != nil {
			t.Error("a monitor without WithFailover")
		}
		if rec, addr := where(ctx, t, prw.Write()); rec || addr != c.Addr(c.Writer()) {
			t.Errorf("Write by DNS: in recovery %v on %s, want the writer", rec, addr)
		}
		if rec, addr := where(ctx, t, prw.Read(ctx)); !rec || !slices.Contains(readerAddrs(), addr) {
			t.Errorf("Read by DNS: in recovery %v on %s, want a reader", rec, addr)
		}
	})

	t.Run("failover", func(t *testing.T) {
		var (
			next, wrote, wfail, rok, rfail atomic.Int64
			mu                             sync.Mutex
			acked                          []int64
			firstOnNew                     time.Time
			newWriter                      atomic.Value // "ip:port" once known
			errs                           = map[string]int{}
		)
		wctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() { // writes, each tried once
				for wctx.Err() == nil {
					id := next.Add(100) // apart from the ids above
					octx, ocancel := context.WithTimeout(wctx, 5*time.Second)
					var addr string
					err := rw.Write().QueryRow(octx, "INSERT INTO rw VALUES ($1) RETURNING host(inet_server_addr()) || ':' || inet_server_port()", id).Scan(&addr)
					ocancel()
					if wctx.Err() != nil {
						return
					}
					mu.Lock()
					if err != nil {
						wfail.Add(1)
						errs["write: "+err.Error()]++
					} else {
						wrote.Add(1)
						acked = append(acked, id)
						if nw, _ := newWriter.Load().(string); nw != "" && addr == nw && firstOnNew.IsZero() {
							firstOnNew = time.Now()
						}
					}
					mu.Unlock()
					if err != nil {
						time.Sleep(20 * time.Millisecond) // a failed client's pacing
					}
				}
			})
			wg.Go(func() { // reads, each tried once
				for wctx.Err() == nil {
					octx, ocancel := context.WithTimeout(wctx, 5*time.Second)
					err := f.RunTx(octx, rw.Read(octx), pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
						var one int
						return tx.QueryRow(octx, "SELECT 1").Scan(&one)
					})
					ocancel()
					if wctx.Err() != nil {
						return
					}
					if err != nil {
						rfail.Add(1)
						mu.Lock()
						errs["read: "+err.Error()]++
						mu.Unlock()
						time.Sleep(20 * time.Millisecond)
					} else {
						rok.Add(1)
					}
				}
			})
		}
		defer func() { stop(); wg.Wait() }()
		if !rwWaitFor(ctx, func() bool { return wrote.Load() > 50 && rok.Load() > 50 }) {
			t.Fatal("the workload never ran")
		}
		old := c.Writer()
		target := c.Readers()[0]
		newWriter.Store(c.Addr(target))
		res, err := c.Failover(ctx, failovertest.Scenario{Kind: failovertest.Crash, Detect: 500 * time.Millisecond, DNSLag: 3 * time.Second, Target: target})
		if err != nil {
			t.Fatal(err)
		}
		promoted, _ := res.At(failovertest.EventPromoted)
		dns, _ := res.At(failovertest.EventDNS)
		readsAtDNS := rok.Load()
		if !rwWaitFor(ctx, func() bool { return rok.Load() > readsAtDNS+50 }) {
			t.Error("the reads stopped after the failover")
		}
		stop()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		t.Logf("crash of %s, %s promoted: writes %d ok, %d failed; reads %d ok, %d failed; errors %v",
			old, res.NewWriter, wrote.Load(), wfail.Load(), rok.Load(), rfail.Load(), errs)
		if firstOnNew.IsZero() {
			t.Fatalf("no write reached the new writer %s", res.NewWriter)
		}
		t.Logf("first write on the new writer %v after the promotion (DNS moved %v after it)",
			firstOnNew.Sub(promoted).Round(time.Millisecond), dns.Sub(promoted).Round(time.Millisecond))
		if !firstOnNew.Before(dns) {
			t.Errorf("writes resumed on the new writer only %v after the promotion, after DNS moved (%v)", firstOnNew.Sub(promoted), dns.Sub(promoted))
		}
		if rec, addr := where(ctx, t, rw.Write()); rec || addr != c.Addr(res.NewWriter) {
			t.Errorf("after the failover, Write: in recovery %v on %s, want the new writer %s", rec, addr, c.Addr(res.NewWriter))
		}
		committed, err := c.CommittedIDs(ctx, "rw")
		if err != nil {
			t.Fatal(err)
		}
		lost := 0
		for _, id := range acked {
			if _, ok := slices.BinarySearch(committed, id); !ok {
				lost++
			}
		}
		if lost > 0 {
			t.Errorf("%d of %d acknowledged writes lost", lost, len(acked))
		}
	})
}
