package readiness_test

import (
	"context"
	"testing"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/readiness"
	"github.com/jackc/pgx/v5/pgxpool"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// The Checker records its transitions and drains through its factory's
// meter provider: holdfast.readiness.ready, .transitions, .drain.duration.
func TestReadinessTelemetry(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	f, err := holdfast.New(holdfast.WithMeterProvider(mp), holdfast.WithRetryBudget(nil))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(t) + "&sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	c, err := readiness.New(readiness.Config{Factory: f}, readiness.Pool(pool))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	_ = c.Status() // fail: starting
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if s := c.Check(ctx); !s.Ready() { // pass
		t.Fatalf("not ready after Start: %+v", s)
	}
	if _, err := c.Drain(ctx, "deploy-bot"); err != nil { // fail: draining, drained
		t.Fatal(err)
	}
	_ = c.Status()

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			got[m.Name] = m
		}
	}
	moves, ok := got["holdfast.readiness.transitions"].Data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("no holdfast.readiness.transitions; metrics: %v", keys(got))
	}
	seen := map[string]int64{}
	for _, dp := range moves.DataPoints {
		h, _ := dp.Attributes.Value("holdfast.readiness.health")
		r, _ := dp.Attributes.Value("holdfast.readiness.reason")
		seen[h.AsString()+"/"+r.AsString()] += dp.Value
	}
	for _, want := range []string{"fail/starting", "pass/", "fail/draining"} {
		if seen[want] != 1 {
			t.Errorf("transitions %v: want exactly one %q", seen, want)
		}
	}
	drains, ok := got["holdfast.readiness.drain.duration"].Data.(metricdata.Histogram[float64])
	if !ok || len(drains.DataPoints) != 1 || drains.DataPoints[0].Count != 1 {
		t.Fatalf("drain.duration = %+v, want one drain", got["holdfast.readiness.drain.duration"].Data)
	}
	if o, _ := drains.DataPoints[0].Attributes.Value("holdfast.outcome"); o.AsString() != "drained" {
		t.Errorf("drain outcome = %q, want drained", o.AsString())
	}
	if got["holdfast.readiness.drain.duration"].Unit != "s" {
		t.Errorf("drain.duration unit = %q", got["holdfast.readiness.drain.duration"].Unit)
	}
}

func keys(m map[string]metricdata.Metrics) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
