package dashboards_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/fakes"
	"github.com/holdfast-db/holdfast/fakes/failovertest"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/readiness"
	"github.com/holdfast-db/holdfast/retry"
	"github.com/holdfast-db/holdfast/sqldb"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// series is one scraped sample: its metric name and labels.
type series struct {
	name   string
	labels map[string]string
}

// scrape is what Prometheus scraped, by metric name.
type scrape map[string][]series

// has reports whether a series of name exists.
func (s scrape) has(name string) bool { return len(s[name]) > 0 }

// scrapeRun plays, on a real failover cluster (a writer and a standby)
// with OpenTelemetry's Prometheus exporter, what the dashboard shows: a
// workload, a sustained 53300 (retries, give-ups), a 53300 that lifts
// (a recovery), a retry budget that runs out, readiness, blue/green
// monitoring and a failover event (an instance leaving the topology);
// then it scrapes /metrics as Prometheus would.
func scrapeRun(t *testing.T) (scrape, string) {
	t.Helper()
	if _, err := pgtest.BinDir(); err != nil {
		if os.Getenv(pgtest.EnvRequire) == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := failovertest.Start(ctx, failovertest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	defer func() { _ = mp.Shutdown(context.Background()) }()

	admin, err := pgx.Connect(ctx, c.DSN(c.Addr(c.Writer())))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	for _, sql := range []string{
		"CREATE ROLE dash_limited LOGIN CONNECTION LIMIT 0",
		"CREATE ROLE dash_blip LOGIN CONNECTION LIMIT 0",
	} {
		if _, err := admin.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}

	// The blip's limit is lifted at its first retry line: a recovery.
	var lift sync.Once
	lifted := make(chan struct{})
	var logs fakes.LogBuffer
	logger := slog.New(hook{inner: slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}), fn: func(r slog.Record) {
		if r.Message == "holdfast: retrying after a transient failure" && attr(r, "holdfast.pool") == "blip" {
			lift.Do(func() { close(lifted) })
		}
	}})
	defer func() { checkLogTargets(t, logs.String()) }()
	policy := retry.Policy{MaxAttempts: 4, Multiplier: 2, InitialInterval: 20 * time.Millisecond,
		MaxInterval: 200 * time.Millisecond, MaxElapsed: 5 * time.Second, AttemptTimeout: 2 * time.Second}
	// One factory for the pools whose failures the dashboard shows
	// (limited's refusals, then the blip's): a budget that still retries
	// the blip after limited's failures (the plain bucket, 20 retries).
	// The default, relative to demand, would refuse it, limited's four
	// failures in a row having left it at its threshold; "stingy" shows
	// the budget's refusals.
	plain, err := retry.NewBudget(retry.DefaultBudget())
	if err != nil {
		t.Fatal(err)
	}
	f, err := holdfast.New(holdfast.WithMeterProvider(mp), holdfast.WithLogger(logger), holdfast.WithRetryPolicy(policy),
		holdfast.WithFailover(failover.Config{}), holdfast.WithBlueGreen(bluegreen.Config{}), holdfast.WithRetryBudget(plain))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	budget, err := retry.NewBudget(retry.BudgetConfig{Capacity: 1, RetryCost: 1})
	if err != nil {
		t.Fatal(err)
	}
	stingy, err := holdfast.New(holdfast.WithMeterProvider(mp), holdfast.WithRetryPolicy(policy), holdfast.WithRetryBudget(budget),
		holdfast.WithConnectLimit(holdfast.ConnectLimit{InFlight: 1}))
	if err != nil {
		t.Fatal(err)
	}
	defer stingy.Close()

	pool := func(f *holdfast.Factory, name string, extra ...string) *pgxpool.Pool {
		cfg, err := c.PoolConfig(c.ClusterEndpoint, extra...)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Configure(cfg, holdfast.PoolName(name)); err != nil {
			t.Fatal(err)
		}
		p, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return p
	}
	orders := pool(f, "orders")
	if err := f.Start(ctx, orders); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if _, err := orders.Exec(ctx, "SELECT 1"); err != nil {
			t.Fatal(err)
		}
	}
	if err := pool(f, "limited", "user=dash_limited").Ping(ctx); err == nil {
		t.Fatal("a role with CONNECTION LIMIT 0 connected")
	}
	// Two connects at once behind an admission limit of one: the second
	// is queued.
	stingyPool := pool(stingy, "stingy", "user=dash_limited")
	pings := make(chan error, 2)
	for range 2 {
		go func() { pings <- stingyPool.Ping(ctx) }()
	}
	for range 2 {
		if err := <-pings; err == nil {
			t.Fatal("a role with CONNECTION LIMIT 0 connected")
		}
	}
	blip := pool(f, "blip", "user=dash_blip")
	done := make(chan error, 1)
	go func() { done <- blip.Ping(ctx) }()
	select {
	case <-lifted:
	case <-ctx.Done():
		t.Fatal("no retry line for the blip")
	}
	if _, err := admin.Exec(ctx, "ALTER ROLE dash_blip CONNECTION LIMIT -1"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the blip did not recover: %v", err)
	}

	// database/sql beside the pgxpool, one Checker over both.
	reportsCfg, err := c.PoolConfig(c.ClusterEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Configure(reportsCfg, holdfast.PoolName("reports")); err != nil {
		t.Fatal(err)
	}
	reports, err := sqldb.Open(ctx, f, reportsCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer reports.Close()
	if _, err := reports.ExecContext(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	chk, err := readiness.New(readiness.Config{Factory: f, DrainInterval: 10 * time.Millisecond, CheckInterval: time.Nanosecond},
		readiness.Pool(orders), readiness.DB(reports))
	if err != nil {
		t.Fatal(err)
	}
	defer chk.Close()
	if err := chk.Start(ctx); err != nil {
		t.Fatal(err)
	}
	chk.Check(ctx)
	if _, err := chk.Drain(ctx, "dashboard test"); err != nil {
		t.Fatal(err)
	}
	chk.Enable()

	// An Acquire that times out waiting for a connection.
	small := pool(f, "small", "pool_max_conns=1")
	held, err := small.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tctx, tcancel := context.WithTimeout(ctx, 20*time.Millisecond)
	if c, err := small.Acquire(tctx); err == nil {
		c.Release()
		t.Fatal("a second Acquire of a pool of one connection did not wait")
	}
	tcancel()
	held.Release()

	// A failover event: a standby leaves the topology.
	m := f.Failover(orders)
	if !waitFor(ctx, func() bool { return m.Status().Writer != "" }) {
		t.Fatal("the failover monitor never read the topology")
	}
	var standby string
	for _, id := range c.ServerIDs() {
		if id != c.Writer() {
			standby = id
		}
	}
	if _, err := admin.Exec(ctx, "DELETE FROM holdfast_failover.replica_status WHERE server_id = $1", standby); err != nil {
		t.Fatal(err)
	}
	if !waitFor(ctx, func() bool {
		for _, e := range m.Status().Events {
			if e.Name == "instance left" {
				return true
			}
		}
		return false
	}) {
		t.Fatal("no failover event after a standby left the topology")
	}

	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return parse(t, string(body)), string(body)
}

// parse reads the text exposition format: "name{k="v",…} value".
func parse(t *testing.T, text string) scrape {
	t.Helper()
	out := scrape{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, rest, _ := strings.Cut(line, "{")
		s := series{labels: map[string]string{}}
		if i := strings.IndexByte(name, ' '); i >= 0 { // no labels
			s.name = name[:i]
		} else {
			s.name = name
			labels, _, ok := strings.Cut(rest, "} ")
			if !ok {
				t.Fatalf("cannot parse %q", line)
			}
			for _, kv := range splitLabels(labels) {
				k, v, _ := strings.Cut(kv, "=")
				s.labels[k] = strings.Trim(v, `"`)
			}
		}
		out[s.name] = append(out[s.name], s)
	}
	return out
}

// splitLabels splits k="v",k="v" at the commas outside quotes.
func splitLabels(s string) []string {
	var out []string
	quoted, start := false, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			quoted = !quoted
		case ',':
			if !quoted {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// names returns the scraped metric names with prefix, sorted.
func (s scrape) names(prefix string) []string {
	var out []string
	for n := range s {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

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

// hook calls fn with each record and writes it with inner.
type hook struct {
	inner slog.Handler
	fn    func(slog.Record)
}

func (h hook) Enabled(ctx context.Context, l slog.Level) bool { return h.inner.Enabled(ctx, l) }
func (h hook) Handle(ctx context.Context, r slog.Record) error {
	h.fn(r)
	return h.inner.Handle(ctx, r)
}
func (h hook) WithAttrs(as []slog.Attr) slog.Handler {
	return hook{inner: h.inner.WithAttrs(as), fn: h.fn}
}
func (h hook) WithGroup(g string) slog.Handler { return hook{inner: h.inner.WithGroup(g), fn: h.fn} }

// checkLogTargets fails when a line of holdfast, its failover monitor or
// its blue/green routing does not name the database it concerns.
func checkLogTargets(t *testing.T, text string) {
	t.Helper()
	n := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		var line map[string]any
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Errorf("not JSON: %q", l)
			continue
		}
		msg, _ := line["msg"].(string)
		prefix, _, _ := strings.Cut(msg, ":")
		n[prefix]++
		if line["server.address"] == nil || line["server.port"] == nil || line["db.namespace"] == nil {
			t.Errorf("a line without its target: %s", l)
		}
	}
	if n["failover"] == 0 || n["holdfast"] == 0 {
		t.Errorf("lines by source %v, want failover's and holdfast's:\n%s", n, text)
	}
}

func attr(r slog.Record, key string) string {
	var v string
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value.String()
			return false
		}
		return true
	})
	return v
}
