package failover_test

import (
	"context"
	"database/sql"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/fakes/failovertest"
	"github.com/holdfast-db/holdfast/retry"
	"github.com/holdfast-db/holdfast/sqldb"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// gtxPolicy is the transaction runner's policy of the combination tests:
// as globalPools', reruns for the length of a switchover.
func gtxPolicy() holdfast.Option {
	return holdfast.WithTxPolicy(retry.Policy{MaxAttempts: 30, Multiplier: 2, InitialInterval: 10 * time.Millisecond,
		MaxInterval: 100 * time.Millisecond, MaxElapsed: 20 * time.Second})
}

// requestTimeout is each request's deadline in the combination tests:
// every wait (a hold, the runner's reruns) ends within it.
const requestTimeout = 20 * time.Second

// maxWait is the longest a request of the combination tests may take:
// well within its deadline (a bounded hold, not one that ran into the
// request's context).
const maxWait = 10 * time.Second

// combinedResumeBound is how soon after the new primary takes writes the
// combination tests want writes to resume: TestGlobalSwitchover holds
// holdfast to the 250 ms alone; here three pools and six workers
// share the machine's two cores with the servers, so the bound only
// catches a resume that waited for something else (the DNS, a hold's
// end): 1 s, 3 s under the race detector.
func combinedResumeBound() time.Duration {
	if raceEnabled {
		return 3 * time.Second
	}
	return time.Second
}

// poolIn opens a pool of f with cfg, named name, recording the servers its
// connections reach in s; closed when the test ends.
func poolIn(ctx context.Context, t *testing.T, f *holdfast.Factory, cfg *pgxpool.Config, name string, s *servers) *pgxpool.Pool {
	t.Helper()
	if s != nil {
		s.record(cfg)
	}
	p, err := f.NewPool(ctx, cfg, holdfast.PoolName(name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// outside returns the servers recorded in s that are not in ids.
func (s *servers) outside(ids []string) map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for id, n := range s.ids {
		if !slices.Contains(ids, id) {
			out[id] = n
		}
	}
	return out
}

// remoteOutside returns the remote addresses of p's idle connections that
// are not among addrs.
func remoteOutside(ctx context.Context, p *pgxpool.Pool, addrs []string) []string {
	var out []string
	for _, c := range p.AcquireAllIdle(ctx) {
		a := c.Conn().PgConn().Conn().RemoteAddr().String()
		c.Release()
		if !slices.Contains(addrs, a) {
			out = append(out, a)
		}
	}
	return out
}

// audit checks the writes of loads (ids committed vs acknowledged) against
// committed, the ids on the writer: every acknowledged write is there
// once (the ids are a primary key: a write applied twice would have
// failed with 23505), no write reported failed is there, and at most
// inflight ids were committed without being recorded (requests cut off
// by the test's stop, their workers' last).
func audit(t *testing.T, committed []int64, inflight int, loads map[string]*globalLoad) {
	t.Helper()
	recorded := map[int64]error{}
	for name, l := range loads {
		l.mu.Lock()
		for _, w := range l.writes {
			if _, dup := recorded[w.id]; dup {
				t.Errorf("%s: id %d written twice by the workload", name, w.id)
			}
			recorded[w.id] = w.err
		}
		l.mu.Unlock()
	}
	have := map[int64]bool{}
	unrecorded := 0
	for _, id := range committed {
		have[id] = true
		err, ok := recorded[id]
		switch {
		case !ok:
			unrecorded++
		case err != nil:
			t.Errorf("write %d was reported failed (%v) but committed", id, err)
		}
	}
	for name, l := range loads {
		for _, id := range l.ackedIDs() {
			if !have[id] {
				t.Errorf("%s: acknowledged write %d missing on the writer", name, id)
			}
		}
	}
	if unrecorded > inflight {
		t.Errorf("%d writes committed that the workloads never recorded; want at most %d (the requests cut off by the stop)", unrecorded, inflight)
	}
}

// longest returns the longest request of l.
func (l *globalLoad) longest() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var d time.Duration
	for _, w := range l.writes {
		d = max(d, w.end.Sub(w.start))
	}
	return d
}

// failures returns l's failed requests, by error.
func (l *globalLoad) failures() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for _, w := range l.writes {
		if w.err != nil {
			out[globalErrKey(w.err)]++
		}
	}
	return out
}

// serversOutside returns the servers, not among ids, that acknowledged
// requests of l.
func (l *globalLoad) serversOutside(ids []string) map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for _, w := range l.writes {
		if w.err == nil && !slices.Contains(ids, w.server) {
			out[w.server]++
		}
	}
	return out
}

