package failover_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/fakes"
	"github.com/holdfast-db/holdfast/fakes/failovertest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// servers records which server (its holdfast.server_id, the simulator's
// instance identifier) each new connection of a pool reached.
type servers struct {
	mu  sync.Mutex
	ids map[string]int
}

// record sets cfg's AfterConnect (before Configure: holdfast chains it).
func (s *servers) record(cfg *pgxpool.Config) {
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		var id string
		if err := c.QueryRow(ctx, "SELECT current_setting('holdfast.server_id', true)").Scan(&id); err != nil {
			return err
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.ids == nil {
			s.ids = map[string]int{}
		}
		s.ids[id]++
		return nil
	}
}

// foreign returns the connections made to servers whose id does not start
// with prefix.
func (s *servers) foreign(prefix string) map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for id, n := range s.ids {
		if !strings.HasPrefix(id, prefix) {
			out[id] = n
		}
	}
	return out
}

// TestTwoClustersOneRegion: two Aurora clusters in one account and region
// share the instance endpoints' domain and differ by name. One factory
// serves a pool on each; each cluster gets its own monitor, no connection
// of either pool reaches the other cluster, and a failover of one leaves
// the other's pool untouched. (Before, both shared one monitor, keyed by
// the domain: every connection of the second pool went to the first
// cluster's writer.)
func TestTwoClustersOneRegion(t *testing.T) {
	orders := failovertest.StartTest(t, failovertest.Config{Name: "orders", TTL: 500 * time.Millisecond})
	billing := failovertest.StartTest(t, failovertest.Config{Name: "billing", TTL: 500 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	f := newFactory(t)
	var onOrders, onBilling servers
	pool := func(c *failovertest.Cluster, s *servers) *pgxpool.Pool {
		cfg, err := c.PoolConfig(c.ClusterEndpoint)
		if err != nil {
			t.Fatal(err)
		}
		s.record(cfg)
		p, err := f.NewPool(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return p
	}
	po, pb := pool(orders, &onOrders), pool(billing, &onBilling)
	mo, mb := f.Failover(po), f.Failover(pb)
	if mo == nil || mb == nil || mo == mb {
		t.Fatalf("monitors: orders %p, billing %p; want two", mo, mb)
	}
	for _, p := range []*pgxpool.Pool{po, pb} {
		if _, err := p.Exec(ctx, "CREATE TABLE audit (id bigint PRIMARY KEY)"); err != nil {
			t.Fatal(err)
		}
	}
	wo, wb := &writer{errs: map[string]int{}}, &writer{errs: map[string]int{}}
	wctx, wcancel := context.WithCancel(ctx)
	wgo, wgb := wo.run(wctx, po, "audit", 3), wb.run(wctx, pb, "audit", 3)
	defer func() { wcancel(); wgo.Wait(); wgb.Wait() }()
	if !wo.steady(ctx, mo) || !wb.steady(ctx, mb) {
		t.Fatal("a monitor never read its cluster's topology")
	}
	if got, want := mb.Status().Writer, billing.Writer(); got != want {
		t.Fatalf("billing's monitor follows writer %q, want %q (orders' writer is %q)", got, want, orders.Writer())
	}
	res, err := orders.Failover(ctx, failovertest.Scenario{Kind: failovertest.Crash, Detect: 300 * time.Millisecond,
		DNSLag: 2 * time.Second, Rejoin: true})
	if err != nil {
		t.Fatal(err)
	}
	promoted, _ := res.At(failovertest.EventPromoted)
	if !waitFor(ctx, func() bool { _, ok := wo.firstAckAfter(promoted.Add(500 * time.Millisecond)); return ok }) {
		t.Fatal("no write to orders went through after its failover")
	}
	// billing keeps writing meanwhile.
	if !waitFor(ctx, func() bool { _, ok := wb.firstAckAfter(promoted.Add(500 * time.Millisecond)); return ok }) {
		t.Fatal("no write to billing went through after orders' failover")
	}
	wcancel()
	wgo.Wait()
	wgb.Wait()
	so, sb := mo.Status(), mb.Status()
	t.Logf("orders: %d writes, %d failed %v, monitor %+v", len(wo.acked), wo.failed, wo.errs, so)
	t.Logf("billing: %d writes, %d failed %v, monitor %+v", len(wb.acked), wb.failed, wb.errs, sb)
	if n := onOrders.foreign("orders-"); len(n) > 0 {
		t.Errorf("orders' pool connected to servers of another cluster: %v", n)
	}
	if n := onBilling.foreign("billing-"); len(n) > 0 {
		t.Errorf("billing's pool connected to servers of another cluster: %v", n)
	}
	if so.Failovers != 1 || so.Writer != orders.Writer() {
		t.Errorf("orders' monitor: %d failovers, writer %q; want 1, %q", so.Failovers, so.Writer, orders.Writer())
	}
	if sb.Failovers != 0 || sb.Writer != billing.Writer() || sb.Routing != "normal" {
		t.Errorf("billing's monitor: %d failovers, writer %q, routing %s; want 0, %q, normal", sb.Failovers, sb.Writer, sb.Routing, billing.Writer())
	}
	if wb.failed != 0 {
		t.Errorf("billing's pool failed %d writes during orders' failover: %v", wb.failed, wb.errs)
	}
	for _, l := range [][]int64{lost(ctx, t, orders, "audit", wo.acked), lost(ctx, t, billing, "audit", wb.acked)} {
		if len(l) > 0 {
			t.Errorf("%d acknowledged writes lost: %v", len(l), l)
		}
	}
}

// TestEndpointKinds: which endpoints get failover routing, by their names.
// An RDS Proxy follows the writer itself, and an Aurora global database's
// endpoint is a DNS name of the primary cluster's writer: no monitor, one
// Info line saying why. A custom endpoint gets a monitor of its own (its
// name names no cluster), and is neither held nor redirected.
func TestEndpointKinds(t *testing.T) {
	t.Parallel()
	const tail = "-abcdefghijkl.us-east-1.rds.amazonaws.com"
	tests := []struct {
		host    string
		monitor bool
		log     string
	}{
		{"orders-proxy.proxy" + tail, false, "RDS Proxy"},
		{"reads.endpoint.proxy" + tail, false, "RDS Proxy"},
		{"orders.global-abcdefghijkl.global.rds.amazonaws.com", false, "global database"},
		{"analytics.cluster-custom" + tail, true, ""},
		{"orders.cluster" + tail, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			t.Parallel()
			var logs fakes.LogBuffer
			f, err := holdfast.New(holdfast.WithFailover(failover.Config{}),
				holdfast.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			cfg, err := pgxpool.ParseConfig("postgres://app@" + tt.host + "/app")
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Configure(cfg); err != nil {
				t.Fatalf("Configure: %v", err)
			}
			n := strings.Count(logs.String(), "failover routing is off for this pool")
			switch {
			case tt.log != "" && (n != 1 || !strings.Contains(logs.String(), tt.log)):
				t.Errorf("want one line naming %q, got:\n%s", tt.log, logs.String())
			case tt.log == "" && n != 0:
				t.Errorf("routing turned off for %s:\n%s", tt.host, logs.String())
			}
		})
	}
}

// TestProxyEndpoint: a pool on an RDS Proxy endpoint (played by a name
// that the DNS aliases to the cluster endpoint: the proxy follows the
// writer) through a failover. No monitor is started for it, so nothing is
// held, redirected or left active, and its queries work again soon after
// the failover through holdfast's retries. (Before, the proxy name was
// taken for an instance endpoint: the monitor stayed "held" on the old
// writer and dialed hosts that do not exist about once a second.)
func TestProxyEndpoint(t *testing.T) {
	c := failovertest.StartTest(t, failovertest.Config{TTL: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	proxy := "orders-proxy.proxy-" + failovertest.DefaultAccount + "." + failovertest.DefaultRegion + ".rds.amazonaws.com"
	c.Resolver.Alias(proxy, c.ClusterEndpoint)
	var logs fakes.LogBuffer
	f := newFactory(t, holdfast.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
	pool := poolOn(ctx, t, f, c, proxy)
	if m := f.Failover(pool); m != nil {
		t.Fatalf("a monitor for an RDS Proxy endpoint: %+v", m.Status())
	}
	if !strings.Contains(logs.String(), "RDS Proxy") {
		t.Errorf("no line says why failover routing is off:\n%s", logs.String())
	}
	if _, err := pool.Exec(ctx, "CREATE TABLE orders (id bigint PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	w := &writer{errs: map[string]int{}}
	wctx, wcancel := context.WithCancel(ctx)
	wg := w.run(wctx, pool, "orders", 2)
	defer func() { wcancel(); wg.Wait() }()
	if !waitFor(ctx, func() bool { w.mu.Lock(); defer w.mu.Unlock(); return len(w.acked) >= 20 }) {
		t.Fatal("no writes through the proxy name")
	}
	res, err := c.Failover(ctx, failovertest.Scenario{Kind: failovertest.Crash, Detect: 300 * time.Millisecond,
		DNSLag: time.Second, Rejoin: true})
	if err != nil {
		t.Fatal(err)
	}
	down, _ := res.At(failovertest.EventWriterDown)
	if !waitFor(ctx, func() bool { _, ok := w.firstAckAfter(down); return ok }) {
		w.mu.Lock()
		t.Fatalf("no write went through after the failover: %d failed %v", w.failed, w.errs)
	}
	wcancel()
	wg.Wait()
	resumed, _ := w.firstAckAfter(down)
	t.Logf("writes resumed %v after the writer went down; %d acknowledged, %d failed %v", resumed.Sub(down), len(w.acked), w.failed, w.errs)
	if d := resumed.Sub(down); d > 4*time.Second {
		t.Errorf("writes resumed %v after the writer went down; want within 4 s", d)
	}
	if l := lost(ctx, t, c, "orders", w.acked); len(l) > 0 {
		t.Errorf("%d acknowledged writes lost: %v", len(l), l)
	}
	if strings.Contains(logs.String(), "held") {
		t.Errorf("something was held for the proxy's pool:\n%s", logs.String())
	}
}

// TestTopologyUnreadable: a monitor whose role may not read the topology
// (no EXECUTE on aurora_replica_status(), no USAGE on rds_tools) turns
// routing off, says so once at WARN naming the grant, sets Status.Off and
// Error, and looks again every RefreshInterval instead of reconnecting
// about ten times a second. The pool itself keeps working.
func TestTopologyUnreadable(t *testing.T) {
	for _, tt := range []struct {
		engine        failovertest.Engine
		revoke, grant string
	}{
		{failovertest.Aurora, "REVOKE EXECUTE ON FUNCTION pg_catalog.aurora_replica_status() FROM PUBLIC",
			"GRANT EXECUTE ON FUNCTION aurora_replica_status()"},
		{failovertest.MultiAZ, "REVOKE USAGE ON SCHEMA rds_tools FROM PUBLIC", "GRANT USAGE ON SCHEMA rds_tools"},
	} {
		t.Run(string(tt.engine), func(t *testing.T) {
			c := failovertest.StartTest(t, failovertest.Config{Engine: tt.engine})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			admin, err := pgx.Connect(ctx, c.DSN(c.Addr(c.Writer())))
			if err != nil {
				t.Fatal(err)
			}
			defer admin.Close(context.Background())
			if _, err := admin.Exec(ctx, "CREATE ROLE app LOGIN; "+tt.revoke); err != nil {
				t.Fatal(err)
			}
			var logs fakes.LogBuffer
			var fetches atomic.Int64
			f := newFactory(t, holdfast.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))),
				holdfast.WithPasswordFunc(func(context.Context, string) (string, error) { fetches.Add(1); return "token", nil }))
			cfg, err := c.PoolConfig(c.ClusterEndpoint)
			if err != nil {
				t.Fatal(err)
			}
			cfg.ConnConfig.User = "app"
			pool, err := f.NewPool(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			m := f.Failover(pool)
			start := time.Now()
			// Wake the monitor as pools would, for 5 s.
			for time.Since(start) < 5*time.Second {
				engine(m).Trouble()
				if _, err := pool.Exec(ctx, "SELECT 1"); err != nil {
					t.Fatalf("the pool fails: %v", err)
				}
				time.Sleep(50 * time.Millisecond) // a client's pace, not synchronisation
			}
			st := m.Status()
			t.Logf("status %+v; %d token fetches", st, fetches.Load())
			if st.MonitorConnects > 10 {
				t.Errorf("%d monitor connections in 5 s; want at most 10", st.MonitorConnects)
			}
			if n := fetches.Load(); n > 12 {
				t.Errorf("%d token fetches in 5 s; want about one per monitor connection", n)
			}
			if st.Off != "unreadable" || !strings.Contains(st.Error, tt.grant) {
				t.Errorf("Status.Off %q, Error %q; want unreadable and the grant %q", st.Off, st.Error, tt.grant)
			}
			if n := strings.Count(logs.String(), "cannot read the cluster's topology"); n != 1 || !strings.Contains(logs.String(), tt.grant) {
				t.Errorf("%d warnings; want one naming %q:\n%s", n, tt.grant, logs.String())
			}
		})
	}
}

// gateKey marks, in an Acquire's context, the connect whose dial the test
// holds (the values of an Acquire's context reach the pool's dial).
type gateKey struct{}

// gatedConn holds its first Read until gate is closed: a handshake that
// ends whenever the test says.
type gatedConn struct {
	net.Conn
	gate <-chan struct{}
	once sync.Once
}

func (c *gatedConn) Read(b []byte) (int, error) {
	c.once.Do(func() { <-c.gate })
	return c.Conn.Read(b)
}

// TestCutDuringHandshake: a connection whose handshake is under way when a
// cut leaves its server behind does not survive the cut, whatever moment
// its handshake ends: its dial is tracked from the start. Played with a
// reader that leaves the topology (the server stays up, so nothing but
// the cut can end the connection) while a pool's connect to it waits for
// its handshake. (Before, connections were tracked from AfterConnect: one
// that finished its handshake after the cut kept the departed server.)
func TestCutDuringHandshake(t *testing.T) {
	c := failovertest.StartTest(t, failovertest.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reader := standbyOf(c)
	readerAddr := c.Addr(reader)
	gate := make(chan struct{})
	var held, dials atomic.Int64
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil || ctx.Value(gateKey{}) == nil || addr != readerAddr {
			return conn, err
		}
		dials.Add(1)
		if held.Add(1) == 1 {
			return &gatedConn{Conn: conn, gate: gate}, nil
		}
		return conn, nil
	}
	f := newFactory(t, holdfast.WithFailover(failover.Config{RefreshInterval: 100 * time.Millisecond}), holdfast.WithIntegration(holdfast.Integration{Dial: dial}))
	pool := poolOn(ctx, t, f, c, c.ReaderEndpoint)
	m := f.Failover(pool)
	if !waitFor(ctx, func() bool { return m.Status().Writer != "" }) {
		t.Fatal("the monitor never read the topology")
	}
	pool.Reset() // the next Acquire connects
	type result struct {
		pid  uint32
		addr string // the server the connection reached
		err  error
	}
	got := make(chan result, 1)
	go func() {
		c, err := pool.Acquire(context.WithValue(ctx, gateKey{}, true))
		if err != nil {
			got <- result{err: err}
			return
		}
		defer c.Release()
		got <- result{pid: c.Conn().PgConn().PID(), addr: c.Conn().PgConn().Conn().RemoteAddr().String()}
	}()
	if !waitFor(ctx, func() bool { return held.Load() == 1 }) {
		t.Fatal("the connect never dialed the reader")
	}
	// The reader leaves the topology (it stays up): the monitor cuts the
	// pool's connections to it — the one in its handshake too.
	leaveTopology(ctx, t, c, reader)
	if !waitFor(ctx, func() bool { return !lastMonitorEvent(m.Status(), "instance left").IsZero() }) {
		t.Fatalf("the monitor never saw the reader leave: %+v", m.Status())
	}
	close(gate) // the handshake ends, after the cut
	r := <-got
	t.Logf("acquire: pid %d, err %v; %d dials of the reader", r.pid, r.err, dials.Load())
	var ce *failover.CutError
	switch {
	case r.err != nil && !errors.As(r.err, &ce):
		t.Fatalf("acquire: %v, want a connection or a *failover.CutError", r.err)
	case r.err == nil && r.addr == readerAddr && dials.Load() < 2:
		// (Reader routing sends the retry to the writer, the only
		// reader having left: a connection there is not the one cut.)
		t.Errorf("the connection whose handshake the cut crossed survived it (pid %d, one dial)", r.pid)
	}
}

// A cut follows what was in flight: a statement outside a transaction
// (which could commit on its own) cut in mid-flight is outcome unknown
// (Fatal), a statement of an open transaction cut in mid-flight is a
// *failover.CutError that is Transient (the server rolls the transaction
// back: the whole transaction may run again).
func TestCutMidStatement(t *testing.T) {
	c := failovertest.StartTest(t, failovertest.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reader := standbyOf(c)
	f := newFactory(t, holdfast.WithFailover(failover.Config{RefreshInterval: 100 * time.Millisecond}))
	pool := poolOn(ctx, t, f, c, c.ReaderEndpoint)
	if !waitFor(ctx, func() bool { return f.Failover(pool).Status().Writer != "" }) {
		t.Fatal("the monitor never read the topology")
	}
	started := make(chan struct{}, 2)
	errs := make(chan [2]error, 1)
	go func() {
		var out [2]error
		var wg sync.WaitGroup
		wg.Go(func() {
			started <- struct{}{}
			_, out[0] = pool.Exec(ctx, "SELECT pg_sleep(20)")
		})
		wg.Go(func() {
			out[1] = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				started <- struct{}{}
				_, err := tx.Exec(ctx, "SELECT pg_sleep(20)")
				return err
			})
		})
		wg.Wait()
		errs <- out
	}()
	<-started
	<-started
	// Both statements run on the reader before it leaves the topology.
	onReader, err := pgx.Connect(ctx, c.DSN(c.Addr(reader)))
	if err != nil {
		t.Fatal(err)
	}
	defer onReader.Close(context.Background())
	if !waitFor(ctx, func() bool {
		var n int
		err := onReader.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query = 'SELECT pg_sleep(20)'").Scan(&n)
		return err == nil && n == 2
	}) {
		t.Fatal("the two statements never ran on the reader")
	}
	leaveTopology(ctx, t, c, reader)
	got := <-errs
	t.Logf("autocommit: %v\nin a transaction: %v", got[0], got[1])
	// On a reader, a standby: the autocommit statement's answer is lost,
	// but nothing commits there (issue 30, item 8; on the writer it is
	// ErrOutcomeUnknown: TestIssue30ReadLostOnStandby).
	var ce *failover.CutError
	if errors.Is(got[0], holdfast.ErrOutcomeUnknown) || !errors.As(got[0], &ce) {
		t.Errorf("autocommit statement cut: %v; want a *failover.CutError, not outcome unknown (a standby)", got[0])
	}
	if v := f.Classify(got[0]); !v.Retryable() || v.Reason != classify.ReasonStandbyLost {
		t.Errorf("Classify(autocommit cut) = %v, want transient %s", v, classify.ReasonStandbyLost)
	}
	if errors.Is(got[1], holdfast.ErrOutcomeUnknown) || !errors.As(got[1], &ce) {
		t.Errorf("a transaction's statement cut: %v; want a *failover.CutError, not outcome unknown", got[1])
	}
	if v := f.Classify(got[1]); !v.Retryable() {
		t.Errorf("Classify(transaction cut) = %v, want transient", v)
	}
}
