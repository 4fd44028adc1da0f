package holdfast_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/fakes/outagetest"
)

// serverlessPool is a pool of f on s's endpoint, closed with the test;
// dials counts its dials (its connects' and its prober's).
func serverlessPool(ctx context.Context, t *testing.T, f *holdfast.Factory, s *outagetest.Serverless) (*pgxpool.Pool, *dialLog) {
	t.Helper()
	cfg, err := s.PoolConfig(s.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	d := &dialLog{}
	cfg.ConnConfig.DialFunc = d.Dial
	p, err := f.NewPool(ctx, cfg, holdfast.PoolName("orders"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p, d
}

// plainServerlessPool is a plain pgxpool on s's endpoint, not connected yet.
func plainServerlessPool(t *testing.T, s *outagetest.Serverless, extra ...string) (*pgxpool.Pool, *dialLog) {
	t.Helper()
	cfg, err := s.PoolConfig(s.Endpoint, extra...)
	if err != nil {
		t.Fatal(err)
	}
	d := &dialLog{}
	cfg.ConnConfig.DialFunc = d.Dial
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p, d
}

// paused waits until pool holds no connection and s has paused n times,
// and returns when pool's last connection went (as seen here).
func paused(t *testing.T, s *outagetest.Serverless, pool *pgxpool.Pool, n int, within time.Duration) time.Time {
	t.Helper()
	waitFor(t, within, "the pool holds no connection", s.Changed, func() bool { return pool.Stat().TotalConns() == 0 })
	empty := time.Now()
	waitFor(t, within, "the instance paused", s.Changed, func() bool { return s.Pauses() == n && s.Paused() })
	return empty
}

// resumedAt is when s last resumed.
func resumedAt(t *testing.T, s *outagetest.Serverless) time.Time {
	t.Helper()
	ev := s.Events()
	for i := len(ev) - 1; i >= 0; i-- {
		if ev[i].Name == outagetest.EventResumed {
			return ev[i].At
		}
	}
	t.Fatalf("no resume: %v", ev)
	return time.Time{}
}

// Issue 30, item 4 (a, b, d): an Aurora Serverless v2 instance that
// pauses (outagetest.Serverless: AutoPause 1.5 s, Resume 4 s, scaled from
// 300 s and 15 s). With WithServerlessV2, an idle pool holds no
// connection after IdleFor (AutoPause/2) and a health check, so the
// instance pauses; plain pgxpool, the control, holds its idle connection
// and keeps it awake. After the pause, the preset's first request waits
// for the resume and succeeds, where plain pgxpool with connect_timeout=2
// fails it; concurrent first requests make one dial in flight (the
// instance holds one connection attempt while it resumes) where plain
// pgxpool makes one per request.
func TestServerlessV2(t *testing.T) {
	const autoPause, resume = 1500 * time.Millisecond, 4 * time.Second
	s := outagetest.StartServerlessTest(t, outagetest.ServerlessConfig{AutoPause: autoPause, Resume: resume})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	logs := &syncBuffer{}
	f, err := holdfast.New(holdfast.WithServerlessV2(holdfast.ServerlessV2Config{AutoPause: autoPause}),
		holdfast.WithLogger(slog.New(slog.NewJSONHandler(logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	hp, dials := serverlessPool(ctx, t, f, s)
	control, _ := plainServerlessPool(t, s, "connect_timeout=10")
	if _, err := hp.Exec(ctx, "CREATE TABLE t (id int)"); err != nil {
		t.Fatal(err)
	}
	used := time.Now()
	if _, err := control.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}

	// (a) The preset's pool lets its connections go; the control's idle
	// connection stays, and keeps the instance awake.
	waitFor(t, 5*autoPause, "the preset's pool holds no connection", s.Changed, func() bool { return hp.Stat().TotalConns() == 0 })
	t.Logf("MEASURED the preset's idle pool: 0 connections %s after its last use (IdleFor %s, AutoPause %s)", ms(time.Since(used)), ms(autoPause/2), ms(autoPause))
	// The instance sees the close a moment after the pool let go.
	waitFor(t, 5*autoPause, "the instance holds the control's connection only", s.Changed, func() bool { return s.Conns() == 1 })
	timer := time.NewTimer(3 * autoPause)
	for awake := true; awake; {
		ch := s.Changed()
		if s.Paused() {
			t.Fatalf("paused while the control held a connection: %v", s.Events())
		}
		if n, c := s.Conns(), int(control.Stat().TotalConns()); n != c || c != 1 || hp.Stat().TotalConns() != 0 {
			t.Fatalf("instance's connections %d; control's %d, preset's %d; want 1, 1, 0", n, c, hp.Stat().TotalConns())
		}
		select {
		case <-ch:
		case <-timer.C:
			awake = false
		}
	}
	t.Logf("MEASURED with the control's idle connection: awake for 3×AutoPause, instance's connections 1 (the control's), the preset's 0")
	closed := time.Now()
	control.Close()
	paused(t, s, hp, 1, 5*autoPause)
	ev := s.Events()
	t.Logf("MEASURED without the control: paused %s after its connection closed (AutoPause %s); the preset's pool held 0", ms(ev[len(ev)-1].At.Sub(closed)), ms(autoPause))

	// (b) The preset's first request after the pause succeeds.
	began := time.Now()
	if _, err := hp.Exec(ctx, "INSERT INTO t VALUES (1)"); err != nil {
		t.Fatalf("the preset's first request after the pause: %v", err)
	}
	took := time.Since(began)
	t.Logf("MEASURED the preset's first request after the pause: ok in %s (Resume %s); dials %d", ms(took), ms(resume), len(dials.between(began, time.Now())))
	if took < resume || took > resume+5*time.Second {
		t.Errorf("the first request took %v; want Resume (%v) and little more", took, resume)
	}
	// The wake is logged once it ends, with how long it took; the wakes
	// of the pool's earlier connects (the instance awake) are not.
	var woke []map[string]any
	for _, l := range parseLines(t, logs.String()) {
		if l["msg"] == "holdfast: database woke" {
			woke = append(woke, l)
		}
	}
	if len(woke) != 1 {
		t.Errorf("%d \"database woke\" lines after the resume, want 1: %v", len(woke), woke)
	} else if s, ok := woke[0]["wake_s"].(float64); !ok || s < resume.Seconds() || woke[0]["level"] != "INFO" || woke[0]["holdfast.pool"] == nil {
		t.Errorf("the wake's line %v: want INFO, wake_s at least the resume (%v), the pool named", woke[0], resume)
	}

	// The control, a plain pool with an ordinary connect_timeout, fails it.
	paused(t, s, hp, 2, 5*autoPause)
	plain, _ := plainServerlessPool(t, s, "connect_timeout=2")
	began = time.Now()
	_, err = plain.Exec(ctx, "SELECT 1")
	t.Logf("MEASURED control (pgxpool, connect_timeout=2): first request after the pause: %v after %s", err, ms(time.Since(began)))
	if err == nil {
		t.Errorf("control: the first request after the pause succeeded; want a timeout: the fault does not bite")
	}
	plain.Close()

	// (d) Concurrent first requests: one dial in flight while the
	// instance resumes (it holds every attempt until then).
	const n = 8
	for i, name := range []string{"holdfast", "control"} {
		paused(t, s, hp, 3+i, 10*autoPause)
		p, d := hp, dials
		if name == "control" {
			p, d = plainServerlessPool(t, s, "connect_timeout=10", "pool_max_conns=8")
		}
		began := time.Now()
		var wg sync.WaitGroup
		errs := make([]error, n)
		for j := range n {
			wg.Go(func() { _, errs[j] = p.Exec(ctx, "SELECT 1") })
		}
		wg.Wait()
		took := time.Since(began)
		if err := errors.Join(errs...); err != nil {
			t.Errorf("%s: %d concurrent first requests after the pause: %v", name, n, err)
		}
		held := len(d.between(began, resumedAt(t, s)))
		t.Logf("MEASURED %s: %d concurrent first requests after the pause: all ok in %s; dials made before the resume (held by the instance): %d, after: %d",
			name, n, ms(took), held, len(d.between(resumedAt(t, s), time.Now())))
		switch {
		case name == "holdfast" && held != 1:
			t.Errorf("holdfast: %d dials before the resume; want 1 (single-flight wake)", held)
		case name == "control" && held < 2:
			t.Errorf("control: %d dials before the resume; want more than 1: the fault does not bite", held)
		}
	}
}

// Issue 30, item 4 (c): an instance that refuses connection attempts
// with 57P03 while it resumes (outagetest.ServerlessConfig.StartingUp):
// the preset's first request after the pause is retried within WakeFor
// and succeeds; plain pgxpool fails it with the 57P03.
func TestServerlessV2StartingUp(t *testing.T) {
	const autoPause, resume = 1500 * time.Millisecond, 3 * time.Second
	s := outagetest.StartServerlessTest(t, outagetest.ServerlessConfig{AutoPause: autoPause, Resume: resume, StartingUp: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, err := holdfast.New(holdfast.WithServerlessV2(holdfast.ServerlessV2Config{AutoPause: autoPause}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	hp, dials := serverlessPool(ctx, t, f, s)
	paused(t, s, hp, 1, 10*autoPause)
	began := time.Now()
	if _, err := hp.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatalf("the preset's first request after the pause: %v", err)
	}
	took := time.Since(began)
	d := dials.between(began, time.Now())
	t.Logf("MEASURED the preset's first request after the pause, 57P03 while resuming: ok in %s (Resume %s), %d dials (the prober's, one at a time, then the pool's)", ms(took), ms(resume), len(d))
	if len(d) < 3 {
		t.Errorf("%d dials; want the 57P03 retried", len(d))
	}

	paused(t, s, hp, 2, 10*autoPause)
	plain, _ := plainServerlessPool(t, s, "connect_timeout=10")
	_, err = plain.Exec(ctx, "SELECT 1")
	t.Logf("MEASURED control (pgxpool): first request after the pause: %v", err)
	if err == nil {
		t.Errorf("control: the first request after the pause succeeded; want 57P03: the fault does not bite")
	}
}

// ms writes d to the millisecond.
func ms(d time.Duration) string { return d.Round(time.Millisecond).String() }

// installAurora gives s's server the topology of a one-instance Aurora
// cluster (its writer "orders-1", at the instance endpoint that the
// failover monitor derives from the cluster's), for WithFailover.
func installAurora(ctx context.Context, t *testing.T, s *outagetest.Serverless) {
	t.Helper()
	c, err := pgx.Connect(ctx, s.DSN(s.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, `
CREATE OR REPLACE FUNCTION pg_catalog.aurora_replica_status()
RETURNS TABLE (server_id text, session_id text, last_update_timestamp timestamptz, replica_lag_in_msec real, cpu real)
LANGUAGE sql STABLE AS $fn$ SELECT 'orders-1'::text, 'MASTER_SESSION_ID'::text, now(), 0::real, 1.0::real $fn$;
CREATE OR REPLACE FUNCTION pg_catalog.aurora_db_instance_identifier()
RETURNS text LANGUAGE sql STABLE AS $fn$ SELECT 'orders-1'::text $fn$;`); err != nil {
		t.Fatal(err)
	}
	s.Resolver.Set(strings.Replace(s.Endpoint, "orders.cluster-", "orders-1.", 1), s.Addr())
}

// Issue 30, item 4 (a), the monitors: with WithFailover, the cluster's
// monitor holds a connection of its own; with WithBlueGreen, two. With
// WithServerlessV2 they let theirs go when the pool holds none, so the
// instance pauses, and follow the database again after the first request;
// the control, the same option alone (its pool letting its connections go
// all the same), keeps the instance awake with its monitors' connections.
func TestServerlessV2Monitors(t *testing.T) {
	t.Run("failover", func(t *testing.T) {
		testServerlessMonitors(t, holdfast.WithFailover(failover.Config{}),
			func(f *holdfast.Factory, p *pgxpool.Pool) bool { return f.Failover(p).Status().Writer == "orders-1" },
			func(f *holdfast.Factory, p *pgxpool.Pool) (int, string) {
				st := f.Failover(p).Status()
				return st.MonitorConnects, st.Off
			})
	})
	t.Run("bluegreen", func(t *testing.T) {
		connects := func(f *holdfast.Factory, p *pgxpool.Pool) (int, string) {
			n, off := 0, "idle"
			for _, m := range f.BlueGreen(p).Status().Monitors {
				n += m.Connects
				if m.Observation != "idle" || m.Connected {
					off = ""
				}
			}
			return n, off
		}
		testServerlessMonitors(t, holdfast.WithBlueGreen(bluegreen.Config{}),
			func(f *holdfast.Factory, p *pgxpool.Pool) bool { n, _ := connects(f, p); return n >= 2 }, connects)
	})
}

// testServerlessMonitors runs TestServerlessV2Monitors for opt, whose
// monitors are ready when ready holds; connects counts their connects,
// and says why their routing is off.
func testServerlessMonitors(t *testing.T, opt holdfast.Option, ready func(*holdfast.Factory, *pgxpool.Pool) bool, connects func(*holdfast.Factory, *pgxpool.Pool) (int, string)) {
	const autoPause, resume = 1500 * time.Millisecond, 3 * time.Second
	s := outagetest.StartServerlessTest(t, outagetest.ServerlessConfig{AutoPause: autoPause, Resume: resume})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	installAurora(ctx, t, s)
	for _, name := range []string{"control", "holdfast"} {
		opts := []holdfast.Option{opt}
		if name == "holdfast" {
			opts = append(opts, holdfast.WithServerlessV2(holdfast.ServerlessV2Config{AutoPause: autoPause}))
		}
		f, err := holdfast.New(opts...)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := s.PoolConfig(s.Endpoint)
		if err != nil {
			t.Fatal(err)
		}
		cfg.MinConns, cfg.MaxConnIdleTime, cfg.HealthCheckPeriod = 0, autoPause/2, autoPause/8 // the control's pool lets go too
		p, err := f.NewPool(ctx, cfg, holdfast.PoolName("orders"))
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "the monitors are ready", s.Changed, func() bool { return ready(f, p) })
		if name == "control" {
			waitFor(t, 5*autoPause, "the control's pool holds no connection", s.Changed, func() bool { return p.Stat().TotalConns() == 0 })
			timer := time.NewTimer(3 * autoPause)
			for awake := true; awake; {
				ch := s.Changed()
				if s.Paused() {
					t.Fatalf("control: paused with the monitors' connections: the control does not hold them")
				}
				select {
				case <-ch:
				case <-timer.C:
					awake = false
				}
			}
			t.Logf("MEASURED control (the option alone): its pool idle with 0 connections, the instance holds %d (the monitors'), no pause in 3×AutoPause", s.Conns())
			if s.Conns() == 0 {
				t.Errorf("control: the monitors hold no connection: the fault does not bite")
			}
			p.Close()
			f.Close()
			continue
		}
		used := time.Now()
		paused(t, s, p, 1, 10*autoPause)
		before, off := connects(f, p)
		t.Logf("MEASURED holdfast (with WithServerlessV2): the instance paused %s after the pool's last use, 0 connections (the monitors' included); monitors' connects %d, off %q",
			ms(time.Since(used)), before, off)
		if off != "idle" {
			t.Errorf("the monitors' status says %q; want idle", off)
		}
		began := time.Now()
		if _, err := p.Exec(ctx, "SELECT 1"); err != nil {
			t.Fatalf("the first request after the pause: %v", err)
		}
		t.Logf("MEASURED holdfast: the first request after the pause ok in %s (Resume %s)", ms(time.Since(began)), ms(resume))
		waitFor(t, 5*time.Second, "the monitors follow the database again", s.Changed, func() bool {
			n, off := connects(f, p)
			return n > before && off == ""
		})
		n, _ := connects(f, p)
		t.Logf("MEASURED holdfast: the monitors follow again %s after the request began (connects %d)", ms(time.Since(began)), n)
		paused(t, s, p, 2, 10*autoPause)
		p.Close()
		f.Close()
	}
}

// WithServerlessV2's config: the defaults make a pool let its
// connections go before AutoPause; a config that cannot is a
// *ConfigError naming its field, and so is the preset without the outage
// layer.
func TestServerlessV2Config(t *testing.T) {
	f, err := holdfast.New(holdfast.WithServerlessV2(holdfast.ServerlessV2Config{}))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := pgxpool.ParseConfig("postgres://u@db.example/app?pool_min_conns=4&pool_max_conn_idle_time=1h")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.MinConns != 0 || cfg.MinIdleConns != 0 || cfg.MaxConnIdleTime != 150*time.Second || cfg.HealthCheckPeriod != 37500*time.Millisecond {
		t.Errorf("MinConns %d, MinIdleConns %d, MaxConnIdleTime %v, HealthCheckPeriod %v; want 0, 0, 2m30s, 37.5s",
			cfg.MinConns, cfg.MinIdleConns, cfg.MaxConnIdleTime, cfg.HealthCheckPeriod)
	}
	for _, tc := range []struct {
		name  string
		opts  []holdfast.Option
		field string
	}{
		{"negative AutoPause", []holdfast.Option{holdfast.WithServerlessV2(holdfast.ServerlessV2Config{AutoPause: -1})}, "AutoPause"},
		{"negative IdleFor", []holdfast.Option{holdfast.WithServerlessV2(holdfast.ServerlessV2Config{IdleFor: -1})}, "IdleFor"},
		{"negative WakeFor", []holdfast.Option{holdfast.WithServerlessV2(holdfast.ServerlessV2Config{WakeFor: -1})}, "WakeFor"},
		{"IdleFor past AutoPause", []holdfast.Option{holdfast.WithServerlessV2(holdfast.ServerlessV2Config{AutoPause: time.Minute, IdleFor: 50 * time.Second})}, "IdleFor"},
		{"outage off", []holdfast.Option{holdfast.WithOutage(holdfast.Outage{Off: true}), holdfast.WithServerlessV2(holdfast.ServerlessV2Config{})}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := holdfast.New(tc.opts...)
			var ce *holdfast.ConfigError
			if !errors.As(err, &ce) || ce.Field != "WithServerlessV2" || !errors.Is(err, errInvalidConfig) {
				t.Fatalf("New = %v; want a *ConfigError of WithServerlessV2", err)
			}
			var inner *holdfast.ConfigError
			if tc.field != "" && (!errors.As(ce.Err, &inner) || inner.Field != tc.field) {
				t.Errorf("New = %v; want the field %s named", err, tc.field)
			}
		})
	}
}

// A service that starts while its instance is paused: NewPool waits for
// the resume within WakeFor (the preset's startup policy), where plain
// pgxpool's first connection with connect_timeout=2 fails.
func TestServerlessV2Startup(t *testing.T) {
	const autoPause, resume = time.Second, 4 * time.Second
	s := outagetest.StartServerlessTest(t, outagetest.ServerlessConfig{AutoPause: autoPause, Resume: resume})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	waitFor(t, 10*autoPause, "the instance paused", s.Changed, func() bool { return s.Pauses() == 1 && s.Paused() })
	f, err := holdfast.New(holdfast.WithServerlessV2(holdfast.ServerlessV2Config{AutoPause: autoPause}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	began := time.Now()
	_, dials := serverlessPool(ctx, t, f, s)
	t.Logf("MEASURED the preset's NewPool on a paused instance: ok in %s (Resume %s), %d dials", ms(time.Since(began)), ms(resume), len(dials.between(began, time.Now())))

	waitFor(t, 10*autoPause, "the instance paused again", s.Changed, func() bool { return s.Pauses() == 2 && s.Paused() })
	plain, _ := plainServerlessPool(t, s, "connect_timeout=2")
	began = time.Now()
	err = plain.Ping(ctx)
	t.Logf("MEASURED control (pgxpool, connect_timeout=2): first connection on a paused instance: %v after %s", err, ms(time.Since(began)))
	if err == nil {
		t.Errorf("control: connected to the paused instance; want a timeout: the fault does not bite")
	}
}
