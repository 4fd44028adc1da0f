package holdfast_test

import (
	"context"
	"errors"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/internal/conn"
)

func TestConnectLimitValidation(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit holdfast.ConnectLimit
		field string // "" when valid
	}{
		{"zero is the default", holdfast.ConnectLimit{}, ""},
		{"off", holdfast.ConnectLimit{InFlight: -1}, ""},
		{"in flight and a rate", holdfast.ConnectLimit{InFlight: 2, PerSecond: 5, Burst: 2}, ""},
		{"a rate only", holdfast.ConnectLimit{InFlight: -1, PerSecond: 0.5}, ""},
		{"negative rate", holdfast.ConnectLimit{PerSecond: -1}, "PerSecond"},
		{"NaN rate", holdfast.ConnectLimit{PerSecond: math.NaN()}, "PerSecond"},
		{"infinite rate", holdfast.ConnectLimit{PerSecond: math.Inf(1)}, "PerSecond"},
		{"a rate too small", holdfast.ConnectLimit{PerSecond: 1e-6}, "PerSecond"},
		{"negative burst", holdfast.ConnectLimit{PerSecond: 1, Burst: -1}, "Burst"},
		{"burst without a rate", holdfast.ConnectLimit{Burst: 3}, "Burst"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := holdfast.New(holdfast.WithConnectLimit(tc.limit))
			if tc.field == "" {
				if err != nil {
					t.Fatalf("New = %v", err)
				}
				f.Close()
				return
			}
			var ce *holdfast.ConfigError
			if !errors.As(err, &ce) || ce.Field != "WithConnectLimit" || !errors.Is(err, errInvalidConfig) {
				t.Fatalf("New = %v; want a *ConfigError of WithConnectLimit", err)
			}
			var inner *holdfast.ConfigError
			if !errors.As(ce.Err, &inner) || inner.Field != tc.field {
				t.Errorf("New = %v; want the field %s named", err, tc.field)
			}
		})
	}
	for _, tc := range []struct {
		maxConns int32
		want     int
	}{{1, 2}, {4, 2}, {8, 2}, {12, 3}, {20, 5}, {100, 25}} {
		if got := conn.DefaultInFlight(tc.maxConns); got != tc.want {
			t.Errorf("DefaultInFlight(%d) = %d, want %d", tc.maxConns, got, tc.want)
		}
	}
}

// admissionRun is one run of the storm test: 1,000 goroutines, each with
// its own deadline, acquire a connection of a pool of MaxConns 20 as a
// role with CONNECTION LIMIT 5, hold it 5 ms and release it.
type admissionRun struct {
	refused53300 int64 // handshakes the server refused with 53300
	ok, failed   int64
	queued       int64 // failures that were *QueuedError
	late         int64 // goroutines that returned past deadline + slack
	worstOver    time.Duration
}

func runAdmission(t *testing.T, dsn, role string, limit holdfast.ConnectLimit, opts ...holdfast.Option) admissionRun {
	t.Helper()
	const (
		goroutines = 1000
		timeout    = 3 * time.Second
		slack      = time.Second
	)
	var r admissionRun
	var refused atomic.Int64
	f := newFactory(t, append(opts, holdfast.WithConnectLimit(limit))...)
	cfg, _ := poolConfig(t, dsn, "sslmode=disable", "user="+role)
	cfg.MaxConns = 20
	cfg.ConnConfig.OnPgError = func(_ *pgconn.PgConn, pe *pgconn.PgError) bool {
		if pe.Code == "53300" {
			refused.Add(1)
		}
		return true
	}
	pool := newPool(t, f, cfg)
	var ok, failed, queued, late atomic.Int64
	var worst atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			dl, _ := ctx.Deadline()
			c, err := f.Acquire(ctx, pool)
			if err == nil {
				_, err = c.Exec(ctx, "SELECT pg_sleep(0.005)")
				c.Release()
			}
			if over := time.Since(dl); over > 0 {
				for {
					w := worst.Load()
					if int64(over) <= w || worst.CompareAndSwap(w, int64(over)) {
						break
					}
				}
				if over > slack {
					late.Add(1)
				}
			}
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, holdfast.ErrQueued):
				queued.Add(1)
				failed.Add(1)
			default:
				failed.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	pool.Close()
	r.refused53300, r.ok, r.failed, r.queued, r.late = refused.Load(), ok.Load(), failed.Load(), queued.Load(), late.Load()
	r.worstOver = time.Duration(worst.Load())
	return r
}

