package bluegreen_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/internal/conn"
	"github.com/holdfast-db/holdfast/retry"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

func quietConfig() bluegreen.Config {
	c := fastConfig()
	c.Logger = slog.New(slog.DiscardHandler)
	return c
}

// plainConfig is a pool config for the shared test server, which has no
// blue/green metadata: the routing stays normal.
func plainConfig(t testing.TB) *pgxpool.Config {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(t) + "&pool_max_conns=4")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// waitAbsent waits until both monitors found no metadata.
func waitAbsent(t testing.TB, r bluegreen.Router) {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		ch := r.Changed()
		st := r.Status()
		if st.Monitors[0].Observation == "absent" && st.Monitors[1].Observation == "absent" {
			if !st.Routing.Normal || st.Phase != bluegreen.NotCreated {
				t.Fatalf("no metadata, yet phase %v routing %+v", st.Phase, st.Routing)
			}
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("monitors did not find the metadata absent: %+v", st)
		}
	}
}

type countingTracer struct{ starts atomic.Int64 }

func (c *countingTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.starts.Add(1)
	return ctx
}
func (c *countingTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// The factory chains the hooks already in the config with the blue/green
// layer's; it never replaces them.
func TestHooksAreChained(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		beforeAcquire bool // the deprecated hook instead of PrepareConn
	}{
		{name: "PrepareConn"},
		{name: "BeforeAcquire", beforeAcquire: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			cfg := plainConfig(t)
			var connects, prepares, releases atomic.Int64
			cfg.BeforeConnect = func(context.Context, *pgx.ConnConfig) error { connects.Add(1); return nil }
			if tt.beforeAcquire {
				//lint:ignore SA1019 testing that the deprecated hook still runs
				cfg.BeforeAcquire = func(context.Context, *pgx.Conn) bool { prepares.Add(1); return true }
			} else {
				cfg.PrepareConn = func(context.Context, *pgx.Conn) (bool, error) { prepares.Add(1); return true, nil }
			}
			released := make(chan struct{}, 1)
			cfg.AfterRelease = func(*pgx.Conn) bool {
				releases.Add(1)
				released <- struct{}{}
				return true
			}
			tr := &countingTracer{}
			cfg.ConnConfig.Tracer = tr
			f, err := holdfast.New(holdfast.WithBlueGreen(quietConfig()))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := f.Configure(cfg); err != nil {
				t.Fatal(err)
			}
			//lint:ignore SA1019 checking that it was cleared
			if cfg.BeforeAcquire != nil {
				t.Error("BeforeAcquire left set: pgxpool would ignore it beside PrepareConn")
			}
			pool, err := pgxpool.NewWithConfig(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			r := f.BlueGreen(pool)
			if r == nil || conn.OfConfig(cfg).BlueGreen() != r {
				t.Fatal("the pool's config does not lead to the router behind a combined tracer")
			}
			c, err := pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Exec(ctx, "SELECT 1"); err != nil {
				t.Fatal(err)
			}
			c.Release()
			<-released // AfterRelease runs on a goroutine of pgxpool's
			waitAbsent(t, r)
			// The monitors' connections (both connected: they found the
			// metadata absent) go through neither the pool's BeforeConnect
			// (the factory sets their password) nor its tracer.
			st := r.Status()
			monitors := int64(st.Monitors[0].Connects + st.Monitors[1].Connects)
			if monitors < 2 || connects.Load() != 1 || prepares.Load() != 1 || tr.starts.Load() != 1 || releases.Load() != 1 {
				t.Errorf("user hooks: BeforeConnect %d (monitors %d), PrepareConn/BeforeAcquire %d, tracer %d, AfterRelease %d; want 1 (monitors at least 2), 1, 1, 1",
					connects.Load(), monitors, prepares.Load(), tr.starts.Load(), releases.Load())
			}
		})
	}
}

