package failover_test

import (
	"context"
	"database/sql"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/fakes/failovertest"
	"github.com/holdfast-db/holdfast/sqldb"
	"github.com/jackc/pgx/v5/pgxpool"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// TestReadersCombined runs reader routing with every other layer on, on
// two clusters in one process: one factory with failover (reader routing,
// least connections), blue/green monitoring and an OpenTelemetry meter
// provider serves, on each cluster, a writer pool (pgxpool) and a reader
// pool — orders' through database/sql (sqldb), billing's a pgxpool — under
// a write and a read workload. orders' writer crashes. A user checks: each
// cluster's reader connections are spread evenly over its own readers and
// none reaches the other cluster; billing's writes and reads go on without
// a failure; orders' writes and reads resume after the failover, and no
// acknowledged write is lost; the metrics name both clusters' pools and
// the failover event only under orders.
func TestReadersCombined(t *testing.T) {
	orders := failovertest.StartTest(t, failovertest.Config{Name: "orders", Replicas: 3, TTL: 500 * time.Millisecond})
	billing := failovertest.StartTest(t, failovertest.Config{Name: "billing", Replicas: 2, TTL: 500 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	readerUsers(ctx, t, orders, "rd")
	readerUsers(ctx, t, billing, "rd")

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	f := newFactory(t,
		holdfast.WithFailover(failover.Config{RefreshInterval: 500 * time.Millisecond}),
		holdfast.WithBlueGreen(bluegreen.Config{IncreasedInterval: 100 * time.Millisecond, BaselineInterval: 100 * time.Millisecond}),
		holdfast.WithMeterProvider(mp))

	var onOrders, onBilling servers
	poolConfig := func(c *failovertest.Cluster, host, user string, n int32, s *servers) *pgxpool.Config {
		cfg, err := c.PoolConfig(host)
		if err != nil {
			t.Fatal(err)
		}
		if user != "" {
			cfg.ConnConfig.User = user
		}
		cfg.MinConns, cfg.MaxConns = n, n
		s.record(cfg)
		return cfg
	}
	open := func(cfg *pgxpool.Config, name string) *pgxpool.Pool {
		p, err := f.NewPool(ctx, cfg, holdfast.PoolName(name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return p
	}
	ow := open(poolConfig(orders, orders.ClusterEndpoint, "", 4, &onOrders), "orders")
	bw := open(poolConfig(billing, billing.ClusterEndpoint, "", 4, &onBilling), "billing")
	br := open(poolConfig(billing, billing.ReaderEndpoint, "rd", 4, &onBilling), "billing-ro")
	odb, err := sqldb.Open(ctx, f, poolConfig(orders, orders.ReaderEndpoint, "rd", 6, &onOrders))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = odb.Close() })
	odb.SetMaxOpenConns(6)
	or := sqldb.PoolOf(odb)
	if f.Failover(ow) != f.Failover(or) || f.Failover(bw) != f.Failover(br) || f.Failover(ow) == f.Failover(bw) {
		t.Fatal("want one monitor per cluster, shared by its writer and reader pools")
	}
	for _, p := range []*pgxpool.Pool{ow, bw} {
		if _, err := p.Exec(ctx, "CREATE TABLE audit (id bigint PRIMARY KEY)"); err != nil {
			t.Fatal(err)
		}
	}

	// Each reader pool opens its MinConns at once: spread over its
	// cluster's readers, on readers only. (The blue/green monitor of a
	// reader pool has connections of its own, by the endpoint's DNS:
	// poolConnsOn leaves them out.)
	spreadOn := func(c *failovertest.Cluster, name string, want int) {
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		counts := map[string]int{}
		if !waitFor(wctx, func() bool {
			for _, id := range c.Readers() {
				counts[id] = poolConnsOn(ctx, t, c, id, "rd")
			}
			return len(counts) > 0 && !slices.ContainsFunc(slices.Collect(maps.Values(counts)), func(n int) bool { return n != want })
		}) {
			t.Fatalf("%s' reader connections %v, want %d on each of its readers", name, counts, want)
		}
	}
	spreadOn(orders, "orders", 2)
	spreadOn(billing, "billing", 2)

	wo, wb := &writer{errs: map[string]int{}}, &writer{errs: map[string]int{}}
	var rb reads
	var sqlReads sqlReadLoop
	wctx, wcancel := context.WithCancel(ctx)
	wgs := []*sync.WaitGroup{wo.run(wctx, ow, "audit", 2), wb.run(wctx, bw, "audit", 2), rb.run(wctx, br, 3), sqlReads.run(wctx, odb, 3)}
	stop := func() {
		wcancel()
		for _, wg := range wgs {
			wg.Wait()
		}
	}
	defer stop()
	if !wo.steady(ctx, f.Failover(ow)) || !wb.steady(ctx, f.Failover(bw)) {
		t.Fatal("a monitor never read its cluster's topology")
	}
	res, err := orders.Failover(ctx, failovertest.Scenario{Kind: failovertest.Crash, Detect: 300 * time.Millisecond, DNSLag: 2 * time.Second, Rejoin: true})
	if err != nil {
		t.Fatal(err)
	}
	promoted, _ := res.At(failovertest.EventPromoted)
	after := promoted.Add(500 * time.Millisecond)
	if !waitFor(ctx, func() bool { _, ok := wo.firstAckAfter(after); return ok }) {
		t.Fatal("no write to orders went through after its failover")
	}
	okBefore := sqlReads.ok.Load()
	if !waitFor(ctx, func() bool { return sqlReads.ok.Load() > okBefore+20 && rb.ok.Load() > 20 }) {
		t.Fatal("reads did not go on after orders' failover")
	}
	stop()

	t.Logf("orders: %d writes, %d failed %v; reads %d ok, %d failed %v", len(wo.acked), wo.failed, wo.errs, sqlReads.ok.Load(), sqlReads.failed.Load(), sqlReads.errs)
	t.Logf("billing: %d writes, %d failed %v; reads %d ok, %d failed %v", len(wb.acked), wb.failed, wb.errs, rb.ok.Load(), rb.failed.Load(), rb.errs)
	if n := onOrders.foreign("orders-"); len(n) > 0 {
		t.Errorf("orders' pools connected to servers of another cluster: %v", n)
	}
	if n := onBilling.foreign("billing-"); len(n) > 0 {
		t.Errorf("billing's pools connected to servers of another cluster: %v", n)
	}
	if wb.failed != 0 || rb.failed.Load() != 0 {
		t.Errorf("billing failed %d writes and %d reads during orders' failover: %v %v", wb.failed, rb.failed.Load(), wb.errs, rb.errs)
	}
	// orders: only what was in flight at the crash may fail (a write whose
	// answer was lost is outcome unknown; database/sql retries a read that
	// never reached a server).
	if wo.failed > 2 || sqlReads.failed.Load() > 3 {
		t.Errorf("orders failed %d writes (2 workers) and %d reads (3 workers): more than were in flight", wo.failed, sqlReads.failed.Load())
	}
	for _, l := range [][]int64{lost(ctx, t, orders, "audit", wo.acked), lost(ctx, t, billing, "audit", wb.acked)} {
		if len(l) > 0 {
			t.Errorf("%d acknowledged writes lost: %v", len(l), l)
		}
	}
	// billing's reader connections stayed on billing's readers.
	for _, pc := range br.AcquireAllIdle(ctx) {
		a := pc.Conn().PgConn().Conn().RemoteAddr().String()
		pc.Release()
		if !slices.ContainsFunc(billing.Readers(), func(id string) bool { return billing.Addr(id) == a }) {
			t.Errorf("billing's reader pool holds a connection to %s, not one of its readers", a)
		}
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	pools := map[string]bool{}
	failovers := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if v, ok := p.Attributes.Value("db.client.connection.pool.name"); ok {
						pools[v.AsString()] = true
					}
					if m.Name == "holdfast.failover.events" {
						if v, ok := p.Attributes.Value("server.address"); ok {
							failovers[v.AsString()] += p.Value
						}
					}
				}
			}
		}
	}
	for _, name := range []string{"orders", "billing", "billing-ro"} {
		if !pools[name] {
			t.Errorf("no metric names pool %q (pools named: %v)", name, pools)
		}
	}
	if failovers[orders.ClusterEndpoint] == 0 || failovers[billing.ClusterEndpoint] != 0 {
		t.Errorf("failover events by cluster %v: want some under %s, none under %s", failovers, orders.ClusterEndpoint, billing.ClusterEndpoint)
	}
}

// sqlReadLoop is a read workload over database/sql.
type sqlReadLoop struct {
	ok, failed atomic.Int64
	mu         sync.Mutex
	errs       map[string]int
}

func (r *sqlReadLoop) run(ctx context.Context, db *sql.DB, workers int) *sync.WaitGroup {
	r.errs = map[string]int{}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				var one int
				err := db.QueryRowContext(qctx, "SELECT 1").Scan(&one)
				cancel()
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					r.failed.Add(1)
					r.mu.Lock()
					r.errs[errKey(err)]++
					r.mu.Unlock()
					time.Sleep(20 * time.Millisecond) // a failed client's pacing
					continue
				}
				r.ok.Add(1)
			}
		})
	}
	return &wg
}
