package holdfast_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/internal/compose"
	"github.com/holdfast-db/holdfast/retry"
)

// The telemetry benchmarks compare, in one run, a plain pgxpool with pools
// configured by factories with no-op providers and with the OpenTelemetry
// SDK (a ManualReader, never collected during the loop):
//
//	go test -run '^$' -bench 'Telemetry' -benchmem -count 10 .
//
// Sub-benchmarks plain, noop and sdk are the three sides of each ratio.

type telemetryPools struct {
	plain, noop, sdk *pgxpool.Pool
	fNoop, fSDK      *holdfast.Factory
}

func newTelemetryPools(tb testing.TB) telemetryPools {
	tb.Helper()
	dsn := pgtest.DSN(tb) + "&sslmode=disable"
	mk := func(f *holdfast.Factory) *pgxpool.Pool {
		cfg, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			tb.Fatal(err)
		}
		cfg.MaxConns = 4
		if f != nil {
			if err := f.Configure(cfg); err != nil {
				tb.Fatal(err)
			}
		}
		p, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(p.Close)
		if err := p.Ping(context.Background()); err != nil {
			tb.Fatal(err)
		}
		return p
	}
	budget := func() holdfast.Option {
		b, err := retry.NewBudget(retry.DefaultBudget())
		if err != nil {
			tb.Fatal(err)
		}
		return holdfast.WithRetryBudget(b)
	}
	fNoop, err := holdfast.New(budget(),
		holdfast.WithMeterProvider(metricnoop.NewMeterProvider()),
		holdfast.WithTracerProvider(tracenoop.NewTracerProvider()))
	if err != nil {
		tb.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	tp := sdktrace.NewTracerProvider()
	tb.Cleanup(func() {
		_ = mp.Shutdown(context.Background())
		_ = tp.Shutdown(context.Background())
	})
	fSDK, err := holdfast.New(budget(), holdfast.WithMeterProvider(mp), holdfast.WithTracerProvider(tp))
	if err != nil {
		tb.Fatal(err)
	}
	return telemetryPools{plain: mk(nil), noop: mk(fNoop), sdk: mk(fSDK), fNoop: fNoop, fSDK: fSDK}
}

func acquireRelease(tb testing.TB, acquire func() (*pgxpool.Conn, error)) {
	c, err := acquire()
	if err != nil {
		tb.Fatal(err)
	}
	c.Release()
}

func acquireSelect1(tb testing.TB, acquire func() (*pgxpool.Conn, error)) {
	c, err := acquire()
	if err != nil {
		tb.Fatal(err)
	}
	var n int
	if err := c.QueryRow(context.Background(), "SELECT 1").Scan(&n); err != nil {
		tb.Fatal(err)
	}
	c.Release()
}

// With no-op providers, Configure installs no tracer of telemetry's: the
// pool config's tracer traces no Release, and on Acquire only calls the
// outage layer's hooks while their switch is on (the database not up: the
// demand its prober's pace follows), one atomic load each way while it is
// up: no allocation, no lock.
// The test also checks that with the SDK the tracer is installed, and how
// much it allocates per Acquire.
func TestTelemetryNoopAddsNothingToAcquire(t *testing.T) {
	p := newTelemetryPools(t)
	ctx := context.Background()

	t.Run("nothing installed with no-op providers", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			f    func(t *testing.T) *holdfast.Factory
		}{
			{"no-op providers", func(*testing.T) *holdfast.Factory { return p.fNoop }},
			{"global providers, none set", func(t *testing.T) *holdfast.Factory { return newFactory(t) }},
		} {
			t.Run(tc.name, func(t *testing.T) {
				cfg, _ := poolConfig(t, pgtest.DSN(t), "sslmode=disable")
				if err := tc.f(t).Configure(cfg); err != nil {
					t.Fatal(err)
				}
				// The pool config's tracer only carries holdfast's
				// composition: it traces no Acquire or Release, and each
				// connection gets the user's tracer itself.
				noPoolTracer(t, cfg)
				user := &queryCounter{}
				cfg2, _ := poolConfig(t, pgtest.DSN(t), "sslmode=disable")
				cfg2.ConnConfig.Tracer = user
				if err := tc.f(t).Configure(cfg2); err != nil {
					t.Fatal(err)
				}
				noPoolTracer(t, cfg2)
				if n := queriesSeen(t, cfg2, user); n != 1 {
					t.Errorf("the user's tracer saw %d statements, want 1: holdfast must forward to it", n)
				}
			})
		}
		cfg, _ := poolConfig(t, pgtest.DSN(t), "sslmode=disable")
		if err := p.fSDK.Configure(cfg); err != nil {
			t.Fatal(err)
		}
		if cfg.ConnConfig.Tracer == nil {
			t.Error("with the SDK, Configure installed no tracer")
		}
	})

	plainAcq := func() (*pgxpool.Conn, error) { return p.plain.Acquire(ctx) }
	noopAcq := func() (*pgxpool.Conn, error) { return p.fNoop.Acquire(ctx, p.noop) }
	sdkAcq := func() (*pgxpool.Conn, error) { return p.fSDK.Acquire(ctx, p.sdk) }
	for _, tc := range []struct {
		name string
		op   func(testing.TB, func() (*pgxpool.Conn, error))
	}{
		{"Acquire+Release", acquireRelease},
		{"Acquire+SELECT 1+Release", acquireSelect1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plain := testing.AllocsPerRun(500, func() { tc.op(t, plainAcq) })
			noop := testing.AllocsPerRun(500, func() { tc.op(t, noopAcq) })
			sdk := testing.AllocsPerRun(500, func() { tc.op(t, sdkAcq) })
			t.Logf("allocs per op: plain %v, holdfast no-op %v, holdfast SDK %v", plain, noop, sdk)
			if noop != plain {
				t.Errorf("holdfast with no-op providers allocates %v per op, plain pgxpool %v: want equal", noop, plain)
			}
			// The SDK path adds the acquire-start context and nothing else.
			if sdk > plain+1 {
				t.Errorf("holdfast with the SDK allocates %v per op, plain pgxpool %v: want at most one more", sdk, plain)
			}
		})
	}
}

