package holdfast_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/fakes"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
)

// A config is configured once: a second Configure is refused, so the dial
// is not wrapped twice (it was: 9 dials instead of 3 against a refused
// port), and NewPool accepts a config the factory already configured
// without wrapping it again (it did: 45 dials over 9 s).
func TestConfigureOnce(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	t.Run("second Configure", func(t *testing.T) {
		t.Parallel()
		cfg, addr := poolConfig(t, dsn, "sslmode=disable")
		conn := fakes.NewConnector(addr, fakes.Refused().Forever())
		cfg.ConnConfig.DialFunc = conn.Dial
		f := newFactory(t)
		if err := f.Configure(cfg); err != nil {
			t.Fatal(err)
		}
		err := f.Configure(cfg)
		var ce *holdfast.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, errInvalidConfig) {
			t.Fatalf("second Configure = %v, want a *ConfigError", err)
		}
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		if _, err := f.Acquire(context.Background(), pool); err == nil {
			t.Fatal("Acquire succeeded through refused dials")
		}
		if conn.Attempts() != 3 {
			t.Errorf("dials = %d, want 3 (MaxAttempts once, not per wrapper)", conn.Attempts())
		}
	})
	t.Run("Configure then NewPool", func(t *testing.T) {
		t.Parallel()
		cfg, addr := poolConfig(t, dsn, "sslmode=disable")
		conn := fakes.NewConnector(addr, fakes.Refused().Forever())
		cfg.ConnConfig.DialFunc = conn.Dial
		f := newFactory(t)
		if err := f.Configure(cfg); err != nil {
			t.Fatal(err)
		}
		pool, err := f.NewPool(context.Background(), cfg)
		if err == nil {
			pool.Close()
			t.Fatal("NewPool succeeded through refused dials")
		}
		var ce *holdfast.ConnectError
		if !errors.As(err, &ce) || ce.Layer != "startup" {
			t.Fatalf("NewPool = %v, want a *ConnectError of layer startup", err)
		}
		// 2 startup attempts × 3 dials each, as for a config NewPool
		// configures itself.
		if conn.Attempts() != 6 {
			t.Errorf("dials = %d, want 6", conn.Attempts())
		}
	})
	t.Run("after Close", func(t *testing.T) {
		t.Parallel()
		cfg, _ := poolConfig(t, dsn, "sslmode=disable")
		f := newFactory(t)
		f.Close()
		if err := f.Configure(cfg); !errors.Is(err, errInvalidConfig) {
			t.Errorf("Configure after Close = %v, want a *ConfigError", err)
		}
	})
}

// monitorGoroutines counts the blue/green monitor goroutines running now.
// Goroutines are created synchronously by the go statement, so the count
// needs no waiting.
func monitorGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	return strings.Count(string(buf), "bluegreen.(*monitor).run(")
}

// The factory owns what it starts: blue/green monitors start when the pool
// first connects (not at Configure, before any pool exists), the factory
// hands back the pool's router directly, and Close joins the monitors.
// Monitors never run the pool's own BeforeConnect (pgxpool documents it
// as the pool's hook).
//
// Not parallel: it counts the process's monitor goroutines.
func TestBlueGreenMonitorsBelongToThePool(t *testing.T) {
	dsn := pgtest.DSN(t)
	cfg, _ := poolConfig(t, dsn, "sslmode=disable")
	var userCalls atomic.Int64
	cfg.BeforeConnect = func(context.Context, *pgx.ConnConfig) error {
		userCalls.Add(1)
		return nil
	}
	// No log line unless a logger was given (it used to log
	// "bluegreen: NOT_CREATED" to slog.Default on a plain server).
	var defaultLog syncBuffer
	prevDefault := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&defaultLog, nil)))
	defer slog.SetDefault(prevDefault)
	before := monitorGoroutines()
	f := newFactory(t, holdfast.WithBlueGreen(bluegreen.Config{}))
	defer f.Close()
	if err := f.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	if n := monitorGoroutines() - before; n != 0 {
		t.Fatalf("%d monitors running after Configure, before any pool exists", n)
	}
	pool, err := f.NewPool(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if n := monitorGoroutines() - before; n != 2 {
		t.Errorf("%d monitors running once the pool connected, want 2", n)
	}
	r := f.BlueGreen(pool)
	if r == nil {
		t.Fatal("Factory.BlueGreen(pool) = nil")
	}
	other, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if f.BlueGreen(other) != nil {
		t.Error("Factory.BlueGreen returned a router for a pool it did not configure")
	}

	// Wait (bounded) until both monitors have connected and polled.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		ch := r.Changed()
		st := r.Status()
		polled := 0
		for _, m := range st.Monitors {
			if m.Connects > 0 && !m.LastPoll.IsZero() {
				polled++
			}
		}
		if polled == 2 {
			break
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("monitors did not poll: %+v", st.Monitors)
		}
	}
	if strings.Contains(defaultLog.String(), "bluegreen") {
		t.Errorf("blue/green logged to slog.Default without a logger:\n%s", defaultLog.String())
	}
	if got, want := userCalls.Load(), int64(pool.Stat().NewConnsCount()); got != want {
		t.Errorf("the pool's BeforeConnect ran %d times for %d pool connections: monitors ran it", got, want)
	}

	f.Close()
	if n := monitorGoroutines() - before; n != 0 {
		t.Errorf("%d monitors still running after Factory.Close", n)
	}
	if err := pool.Ping(context.Background()); err != nil {
		t.Errorf("the pool stopped working after Factory.Close: %v", err)
	}
}