// total returns the sum of m's counts.
func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// failoverEvents returns holdfast.failover.events' points by server.address
// and event.
func failoverEvents(ctx context.Context, t *testing.T, rd *sdkmetric.ManualReader) (map[[2]string]int64, map[string]bool) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := rd.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	events := map[[2]string]int64{}
	pools := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			d, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				continue
			}
			for _, p := range d.DataPoints {
				if v, ok := p.Attributes.Value("db.client.connection.pool.name"); ok {
					pools[v.AsString()] = true
				}
				if m.Name != "holdfast.failover.events" {
					continue
				}
				a, _ := p.Attributes.Value("server.address")
				e, _ := p.Attributes.Value("holdfast.failover.event")
				events[[2]string{a.AsString(), e.AsString()}] += p.Value
			}
		}
	}
	return events, pools
}

// TestGlobalCombined runs the global routing with every other layer on:
// one factory with WithFailover (Global.Regions naming both Regions), an
// OpenTelemetry meter and tracer provider, serves a writer pool on the
// global writer endpoint (transactions through Factory.RunTx), a reader
// pool on the secondary Region's reader endpoint (an application in that
// Region reading locally), and a *sql.DB on the global writer endpoint
// (transactions through sqldb.RunTx), all under load through a managed
// switchover. A user checks: no write failed, none lost, none applied
// twice, none acknowledged by the old primary after it turned read-only;
// every reader connection stayed in its Region; every request ended well
// within its deadline; the monitor and the metrics saw the switchover; the
// connects were traced.
func TestGlobalCombined(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	g := failovertest.StartGlobalTest(t, failovertest.GlobalConfig{Lag: 300 * time.Millisecond, TTL: 500 * time.Millisecond, Readers: 2})
	primary, secondary := roles(g)
	regions := map[string]string{}
	for _, r := range g.Regions() {
		regions[r.Name] = r.ClusterEndpoint
	}
	metrics := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(metrics))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	spans := tracetest.NewSpanRecorder()
	tp := trace.NewTracerProvider(trace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	f := newFactory(t, holdfast.WithFailover(failover.Config{Global: failover.GlobalConfig{Regions: regions}}),
		gtxPolicy(), holdfast.WithMeterProvider(mp), holdfast.WithTracerProvider(tp))

	cfg := func(host string) *pgxpool.Config {
		c, err := g.PoolConfig(host, "connect_timeout=2")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	var onReader servers
	hw := poolIn(ctx, t, f, cfg(g.GlobalEndpoint), "global-writer", nil)
	rcfg := cfg(secondary.ReaderEndpoint)
	rcfg.MinConns, rcfg.MaxConns = 4, 4
	hr := poolIn(ctx, t, f, rcfg, "regional-reader", &onReader)
	db := sqldb.OpenDB(poolIn(ctx, t, f, cfg(g.GlobalEndpoint), "global-sql", nil))
	t.Cleanup(func() { _ = db.Close() })
	if _, err := hw.Exec(ctx, "CREATE TABLE orders (id bigint PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	m := f.Failover(hw)
	if m == nil || f.Failover(hr) == nil || f.Failover(sqldb.PoolOf(db)) != m {
		t.Fatalf("monitors: writer %p, reader %p, sql %p; want the writer pools sharing one, the reader pool one", m, f.Failover(hr), f.Failover(sqldb.PoolOf(db)))
	}
	// The table reaches the secondary Region Lag after its creation.
	if !waitFor(ctx, func() bool {
		var ok bool
		return hr.QueryRow(ctx, "SELECT to_regclass('orders') IS NOT NULL").Scan(&ok) == nil && ok
	}) {
		t.Fatal("table orders never reached the secondary Region")
	}

	txw, sqlw, reads := &globalLoad{}, &globalLoad{}, &globalLoad{}
	sqlw.next.Store(1 << 40)
	reads.next.Store(1 << 50)
	wctx, wcancel := context.WithCancel(ctx)
	wgs := []*sync.WaitGroup{
		txw.run(wctx, 2, func(ctx context.Context, id int64) (string, error) {
			var server string
			err := f.RunTx(ctx, hw, pgx.TxOptions{}, func(tx pgx.Tx) error {
				return tx.QueryRow(ctx, insertReturning, id).Scan(&server)
			})
			return server, err
		}),
		sqlw.run(wctx, 2, func(ctx context.Context, id int64) (string, error) {
			var server string
			err := sqldb.RunTx(ctx, f, db, nil, func(tx *sql.Tx) error {
				return tx.QueryRowContext(ctx, insertReturning, id).Scan(&server)
			})
			return server, err
		}),
		reads.run(wctx, 2, func(ctx context.Context, _ int64) (string, error) {
			var server string
			err := hr.QueryRow(ctx, "SELECT aurora_db_instance_identifier()").Scan(&server)
			return server, err
		}),
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			wcancel()
			for _, wg := range wgs {
				wg.Wait()
			}
		})
	}
	t.Cleanup(stop)
	if !waitFor(ctx, func() bool {
		return m.Status().Writer != "" && f.Failover(hr).Status().Writer != "" && txw.acked() >= 20 && sqlw.acked() >= 20 && reads.acked() >= 20
	}) {
		t.Fatalf("no steady load: monitor %+v; %d, %d writes, %d reads", m.Status(), txw.acked(), sqlw.acked(), reads.acked())
	}
	writable := watchWritable(ctx, t, g, secondary.Servers[0])

	start := time.Now()
	res, err := g.Switchover(ctx, failovertest.GlobalScenario{DNSLag: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	promoted := primaryAt(t, res, writable())
	blocked, _ := res.At(failovertest.EventWritesBlocked)
	dns, _ := res.At(failovertest.EventDNS)
	after := dns.Add(time.Second)
	if !waitFor(ctx, func() bool {
		return txw.countOn(res.NewWriter, after) > 0 && sqlw.countOn(res.NewWriter, after) > 0 && reads.countAfter(after) > 20
	}) {
		t.Fatalf("the load did not go on after the switchover: %d, %d writes on %s, %d reads after the DNS moved",
			txw.countOn(res.NewWriter, after), sqlw.countOn(res.NewWriter, after), res.NewWriter, reads.countAfter(after))
	}
	stop()
	st := m.Status()
	logGlobal(t, start, res, st)

	for _, l := range []struct {
		name string
		l    *globalLoad
	}{{"RunTx", txw}, {"sqldb.RunTx", sqlw}} {
		acked, failed, errs, resumed := l.l.summary(promoted, res.NewWriter)
		old := l.l.countOn(res.OldWriter, blocked)
		t.Logf("%s: %d acknowledged, %d failed %v; resumed %v after the promotion; longest %v; %d on the old primary after it turned read-only",
			l.name, acked, failed, errs, since(resumed, promoted), l.l.longest(), old)
		if failed != 0 {
			t.Errorf("%s: %d writes failed through the switchover %v; want 0", l.name, failed, errs)
		}
		if old != 0 {
			t.Errorf("%s: %d writes started after the old primary turned read-only were acknowledged by it; want 0", l.name, old)
		}
		if resumed.IsZero() || resumed.Sub(promoted) > combinedResumeBound() {
			t.Errorf("%s: writes resumed %v after the new primary took writes; want within %v", l.name, since(resumed, promoted), combinedResumeBound())
		}
		if d := l.l.longest(); d > maxWait {
			t.Errorf("%s: a write took %v; want every wait within %v (deadline %v)", l.name, d, maxWait, requestTimeout)
		}
	}
	t.Logf("reads: %d ok, failed %v, longest %v; servers outside %s: %v", reads.acked(), reads.failures(), reads.longest(), secondary.Name, reads.serversOutside(secondary.Servers))
	if out := reads.serversOutside(secondary.Servers); len(out) > 0 {
		t.Errorf("reads through %s's reader endpoint ran outside the Region: %v", secondary.Name, out)
	}
	if out := onReader.outside(secondary.Servers); len(out) > 0 {
		t.Errorf("the reader pool connected to servers outside %s: %v", secondary.Name, out)
	}
	var addrs []string
	for _, id := range secondary.Servers {
		addrs = append(addrs, g.Addr(id))
	}
	if out := remoteOutside(ctx, hr, addrs); len(out) > 0 {
		t.Errorf("the reader pool holds connections outside %s: %v", secondary.Name, out)
	}
	if d := reads.longest(); d > maxWait {
		t.Errorf("a read took %v; want every wait within %v", d, maxWait)
	}
	if st.Writer != res.NewWriter || st.WriterRegion != res.NewRegion || res.NewRegion != secondary.Name {
		t.Errorf("monitor: writer %s in %s; want %s in %s", st.Writer, st.WriterRegion, res.NewWriter, secondary.Name)
	}
	if e, ok := findEvent(st, "region switchover"); !ok || e.FromRegion != primary.Name || e.Region != secondary.Name {
		t.Errorf("monitor: region switchover event %+v (found %v); want from %s to %s", e, ok, primary.Name, secondary.Name)
	}
	ids, err := g.CommittedIDs(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	audit(t, ids, 4, map[string]*globalLoad{"RunTx": txw, "sqldb.RunTx": sqlw})

	// Telemetry: the switchover counted under the global endpoint, the
	// three pools named.
	var events map[[2]string]int64
	var pools map[string]bool
	mctx, mcancel := context.WithTimeout(ctx, 10*time.Second)
	defer mcancel()
	waitFor(mctx, func() bool {
		events, pools = failoverEvents(ctx, t, metrics)
		return events[[2]string{g.GlobalEndpoint, "region switchover"}] > 0
	})
	t.Logf("holdfast.failover.events: %v", events)
	if events[[2]string{g.GlobalEndpoint, "region switchover"}] == 0 || events[[2]string{g.GlobalEndpoint, "new writer"}] == 0 {
		t.Errorf("holdfast.failover.events %v: want region switchover and new writer under %s", events, g.GlobalEndpoint)
	}
	for _, name := range []string{"global-writer", "regional-reader", "global-sql"} {
		if !pools[name] {
			t.Errorf("no metric names pool %q (pools named: %v)", name, pools)
		}
	}
	// The writer pools' connects to the new primary were traced, each
	// naming the global endpoint and the new primary's address (they
	// were held until it took writes).
	toNew := map[string]int{}
	for _, s := range spans.Ended() {
		if s.Name() != "holdfast.connect" {
			continue
		}
		attrs := map[string]string{}
		for _, kv := range s.Attributes() {
			attrs[string(kv.Key)] = kv.Value.String()
		}
		if attrs["server.address"] == g.GlobalEndpoint && attrs["holdfast.outcome"] == "success" &&
			attrs["network.peer.address"]+":"+attrs["network.peer.port"] == g.Addr(res.NewWriter) {
			toNew[attrs["db.client.connection.pool.name"]]++
		}
	}
	t.Logf("%d spans; holdfast.connect to the new primary by pool: %v", len(spans.Ended()), toNew)
	if toNew["global-writer"] == 0 || toNew["global-sql"] == 0 {
		t.Errorf("holdfast.connect spans to the new primary %s by pool: %v; want some for global-writer and global-sql", g.Addr(res.NewWriter), toNew)
	}
}

// TestGlobalBesidePlainCluster: a global cluster and a plain Aurora
// cluster in one process, served by one factory (failover.Config.Global is
// the factory's: the plain cluster's pools get it too), the plain cluster
// in the same account and Region as the global one's primary (their
// instance endpoints share a domain). Each cluster has its own monitor,
// whose Status names its own writer (and Region); no connection of either
// cluster's pools reaches the other's servers; a failover of the plain
// cluster leaves the global pools and monitor undisturbed, and a
// switchover of the global one the plain cluster's.
func TestGlobalBesidePlainCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	g := failovertest.StartGlobalTest(t, failovertest.GlobalConfig{Lag: 100 * time.Millisecond, TTL: 500 * time.Millisecond})
	primary, secondary := roles(g)
	c := failovertest.StartTest(t, failovertest.Config{Name: "billing", Account: primary.Hash, Region: primary.Name, TTL: 500 * time.Millisecond})
	regions := map[string]string{}
	for _, r := range g.Regions() {
		regions[r.Name] = r.ClusterEndpoint
	}
	f := newFactory(t, holdfast.WithFailover(failover.Config{Global: failover.GlobalConfig{Regions: regions}}), gtxPolicy())

	var onGlobal, onPlain servers
	gcfg := func(host string) *pgxpool.Config {
		cfg, err := g.PoolConfig(host, "connect_timeout=2")
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	ccfg := func(host string) *pgxpool.Config {
		cfg, err := c.PoolConfig(host, "connect_timeout=2")
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	gw := poolIn(ctx, t, f, gcfg(g.GlobalEndpoint), "global", &onGlobal)
	gr := poolIn(ctx, t, f, gcfg(primary.ReaderEndpoint), "global-ro", &onGlobal)
	cw := poolIn(ctx, t, f, ccfg(c.ClusterEndpoint), "billing", &onPlain)
	cr := poolIn(ctx, t, f, ccfg(c.ReaderEndpoint), "billing-ro", &onPlain)
	gm, cm := f.Failover(gw), f.Failover(cw)
	if gm == nil || cm == nil || gm == cm || f.Failover(gr) == cm || f.Failover(cr) == gm || f.Failover(cr) != cm {
		t.Fatalf("monitors: global %p (reader %p), plain %p (reader %p); want the clusters' apart", gm, f.Failover(gr), cm, f.Failover(cr))
	}
	for _, p := range []*pgxpool.Pool{gw, cw} {
		if _, err := p.Exec(ctx, "CREATE TABLE orders (id bigint PRIMARY KEY)"); err != nil {
			t.Fatal(err)
		}
	}
	if !waitFor(ctx, func() bool {
		var ok bool
		return gr.QueryRow(ctx, "SELECT to_regclass('orders') IS NOT NULL").Scan(&ok) == nil && ok
	}) {
		t.Fatal("table orders never reached the global cluster's readers")
	}
	write := func(p *pgxpool.Pool) func(ctx context.Context, id int64) (string, error) {
		return func(ctx context.Context, id int64) (string, error) {
			var server string
			err := f.RunTx(ctx, p, pgx.TxOptions{}, func(tx pgx.Tx) error {
				return tx.QueryRow(ctx, "INSERT INTO orders VALUES ($1) RETURNING current_setting('holdfast.server_id')", id).Scan(&server)
			})
			return server, err
		}
	}
	read := func(p *pgxpool.Pool) func(ctx context.Context, _ int64) (string, error) {
		return func(ctx context.Context, _ int64) (string, error) {
			var server string
			err := p.QueryRow(ctx, "SELECT current_setting('holdfast.server_id')").Scan(&server)
			return server, err
		}
	}
	gwl, grl, cwl, crl := &globalLoad{}, &globalLoad{}, &globalLoad{}, &globalLoad{}
	wctx, wcancel := context.WithCancel(ctx)
	wgs := []*sync.WaitGroup{gwl.run(wctx, 2, write(gw)), grl.run(wctx, 1, read(gr)), cwl.run(wctx, 2, write(cw)), crl.run(wctx, 1, read(cr))}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			wcancel()
			for _, wg := range wgs {
				wg.Wait()
			}
		})
	}
	t.Cleanup(stop)
	if !waitFor(ctx, func() bool {
		return gm.Status().Writer != "" && cm.Status().Writer != "" && gwl.acked() >= 20 && cwl.acked() >= 20 && grl.acked() >= 10 && crl.acked() >= 10
	}) {
		t.Fatalf("no steady load: global %+v, plain %+v", gm.Status(), cm.Status())
	}
	gs, cs := gm.Status(), cm.Status()
	if gs.Writer != g.Writer() || gs.WriterRegion != primary.Name {
		t.Errorf("the global monitor: writer %s in %q; want %s in %s", gs.Writer, gs.WriterRegion, g.Writer(), primary.Name)
	}
	if cs.Writer != c.Writer() || cs.WriterRegion != "" {
		t.Errorf("the plain cluster's monitor: writer %s in %q; want %s, no Region (the global writer is %s)", cs.Writer, cs.WriterRegion, c.Writer(), g.Writer())
	}
	if s := engine(cm).Snapshot(); s.Global || len(s.Regions) != 0 {
		t.Errorf("the plain cluster's monitor takes it for a global cluster: %+v", s)
	}
	if s := engine(gm).Snapshot(); !s.Global {
		t.Errorf("the global cluster's monitor does not know it global: %+v", s)
	}

	// 1. The plain cluster's writer crashes.
	gEvents := len(gs.Events)
	fres, err := c.Failover(ctx, failovertest.Scenario{Kind: failovertest.Crash, Detect: 300 * time.Millisecond, DNSLag: 2 * time.Second, Rejoin: true})
	if err != nil {
		t.Fatal(err)
	}
	fpromoted, _ := fres.At(failovertest.EventPromoted)
	if !waitFor(ctx, func() bool { return cwl.countOn(fres.NewWriter, fpromoted.Add(500*time.Millisecond)) > 0 }) {
		t.Fatal("no write to the plain cluster went through after its failover")
	}
	if !waitFor(ctx, func() bool { return gwl.countAfter(fpromoted.Add(500*time.Millisecond)) > 0 }) {
		t.Fatal("no write to the global cluster went through after the plain cluster's failover")
	}
	// The plain cluster settles: its old writer rejoined as a reader, its
	// DNS agrees with the topology.
	if !waitFor(ctx, func() bool {
		s, old := engine(cm).Snapshot(), c.Addr(fres.OldWriter)
		return s.Normal() && s.Readers[old] && !s.ReadersDown[old] && !lastMonitorEvent(cm.Status(), "DNS agrees").IsZero()
	}) {
		t.Fatalf("the plain cluster's monitor never settled after its failover: %+v", cm.Status())
	}
	plainDone := time.Now()
	gs = gm.Status()
	for _, e := range gs.Events[gEvents:] {
		t.Errorf("the global monitor saw an event during the plain cluster's failover: %+v", e)
	}
	if gs.Writer != g.Writer() || gs.Failovers != 0 {
		t.Errorf("the global monitor after the plain cluster's failover: writer %s, %d failovers; want %s, 0", gs.Writer, gs.Failovers, g.Writer())
	}
	if cs = cm.Status(); cs.Writer != fres.NewWriter || cs.Failovers != 1 {
		t.Errorf("the plain cluster's monitor: writer %s, %d failovers; want %s, 1", cs.Writer, cs.Failovers, fres.NewWriter)
	}
	gFailedPlain := gwl.failures()
	gReadsFailedPlain := grl.failures()

	// 2. The global cluster switches over.
	cEvents := len(cs.Events)
	cFailed, cReadsFailed := total(cwl.failures()), total(crl.failures())
	gres, err := g.Switchover(ctx, failovertest.GlobalScenario{DNSLag: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	gdns, _ := gres.At(failovertest.EventDNS)
	blocked, _ := gres.At(failovertest.EventWritesBlocked)
	if !waitFor(ctx, func() bool {
		return gwl.countOn(gres.NewWriter, gdns.Add(time.Second)) > 0 && cwl.countAfter(gdns.Add(time.Second)) > 0 && grl.countAfter(gdns.Add(time.Second)) > 0
	}) {
		t.Fatal("the load did not go on after the global switchover")
	}
	stop()
	gs, cs = gm.Status(), cm.Status()
	logGlobal(t, plainDone, gres, gs)
	for _, e := range cs.Events {
		t.Logf("plain monitor: %s %s at %v", e.Name, e.Server, e.At.Sub(plainDone))
	}
	for _, e := range cs.Events[cEvents:] {
		t.Errorf("the plain cluster's monitor saw an event during the global switchover: %+v", e)
	}
	if cs.Writer != fres.NewWriter || cs.Failovers != 1 || cs.WriterRegion != "" {
		t.Errorf("the plain cluster's monitor after the global switchover: writer %s in %q, %d failovers; want %s, no Region, 1", cs.Writer, cs.WriterRegion, cs.Failovers, fres.NewWriter)
	}
	if gs.Writer != gres.NewWriter || gs.WriterRegion != secondary.Name {
		t.Errorf("the global monitor: writer %s in %s; want %s in %s", gs.Writer, gs.WriterRegion, gres.NewWriter, secondary.Name)
	}
	t.Logf("global: writes %d ok, failed %v; reads %d ok, failed %v", gwl.acked(), gwl.failures(), grl.acked(), grl.failures())
	t.Logf("plain:  writes %d ok, failed %v; reads %d ok, failed %v", cwl.acked(), cwl.failures(), crl.acked(), crl.failures())
	if len(gFailedPlain) != 0 || len(gReadsFailedPlain) != 0 {
		t.Errorf("the global pools failed during the plain cluster's failover: writes %v, reads %v", gFailedPlain, gReadsFailedPlain)
	}
	if f := gwl.failures(); len(f) != 0 {
		t.Errorf("global writes failed: %v; want none", f)
	}
	if n := gwl.countOn(gres.OldWriter, blocked); n != 0 {
		t.Errorf("%d global writes acknowledged by the old primary after it turned read-only", n)
	}
	// The plain cluster's writes and reads: only what was in flight at
	// its writer's crash may fail; nothing during the global switchover.
	if cFailed > 2 || cReadsFailed > 1 {
		t.Errorf("the plain cluster failed %d writes (2 workers), %d reads (1 worker) in its failover: more than were in flight", cFailed, cReadsFailed)
	}
	if n, r := total(cwl.failures())-cFailed, total(crl.failures())-cReadsFailed; n != 0 || r != 0 {
		t.Errorf("the plain cluster failed %d writes and %d reads during the global switchover; want 0", n, r)
	}
	var gIDs, cIDs []string
	for _, r := range g.Regions() {
		gIDs = append(gIDs, r.Servers...)
	}
	cIDs = c.ServerIDs()
	if out := onGlobal.outside(gIDs); len(out) > 0 {
		t.Errorf("the global pools connected to servers outside the global cluster: %v", out)
	}
	if out := onPlain.outside(cIDs); len(out) > 0 {
		t.Errorf("the plain cluster's pools connected to servers outside it: %v", out)
	}
	for name, l := range map[string]*globalLoad{"global writes": gwl, "global reads": grl} {
		if out := l.serversOutside(gIDs); len(out) > 0 {
			t.Errorf("%s ran outside the global cluster: %v", name, out)
		}
	}
	for name, l := range map[string]*globalLoad{"plain writes": cwl, "plain reads": crl} {
		if out := l.serversOutside(cIDs); len(out) > 0 {
			t.Errorf("%s ran outside the plain cluster: %v", name, out)
		}
	}
	var gAddrs, cAddrs []string
	for _, id := range gIDs {
		gAddrs = append(gAddrs, g.Addr(id))
	}
	for _, id := range cIDs {
		cAddrs = append(cAddrs, c.Addr(id))
	}
	for name, p := range map[string]*pgxpool.Pool{"global": gw, "global-ro": gr} {
		if out := remoteOutside(ctx, p, gAddrs); len(out) > 0 {
			t.Errorf("pool %s holds connections outside the global cluster: %v", name, out)
		}
	}
	for name, p := range map[string]*pgxpool.Pool{"billing": cw, "billing-ro": cr} {
		if out := remoteOutside(ctx, p, cAddrs); len(out) > 0 {
			t.Errorf("pool %s holds connections outside the plain cluster: %v", name, out)
		}
	}
	for _, l := range [][]int64{lost(ctx, t, c, "orders", cwl.ackedIDs())} {
		if len(l) > 0 {
			t.Errorf("the plain cluster lost %d acknowledged writes: %v", len(l), l)
		}
	}
	ids, err := g.CommittedIDs(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range gwl.ackedIDs() {
		if _, ok := slices.BinarySearch(ids, id); !ok {
			t.Errorf("the global cluster lost acknowledged write %d", id)
			break
		}
	}
}
