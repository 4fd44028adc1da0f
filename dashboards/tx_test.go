package dashboards_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/fakes"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/retry"
	"github.com/holdfast-db/holdfast/sqldb"
)

// String is s as the exposition format writes it, without OpenTelemetry's
// scope labels and the value.
func (s series) String() string {
	var kvs []string
	for l, v := range s.labels {
		if !strings.HasPrefix(l, "otel_scope_") {
			kvs = append(kvs, l+`="`+v+`"`)
		}
	}
	sort.Strings(kvs)
	return s.name + "{" + strings.Join(kvs, ",") + "}"
}

// Issue 29, item 2: the transaction runner's series — retries, give-ups,
// budget rejections — carry the target of the pool behind the runner's db,
// as every holdfast series of a pool does, for each kind of db RunTx
// takes: a pool, a DBTX (what ReadWrite.Write() returns), a *sql.DB
// through sqldb.RunTx, and a connection of the pool. The log lines name
// the pool too. Scraped through OpenTelemetry's Prometheus exporter.
func TestIssue29TransactionMetricsCarryTarget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	var logs fakes.LogBuffer
	policy := retry.Policy{MaxAttempts: 3, Multiplier: 2, InitialInterval: time.Millisecond, MaxInterval: 2 * time.Millisecond}
	newFactory := func(opts ...holdfast.Option) *holdfast.Factory {
		f, err := holdfast.New(append([]holdfast.Option{holdfast.WithMeterProvider(mp), holdfast.WithTxPolicy(policy),
			holdfast.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil)))}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(f.Close)
		return f
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	newPool := func(f *holdfast.Factory, name string) *pgxpool.Pool {
		pool, err := f.NewPool(ctx, cfg.Copy(), holdfast.PoolName(name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return pool
	}
	// The four pools' failures, one factory: a budget that lets every
	// re-run happen (the plain bucket, 20 retries). The default, relative
	// to demand, refuses re-runs from the fourth failure in a row on, and
	// this test is about the series' labels, not the budget.
	plain, err := retry.NewBudget(retry.DefaultBudget())
	if err != nil {
		t.Fatal(err)
	}
	f := newFactory(holdfast.WithRetryBudget(plain))
	// A budget of one retry: the second re-run is refused.
	budget, err := retry.NewBudget(retry.BudgetConfig{Capacity: 1, RetryCost: 1})
	if err != nil {
		t.Fatal(err)
	}
	stingy := newFactory(holdfast.WithRetryBudget(budget))

	serialization := func(pgx.Tx) error { return &pgconn.PgError{Severity: "ERROR", Code: "40001"} }
	runs := []struct {
		pool string
		run  func(p *pgxpool.Pool) error
	}{
		{"orders", func(p *pgxpool.Pool) error { return f.RunTx(ctx, p, pgx.TxOptions{}, serialization) }},
		{"ledger", func(p *pgxpool.Pool) error { return f.RunTx(ctx, f.DBTX(p), pgx.TxOptions{}, serialization) }},
		{"reports", func(p *pgxpool.Pool) error {
			db := sqldb.OpenDB(p)
			defer db.Close()
			return sqldb.RunTx(ctx, f, db, nil, func(*sql.Tx) error { return serialization(nil) })
		}},
		{"held", func(p *pgxpool.Pool) error { // a connection of the pool's
			c, err := p.Acquire(ctx)
			if err != nil {
				return err
			}
			defer c.Release()
			return f.RunTx(ctx, c.Conn(), pgx.TxOptions{}, serialization)
		}},
	}
	for _, r := range runs {
		if err := r.run(newPool(f, r.pool)); err == nil {
			t.Fatalf("%s: RunTx = nil, want the serialization failure", r.pool)
		}
	}
	if err := stingy.RunTx(ctx, newPool(stingy, "stingy"), pgx.TxOptions{}, serialization); err == nil {
		t.Fatal("stingy: RunTx = nil, want the serialization failure")
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
	s := parse(t, string(body))
	for _, tc := range []struct {
		name  string
		pools []string
	}{
		{"holdfast_retries_total", []string{"orders", "ledger", "reports", "held", "stingy"}},
		{"holdfast_retry_exhausted_total", []string{"orders", "ledger", "reports", "held"}},
		{"holdfast_retry_budget_rejections_total", []string{"stingy"}},
	} {
		var pools []string
		for _, ser := range s[tc.name] {
			if ser.labels["holdfast_layer"] != "transaction" {
				continue
			}
			t.Log(ser)
			for _, l := range target {
				if _, ok := ser.labels[l]; !ok {
					t.Errorf("%v lacks the target label %s", ser, l)
				}
			}
			if ser.labels["server_address"] != cfg.ConnConfig.Host || ser.labels["db_namespace"] != cfg.ConnConfig.Database {
				t.Errorf("%v: want the pool's configured host %s and database %s", ser, cfg.ConnConfig.Host, cfg.ConnConfig.Database)
			}
			pools = append(pools, ser.labels["db_client_connection_pool_name"])
		}
		sort.Strings(pools)
		if want := slices.Sorted(slices.Values(tc.pools)); !slices.Equal(pools, want) {
			t.Errorf("%s{holdfast_layer=\"transaction\"}: pools %q, want one series for each of %q", tc.name, pools, want)
		}
	}

	// Every WARN line of a re-run names its pool.
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not JSON: %q", line)
		}
		if rec["msg"] != "holdfast: retrying after a transient failure" || rec["holdfast.layer"] != "transaction" {
			continue
		}
		n++
		if rec["holdfast.pool"] == nil || rec["server.address"] == nil || rec["db.namespace"] == nil {
			t.Errorf("a transaction retry line names no pool: %s", line)
		}
	}
	if n == 0 {
		t.Errorf("no transaction retry line:\n%s", logs.String())
	}
}