// The admission limit against a role's CONNECTION LIMIT: a pool of 20
// growing under 1,000 goroutines sends at most its admission limit of
// connects at once, so the server refuses fewer of them (53300) than
// without the limit; and no goroutine waits past its context, queued or
// not.
func TestAdmissionLimitAgainstConnectionLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a real server's connection slots under load: skipped with -short")
	}
	dsn := pgtest.DSN(t)
	admin := refusedRole(t, dsn, "admit_role")
	mustExec(t, admin, "ALTER ROLE admit_role CONNECTION LIMIT 5")
	var control int64
	// The default (5 of 20) equals the role's limit: it is measured and
	// reported, but its 53300 count is within the noise of the control's
	// on a loaded machine (393 against 435 in one CI run, 472 against 338
	// in another), and so is 2 in flight (252 to 320 against 362 to 472):
	// connects refused at once come back at once. A rate must cut them.
	for _, tc := range []struct {
		name   string
		limit  holdfast.ConnectLimit
		assert bool // fewer 53300 than the control
	}{
		{"no limit (control)", holdfast.ConnectLimit{InFlight: -1}, false},
		{"default limit (5 of 20)", holdfast.ConnectLimit{}, false},
		{"2 in flight", holdfast.ConnectLimit{InFlight: 2}, false},
		{"2 in flight, 10/s", holdfast.ConnectLimit{InFlight: 2, PerSecond: 10, Burst: 2}, true},
	} {
		r := runAdmission(t, dsn, "admit_role", tc.limit)
		t.Logf("MEASURED %s: 53300 refusals %d; acquires ok %d, failed %d (not admitted %d); late %d, worst past the deadline %v",
			tc.name, r.refused53300, r.ok, r.failed, r.queued, r.late, r.worstOver.Round(time.Millisecond))
		if r.late > 0 {
			t.Errorf("%s: %d goroutines returned more than 1 s past their deadline (worst %v)", tc.name, r.late, r.worstOver)
		}
		if tc.limit.InFlight < 0 {
			control = r.refused53300
		} else if tc.assert && r.refused53300 >= control {
			t.Errorf("%s: %d refusals 53300, not fewer than the control's %d", tc.name, r.refused53300, control)
		}
	}
}

// A connect queued behind the limit leaves when its caller's deadline
// passes: Factory.Acquire returns by the deadline with a *QueuedError (or
// the deadline), the wait is counted in holdfast.connect.queued with the
// pool's target, and the slot holders are not disturbed.
func TestAdmissionQueuedConnectRespectsTheCallersDeadline(t *testing.T) {
	dsn := pgtest.DSN(t)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	hold := make(chan struct{})
	var dials atomic.Int64
	f := newFactory(t, holdfast.WithConnectLimit(holdfast.ConnectLimit{InFlight: 1}),
		holdfast.WithMeterProvider(mp))
	cfg, _ := poolConfig(t, dsn, "sslmode=disable")
	cfg.MaxConns = 4
	base := cfg.ConnConfig.DialFunc
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if dials.Add(1) == 1 {
			select { // the first connect hangs until released
			case <-hold:
			case <-ctx.Done():
			}
		}
		return base(ctx, network, addr)
	}
	pool := newPool(t, f, cfg, holdfast.PoolName("admit"))
	first := make(chan error, 1)
	go func() {
		c, err := f.Acquire(context.Background(), pool)
		if err == nil {
			c.Release()
		}
		first <- err
	}()
	for dials.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	startAt := time.Now()
	_, err := f.Acquire(ctx, pool)
	took := time.Since(startAt)
	t.Logf("MEASURED queued Acquire: %v after %v", err, took.Round(time.Millisecond))
	if err == nil {
		t.Fatal("the second connect was admitted while the only slot was held")
	}
	if !errors.Is(err, holdfast.ErrQueued) && !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Acquire = %v; want a *QueuedError or the deadline", err)
	}
	if took > 300*time.Millisecond+500*time.Millisecond {
		t.Errorf("Acquire returned %v after its start, its deadline was 300 ms", took)
	}
	close(hold)
	if err := <-first; err != nil {
		t.Errorf("the first connect: %v", err)
	}
	if d := dials.Load(); d != 1 {
		// The queued connect was never dialed: it gave up before a slot.
		t.Logf("dials %d", d)
	}
	// The queued connect ends (its wait is bounded by the caller's
	// deadline) and is counted, with the pool's target.
	deadline := time.Now().Add(5 * time.Second)
	for {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		n, attrs := sumCounter(rm, "holdfast.connect.queued")
		if n >= 1 {
			if v, ok := attrs.Value("db.client.connection.pool.name"); !ok || v.AsString() != "admit" {
				t.Errorf("holdfast.connect.queued attributes %v; want the pool's target", attrs.ToSlice())
			}
			if v, ok := attrs.Value("holdfast.outcome"); !ok || v.AsString() != "refused" {
				t.Errorf("holdfast.connect.queued outcome %v; want refused", attrs.ToSlice())
			}
			if _, ok := attrs.Value("server.address"); !ok {
				t.Errorf("holdfast.connect.queued attributes %v; want server.address", attrs.ToSlice())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("holdfast.connect.queued was not recorded")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sumCounter returns the sum of the Int64 counter name and the attributes
// of one of its points.
func sumCounter(rm metricdata.ResourceMetrics, name string) (int64, attribute.Set) {
	var n int64
	var attrs attribute.Set
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			if s, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, dp := range s.DataPoints {
					n += dp.Value
					attrs = dp.Attributes
				}
			}
		}
	}
	return n, attrs
}
