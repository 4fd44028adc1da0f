package holdfast_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/fakes"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
)

// Log lines say which database they concern (server.address, server.port,
// db.namespace, holdfast.pool), a retry that succeeds ends with one
// "recovered" line, and an outage's retry lines are sampled per target:
// 50 callers failing the same way write one retry line, not 50.
func TestLogsNameTheTargetAndAreSampled(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	t.Run("target and recovery", func(t *testing.T) {
		t.Parallel()
		rig := newRig(t)
		cfg, addr, port := otelPoolConfig(t, dsn)
		cfg.ConnConfig.DialFunc = fakes.NewConnector(addr, fakes.Refused()).Dial
		f := newFactory(t, rig.options()...)
		pool := newPool(t, f, cfg, holdfast.PoolName("orders"))
		if err := pool.Ping(context.Background()); err != nil {
			t.Fatal(err)
		}
		retried := rig.logs.lines("holdfast: retrying after a transient failure")
		recovered := rig.logs.lines("holdfast: recovered")
		if len(retried) != 1 || len(recovered) != 1 {
			t.Fatalf("want one retry line and one recovered line:\n%s", rig.logs.String())
		}
		for _, line := range append(retried, recovered...) {
			for _, want := range []string{`"server.address":"` + configuredHost + `"`, `"server.port":` + port, `"db.namespace":"postgres"`, `"holdfast.pool":"orders"`} {
				if !strings.Contains(line, want) {
					t.Errorf("line lacks %s: %s", want, line)
				}
			}
		}
		if !strings.Contains(recovered[0], `"attempts":2`) || !strings.Contains(recovered[0], `"error.reason":"conn-refused"`) {
			t.Errorf("recovered line: %s", recovered[0])
		}
	})
	t.Run("sampled", func(t *testing.T) {
		t.Parallel()
		rig := newRig(t)
		cfg, addr, _ := otelPoolConfig(t, dsn, "pool_max_conns=50")
		cfg.ConnConfig.DialFunc = fakes.NewConnector(addr, fakes.Refused().Forever()).Dial
		f := newFactory(t, rig.options()...)
		pool := newPool(t, f, cfg)
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				if c, err := f.Acquire(context.Background(), pool); err == nil {
					c.Release()
				}
			})
		}
		wg.Wait()
		retried := rig.logs.lines("holdfast: retrying after a transient failure")
		gaveUp := rig.logs.lines("holdfast: giving up after transient failures")
		// The outage lasts milliseconds: one line of each kind; sampling
		// is per second, so a slow machine may add one more.
		if len(retried) < 1 || len(retried) > 2 || len(gaveUp) < 1 || len(gaveUp) > 2 {
			t.Errorf("%d retry lines and %d give-up lines for 50 failing callers, want 1 or 2 of each:\n%s",
				len(retried), len(gaveUp), rig.logs.String())
		}
	})
}

// An application that records db.client.operation.duration with another
// tracer (otelpgx) drops holdfast's with an OpenTelemetry view, as
// WithMeterProvider's doc says; the connection metrics stay.
func TestOperationDurationDroppedByAView(t *testing.T) {
	t.Parallel()
	for _, drop := range []bool{false, true} {
		rig := newRig(t)
		if drop {
			rig.reader = sdkmetric.NewManualReader()
			rig.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(rig.reader), sdkmetric.WithView(sdkmetric.NewView(
				sdkmetric.Instrument{Name: "db.client.operation.duration", Scope: instrumentation.Scope{Name: "github.com/holdfast-db/holdfast"}},
				sdkmetric.Stream{Aggregation: sdkmetric.AggregationDrop{}})))
			t.Cleanup(func() { _ = rig.mp.Shutdown(context.Background()) })
		}
		cfg, _, _ := otelPoolConfig(t, pgtest.DSN(t))
		f := newFactory(t, rig.options()...)
		pool := newPool(t, f, cfg)
		if _, err := pool.Exec(context.Background(), "SELECT 1"); err != nil {
			t.Fatal(err)
		}
		got := rig.collect(t)
		_, hasOp := got["db.client.operation.duration"]
		_, hasCreate := got["db.client.connection.create_time"]
		if hasOp == drop || !hasCreate {
			t.Errorf("view dropping it %v: operation.duration recorded %v, create_time %v", drop, hasOp, hasCreate)
		}
	}
}