// A dial under a policy with AttemptTimeout (cloudsql.RetryPolicy sets one)
// allocates the timeout context that bounds it, and nothing else; a dial
// without one allocates nothing. A connect costs about 160 allocations in
// pgx, so either is noise; the test pins the figures the docs state.
func TestDialAllocations(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	defer server.Close()
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		want    float64
	}{
		{"no AttemptTimeout", 0, 0},
		{"AttemptTimeout", time.Second, dialTimeoutAllocs},
	} {
		p := fastPolicy()
		p.AttemptTimeout = tc.timeout
		f := newFactory(t, holdfast.WithRetryPolicy(p))
		cfg, _ := poolConfig(t, pgtest.DSN(t), "sslmode=disable")
		cfg.ConnConfig.DialFunc = func(context.Context, string, string) (net.Conn, error) { return client, nil }
		if err := f.Configure(cfg); err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(200, func() { _, _ = cfg.ConnConfig.DialFunc(ctx, "tcp", "x:1") }); n != tc.want {
			t.Errorf("%s: a successful dial through the factory allocates %v times, want %v", tc.name, n, tc.want)
		}
	}
}

// dialTimeoutAllocs is what context.WithTimeout allocates for one dial.
const dialTimeoutAllocs = 4

// Hooks replaced after Configure are noticed instead of silently turning
// holdfast off: a replaced BeforeConnect (it used to disable
// WithPasswordFunc: 28P01, the password func never called) fails Start and
// NewPool with a *ConfigError naming it; a replaced DialFunc fails the
// connect with one.
func TestHooksReplacedAfterConfigure(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	t.Run("BeforeConnect", func(t *testing.T) {
		t.Parallel()
		cfg, _ := poolConfig(t, dsn, "sslmode=disable")
		src := fakes.NewPasswordSource("")
		f := newFactory(t, holdfast.WithPasswordFunc(src.Password))
		if err := f.Configure(cfg); err != nil {
			t.Fatal(err)
		}
		cfg.BeforeConnect = func(context.Context, *pgx.ConnConfig) error { return nil }
		pool, err := f.NewPool(ctx, cfg)
		var ce *holdfast.ConfigError
		if !errors.As(err, &ce) || ce.Field != "pgxpool.Config.BeforeConnect" {
			if pool != nil {
				pool.Close()
			}
			t.Fatalf("NewPool = %v, want a *ConfigError naming BeforeConnect", err)
		}
		if pool != nil {
			t.Error("NewPool returned a pool with its error")
		}
		// A pool the factory never configured: the same.
		plain, err := pgxpool.New(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer plain.Close()
		if err := f.Start(ctx, plain); !errors.As(err, &ce) {
			t.Errorf("Start(a pool not configured by the factory) = %v, want a *ConfigError", err)
		}
	})
	t.Run("DialFunc", func(t *testing.T) {
		t.Parallel()
		cfg, _ := poolConfig(t, dsn, "sslmode=disable")
		f := newFactory(t)
		if err := f.Configure(cfg); err != nil {
			t.Fatal(err)
		}
		cfg.ConnConfig.DialFunc = (&net.Dialer{}).DialContext
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		var ce *holdfast.ConfigError
		if err := pool.Ping(ctx); !errors.As(err, &ce) || ce.Field != "pgxpool.Config.ConnConfig.DialFunc" {
			t.Errorf("Ping = %v, want a *ConfigError naming DialFunc", err)
		}
	})
}

// Factory.Close is bounded even when a monitor is stuck in a dial function
// that ignores its context: it returns after MonitorConnectTimeout, and the
// straggler ends when its dial does. The monitors connect first, in a
// database of their own; then their sessions end and their reconnects
// hang. (Hanging every dial but the first raced with the monitors, which
// start with the pool's first connect and may dial before it.)
func TestCloseIsBoundedWithAStuckMonitorDial(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	const db = "holdfast_stuck_monitor_dial"
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), pgtest.DSN(t))
		if err == nil {
			_, _ = c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)")
			c.Close(context.Background())
		}
	})
	cfg, _ := poolConfig(t, pgtest.DSN(t), "sslmode=disable")
	cfg.ConnConfig.Database = db
	base := cfg.ConnConfig.DialFunc
	release := make(chan struct{})
	var hang atomic.Bool
	var hung atomic.Int64
	var stuck sync.WaitGroup
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if !hang.Load() {
			return base(ctx, network, addr)
		}
		stuck.Add(1)
		defer stuck.Done()
		hung.Add(1)
		select { // ignores ctx
		case <-release:
		case <-time.After(20 * time.Second):
		}
		return nil, errors.New("released")
	}
	f := newFactory(t, holdfast.WithBlueGreen(bluegreen.Config{MonitorConnectTimeout: 300 * time.Millisecond,
		BaselineInterval: 20 * time.Millisecond}))
	pool := newPool(t, f, cfg)
	// Registered after newPool's, so it runs before the pool closes (which
	// would wait for a connect stuck in the dial).
	t.Cleanup(func() { close(release); stuck.Wait() })
	if err := pool.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	r := f.BlueGreen(pool)
	deadline := time.Now().Add(20 * time.Second)
	for st := r.Status(); !st.Monitors[0].Connected || !st.Monitors[1].Connected; st = r.Status() {
		if time.Now().After(deadline) {
			t.Fatalf("monitors not connected: %+v", st.Monitors)
		}
		time.Sleep(5 * time.Millisecond)
	}
	hang.Store(true)
	if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND application_name = 'holdfast-bluegreen-monitor'", db); err != nil {
		t.Fatal(err)
	}
	for hung.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no monitor reconnected into the hanging dial")
		}
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	f.Close()
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("Factory.Close took %v with a stuck monitor dial, want about MonitorConnectTimeout (300 ms)", took)
	}
}