func BenchmarkTelemetryAcquireRelease(b *testing.B) {
	p := newTelemetryPools(b)
	ctx := context.Background()
	run := func(acquire func() (*pgxpool.Conn, error)) func(*testing.B) {
		return func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				acquireRelease(b, acquire)
			}
		}
	}
	b.Run("plain", run(func() (*pgxpool.Conn, error) { return p.plain.Acquire(ctx) }))
	b.Run("noop", run(func() (*pgxpool.Conn, error) { return p.fNoop.Acquire(ctx, p.noop) }))
	b.Run("sdk", run(func() (*pgxpool.Conn, error) { return p.fSDK.Acquire(ctx, p.sdk) }))
}

func BenchmarkTelemetryAcquireSelect1(b *testing.B) {
	p := newTelemetryPools(b)
	ctx := context.Background()
	run := func(acquire func() (*pgxpool.Conn, error)) func(*testing.B) {
		return func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				acquireSelect1(b, acquire)
			}
		}
	}
	b.Run("plain", run(func() (*pgxpool.Conn, error) { return p.plain.Acquire(ctx) }))
	b.Run("noop", run(func() (*pgxpool.Conn, error) { return p.fNoop.Acquire(ctx, p.noop) }))
	b.Run("sdk", run(func() (*pgxpool.Conn, error) { return p.fSDK.Acquire(ctx, p.sdk) }))
}

// BenchmarkTelemetryPaired measures the three pools in short interleaved
// rounds (rotating which goes first), so that the load of a shared machine
// weighs on all three alike, and reports the median of the per-round ratios
// to plain pgxpool: noop/plain and sdk/plain. Run it with
//
//	go test -run '^$' -bench TelemetryPaired -count 5 .
func BenchmarkTelemetryPaired(b *testing.B) {
	p := newTelemetryPools(b)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		op   func(testing.TB, func() (*pgxpool.Conn, error))
		n    int // operations per pool per round
	}{
		{"AcquireRelease", acquireRelease, 2000},
		{"AcquireSelect1", acquireSelect1, 100},
	} {
		b.Run(tc.name, func(b *testing.B) {
			acquires := []func() (*pgxpool.Conn, error){
				func() (*pgxpool.Conn, error) { return p.plain.Acquire(ctx) },
				func() (*pgxpool.Conn, error) { return p.fNoop.Acquire(ctx, p.noop) },
				func() (*pgxpool.Conn, error) { return p.fSDK.Acquire(ctx, p.sdk) },
			}
			var noopRatios, sdkRatios []float64
			var total [3]time.Duration
			round := 0
			for b.Loop() {
				var took [3]time.Duration
				for k := range 3 {
					i := (round + k) % 3
					start := time.Now()
					for range tc.n {
						tc.op(b, acquires[i])
					}
					took[i] = time.Since(start)
					total[i] += took[i]
				}
				round++
				noopRatios = append(noopRatios, float64(took[1])/float64(took[0]))
				sdkRatios = append(sdkRatios, float64(took[2])/float64(took[0]))
			}
			ops := float64(round * tc.n)
			b.ReportMetric(median(noopRatios), "noop/plain")
			b.ReportMetric(median(sdkRatios), "sdk/plain")
			b.ReportMetric(float64(total[0].Nanoseconds())/ops, "plain-ns/op")
			b.ReportMetric(float64(total[1].Nanoseconds())/ops, "noop-ns/op")
			b.ReportMetric(float64(total[2].Nanoseconds())/ops, "sdk-ns/op")
		})
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// noPoolTracer fails t when cfg's tracer traces acquires or releases: the
// Acquire path would then call it.
func noPoolTracer(t *testing.T, cfg *pgxpool.Config) {
	t.Helper()
	if compose.TracesAcquire(cfg.ConnConfig.Tracer) {
		t.Errorf("the pool config's tracer %T traces Acquire", cfg.ConnConfig.Tracer)
	}
	if _, ok := cfg.ConnConfig.Tracer.(pgxpool.ReleaseTracer); ok {
		t.Errorf("the pool config's tracer %T traces Release", cfg.ConnConfig.Tracer)
	}
}

// queriesSeen runs one statement on a pool built from cfg and returns how
// many statements user's tracer saw.
func queriesSeen(t *testing.T, cfg *pgxpool.Config, user *queryCounter) int64 {
	t.Helper()
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(context.Background(), "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	return user.n.Load()
}