// With no switchover under way the blue/green layer costs an atomic load:
// a pool of a factory WithBlueGreen allocates no more on Acquire+Release
// than a plain pool, and nothing in its PrepareConn nor in its tracer.
// (The layer's BeforeConnect is measured alone in internal/bgroute: a
// factory's connect does more than route.)
func TestHotPathAllocations(t *testing.T) {
	ctx := context.Background()
	plain, err := pgxpool.NewWithConfig(ctx, plainConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	// Monitors that found no metadata sleep for BaselineInterval: an hour
	// here, so that they allocate nothing while allocations are counted.
	c := quietConfig()
	c.BaselineInterval = time.Hour
	f, err := holdfast.New(holdfast.WithBlueGreen(c))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg := plainConfig(t)
	bg, err := f.NewPool(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer bg.Close()
	waitAbsent(t, f.BlueGreen(bg))
	for _, p := range []*pgxpool.Pool{plain, bg} {
		if err := p.Ping(ctx); err != nil {
			t.Fatal(err)
		}
	}
	acquireRelease := func(p *pgxpool.Pool) func() {
		return func() {
			c, err := p.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			c.Release()
		}
	}
	if a, b := testing.AllocsPerRun(200, acquireRelease(plain)), testing.AllocsPerRun(200, acquireRelease(bg)); b > a {
		t.Errorf("Acquire+Release allocates %v with blue/green, %v without", b, a)
	}
	conn, err := bg.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if n := testing.AllocsPerRun(200, func() {
		ok, err := cfg.PrepareConn(ctx, conn.Conn())
		if !ok || err != nil {
			t.Fatal(ok, err)
		}
	}); n != 0 {
		t.Errorf("PrepareConn allocates %v", n)
	}
	tr := cfg.ConnConfig.Tracer
	if n := testing.AllocsPerRun(200, func() {
		tr.TraceQueryStart(ctx, conn.Conn(), pgx.TraceQueryStartData{SQL: "SELECT 1"})
	}); n != 0 {
		t.Errorf("the query tracer allocates %v", n)
	}
}

// Through holdfast: the factory stops the monitors on Close, a closed
// factory refuses to configure, and a failed NewPool leaves no monitor.
func TestFactoryLifecycle(t *testing.T) {
	t.Parallel()
	f, err := holdfast.New(holdfast.WithBlueGreen(quietConfig()))
	if err != nil {
		t.Fatal(err)
	}
	cfg := plainConfig(t)
	pool, err := f.NewPool(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	r := f.BlueGreen(pool)
	if r == nil {
		t.Fatal("no router in a pool of a factory WithBlueGreen")
	}
	waitAbsent(t, r)
	f.Close()
	f.Close() // idempotent
	if !r.Status().Closed {
		t.Error("Factory.Close left the router running")
	}
	if err := pool.Ping(context.Background()); err != nil {
		t.Errorf("the pool stopped working after Factory.Close: %v", err)
	}
	if err := f.Configure(plainConfig(t)); !errors.Is(err, bluegreen.ErrInvalidConfig) {
		t.Errorf("Configure after Close = %v, want a ConfigError", err)
	}
	_, err = holdfast.New(holdfast.WithBlueGreen(bluegreen.Config{HighInterval: -1}))
	var outer, inner *holdfast.ConfigError
	if !errors.As(err, &outer) || outer.Field != "WithBlueGreen" || !errors.As(outer.Err, &inner) || inner.Pkg != "bluegreen" {
		t.Errorf("New with a negative interval = %v, want a ConfigError wrapping bluegreen's", err)
	}
	// A pool whose first connection fails: NewPool closes its router.
	bad := plainConfig(t)
	bad.ConnConfig.Port = 1
	f2, err := holdfast.New(holdfast.WithBlueGreen(quietConfig()), holdfast.WithStartupPolicy(fastStartup()))
	if err != nil {
		t.Fatal(err)
	}
	defer f2.Close()
	if _, err := f2.NewPool(context.Background(), bad); err == nil {
		t.Fatal("NewPool succeeded against a closed port")
	}
	// The failed pool was never built, so the factory has no handle on its
	// router: the engine's binding in the config leads to it.
	if p := conn.OfConfig(bad); p == nil || p.BlueGreen() == nil || !p.BlueGreen().Status().Closed {
		t.Error("NewPool left the router of a failed pool running")
	}
}

func fastStartup() retry.Policy {
	p := retry.Default()
	p.MaxAttempts, p.InitialInterval = 1, time.Millisecond
	return p
}

// An invalid Config is a bluegreen *ConfigError, which holdfast.New
// returns wrapped in its own.
func TestConfigValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  bluegreen.Config
	}{
		{"negative ConnectTimeout", bluegreen.Config{ConnectTimeout: -time.Second}},
		{"negative SwitchoverTimeout", bluegreen.Config{SwitchoverTimeout: -1}},
		{"negative BaselineInterval", bluegreen.Config{BaselineInterval: -1}},
		{"negative MonitorQueryTimeout", bluegreen.Config{MonitorQueryTimeout: -1}},
		{"unknown engine", bluegreen.Config{Engine: "mysql"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := holdfast.New(holdfast.WithBlueGreen(tt.cfg))
			var outer *holdfast.ConfigError
			if !errors.As(err, &outer) || !errors.Is(err, bluegreen.ErrInvalidConfig) {
				t.Fatalf("New = %v, want a ConfigError", err)
			}
			if inner := outer.Err; !errors.Is(inner, bluegreen.ErrInvalidConfig) || inner.Error()[:len("bluegreen: ")] != "bluegreen: " {
				t.Errorf("New = %v, want it to wrap a bluegreen ConfigError", err)
			}
		})
	}
	f, err := holdfast.New(holdfast.WithBlueGreen(bluegreen.Config{}))
	if err != nil {
		t.Errorf("the zero Config is invalid: %v", err)
	}
	f.Close()
}
