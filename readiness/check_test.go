package readiness_test

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/fakes"
	"github.com/holdfast-db/holdfast/readiness"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// errReset is a dial whose connection the peer reset (transient), errDenied
// a permission failure (fatal), as the core classifies them.
var (
	errReset  = &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	errDenied = &pgconn.PgError{Severity: "FATAL", Code: "42501", Message: `permission denied for database "postgres"`}
)

// The startup gate: the first connection is retried a bounded number of
// times; if it still fails, readiness fails with the classified cause (the
// process neither goes Ready nor exits), and it passes once the database
// answers.
func TestStartupGate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		steps        []fakes.Step
		wantStartErr string // the factory's verdict of Start's error; "" for success
		wantDials    int    // dials made by Start
	}{
		{name: "fails 3 times then recovers", steps: []fakes.Step{fakes.Refused().Forever()}, wantStartErr: "transient/conn-refused", wantDials: 3},
		{name: "a reset absorbed at startup", steps: []fakes.Step{fakes.Fail(errReset), fakes.Connect()}, wantDials: 2},
		{name: "permission error not retried", steps: []fakes.Step{fakes.Fail(errDenied).Forever()}, wantStartErr: "fatal/sqlstate-42501", wantDials: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, fixtureOpts{steps: tt.steps})

			if s := f.c.Status(); s.Ready() || s.String() != "not ready: starting" {
				t.Fatalf("before Start: %q, want \"not ready: starting\"", s)
			}

			err := f.c.Start(context.Background())
			if got := f.conn.Attempts(); got != tt.wantDials {
				t.Errorf("Start dialed %d times, want %d", got, tt.wantDials)
			}
			if tt.wantStartErr == "" {
				if err != nil {
					t.Fatalf("Start = %v, want success", err)
				}
				if r := f.do(t, "GET", "/readyz"); r.code != 200 || r.body != "ok" {
					t.Fatalf("after Start: %d %q, want 200 ok", r.code, r.body)
				}
				return
			}
			var ce *holdfast.ConnectError
			if !errors.As(err, &ce) || ce.Layer != "startup" || f.factory.Classify(err).String() != tt.wantStartErr {
				t.Fatalf("Start = %v, want a startup *holdfast.ConnectError the factory classifies %s", err, tt.wantStartErr)
			}

			// Not ready, with the classified cause; the probe checks the
			// database once (still failing) and caches the result.
			code, h := f.healthz(t)
			if code != 503 || h.Status != "fail" || h.Reason != "startup-failed" {
				t.Fatalf("after a failed Start: %d %s %s, want 503 fail startup-failed", code, h.Status, h.Reason)
			}
			if h.Checks.Startup[0].Status != "fail" || h.Checks.Startup[0].Reason != tt.wantStartErr {
				t.Errorf("startup check = %+v, want fail with reason %s", h.Checks.Startup[0], tt.wantStartErr)
			}
			if want := "not ready: startup-failed (" + tt.wantStartErr + ")"; h.Output != want {
				t.Errorf("admin output = %q, want %q", h.Output, want)
			}
			if r := f.do(t, "GET", "/readyz"); r.code != 503 || r.body != "not ready: startup-failed" {
				t.Errorf("plain probe: %d %q, want 503 \"not ready: startup-failed\"", r.code, r.body)
			}
			dials := f.conn.Attempts()
			if dials != tt.wantDials+1 {
				t.Errorf("probes after the failed Start dialed %d times, want 1 (one check, then the cache)", dials-tt.wantDials)
			}

			// The database comes back: the next check opens the gate.
			f.conn.Set()
			f.clock.Advance(time.Second)
			if r := f.do(t, "GET", "/readyz"); r.code != 200 || r.body != "ok" {
				t.Fatalf("after recovery: %d %q, want 200 ok", r.code, r.body)
			}
			_, h = f.healthz(t)
			if h.Status != "pass" || h.Checks.Startup[0].Status != "pass" || h.Checks.Startup[0].Time == "" {
				t.Errorf("after recovery: %+v, want pass with the startup time", h)
			}
			if got := f.c.Status().Startup; !got.Done || got.Err != nil {
				t.Errorf("Status().Startup = %+v, want Done", got)
			}
		})
	}
}

// While Start runs, probes answer "starting" and leave the database to
// Start; when Start gives up, the cause is reported.
func TestProbesWaitForStart(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOpts{steps: []fakes.Step{fakes.Hang().Forever()}})
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan error, 1)
	go func() { started <- f.c.Start(ctx) }()
	for f.conn.Attempts() == 0 { // Start's first dial is hanging
		time.Sleep(time.Millisecond)
	}
	f.clock.Advance(time.Hour)
	if r := f.do(t, "GET", "/readyz"); r.code != 503 || r.body != "not ready: starting" {
		t.Errorf("while Start runs: %d %q, want 503 \"not ready: starting\"", r.code, r.body)
	}
	if s := f.c.Status(); !s.Startup.Running || s.Database.Checks != 0 {
		t.Errorf("status while Start runs = %+v, want Running and no check", s.Startup)
	}
	if got := f.conn.Attempts(); got != 1 {
		t.Errorf("probes during Start dialed: %d dials, want Start's 1", got)
	}
	cancel()
	if err := <-started; !errors.Is(err, context.Canceled) {
		t.Fatalf("Start = %v, want context.Canceled", err)
	}
	if s := f.c.Status(); s.String() != "not ready: startup-failed (fatal/canceled)" {
		t.Errorf("after a canceled Start: %q", s)
	}
}

// Start is optional: without it, the first successful check opens the gate.
func TestStartIsOptional(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOpts{})
	if r := f.do(t, "GET", "/readyz"); r.code != 200 || r.body != "ok" {
		t.Fatalf("first probe without Start: %d %q, want 200 ok", r.code, r.body)
	}
	if got := f.queries.n.Load(); got != 1 {
		t.Errorf("the first probe ran %d queries, want 1 check", got)
	}
	if err := f.c.Start(context.Background()); err != nil || f.conn.Attempts() != 1 {
		t.Errorf("Start after the gate opened = %v with %d dials, want nil without dialing again", err, f.conn.Attempts())
	}
}

// Results are cached for CheckInterval and shared by concurrent probes; a
// failure threshold applies before readiness flips to 503, and the first
// success recovers. Round trips are counted at the database (queries run)
// and at the dialer (connections tried).
func TestCacheAndThreshold(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOpts{cfg: readiness.Config{CheckInterval: time.Second, FailureThreshold: 3}})
	f.start(t)
	if got := f.queries.n.Load(); got != 0 {
		t.Fatalf("Start ran %d queries, want 0", got)
	}

	// The gate's opening counts as a fresh success: no check yet.
	if r := f.do(t, "GET", "/readyz"); r.code != 200 || r.body != "ok" {
		t.Fatalf("after Start: %d %q", r.code, r.body)
	}
	if got := f.queries.n.Load(); got != 0 {
		t.Fatalf("a probe right after Start ran %d queries, want 0 (cached)", got)
	}

	// 50 concurrent probes once the cache is stale: one round trip.
	f.clock.Advance(time.Second)
	probeMany(t, f, 50, 200)
	if got := f.queries.n.Load(); got != 1 {
		t.Fatalf("50 concurrent probes ran %d queries, want 1", got)
	}
	probeMany(t, f, 10, 200)
	if got := f.queries.n.Load(); got != 1 {
		t.Fatalf("probes within CheckInterval ran %d more queries, want 0", got-1)
	}
	f.clock.Advance(999 * time.Millisecond)
	probeMany(t, f, 5, 200)
	if got := f.queries.n.Load(); got != 1 {
		t.Fatalf("probes 999ms later ran a query; the cache lasts 1s")
	}
	f.clock.Advance(time.Millisecond)
	probeMany(t, f, 5, 200)
	if got := f.queries.n.Load(); got != 2 {
		t.Fatalf("probes after CheckInterval ran %d queries, want 2 in all", got)
	}

	// The database goes away: connections are reset and every dial is
	// refused. Failures below the threshold answer 200 "warn".
	f.pool.Reset()
	f.conn.Set(fakes.Refused().Forever())
	dials := f.conn.Attempts()
	for i, want := range []struct {
		code   int
		status string
	}{{200, "warn"}, {200, "warn"}, {503, "fail"}} {
		f.clock.Advance(time.Second)
		probeMany(t, f, 5, want.code)
		if got := f.conn.Attempts() - dials; got != i+1 {
			t.Fatalf("after %d failing intervals: %d dials, want %d (one check per interval)", i+1, got, i+1)
		}
		code, h := f.healthz(t)
		db := h.Checks.Database[0]
		if code != want.code || h.Status != want.status || h.Reason != "database" ||
			db.ConsecutiveFailures != i+1 || db.Reason != "transient/conn-refused" || db.LastSuccess == "" {
			t.Fatalf("failure %d: %d %+v, want %d %s database with transient/conn-refused", i+1, code, h, want.code, want.status)
		}
	}
	if _, h := f.healthz(t); h.Output != "not ready: database (transient/conn-refused, 3 consecutive failures)" {
		t.Errorf("admin output = %q", h.Output)
	}
	if r := f.do(t, "GET", "/readyz"); r.body != "not ready: database" {
		t.Errorf("plain body = %q", r.body)
	}
	queries := f.queries.n.Load()

	// The first success recovers.
	f.conn.Set()
	f.clock.Advance(time.Second)
	if r := f.do(t, "GET", "/readyz"); r.code != 200 || r.body != "ok" {
		t.Fatalf("after recovery: %d %q, want 200 ok", r.code, r.body)
	}
	if got := f.queries.n.Load() - queries; got != 1 {
		t.Errorf("recovery ran %d queries, want 1", got)
	}
	code, h := f.healthz(t)
	if code != 200 || h.Checks.Database[0].ConsecutiveFailures != 0 || h.Checks.Database[0].ObservedUnit != "ms" {
		t.Errorf("after recovery: %d %+v", code, h.Checks.Database[0])
	}
}

func probeMany(t *testing.T, f *fixture, n, wantCode int) {
	t.Helper()
	var wg sync.WaitGroup
	codes := make(chan int, n)
	for range n {
		wg.Go(func() {
			resp, err := f.srv.Client().Get(f.srv.URL + "/readyz")
			if err != nil {
				codes <- -1
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		})
	}
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != wantCode {
			t.Fatalf("a probe answered %d, want %d", c, wantCode)
		}
	}
}

// A probe never waits longer than ProbeTimeout, even when the database
// hangs, and concurrent probes share the one running check.
func TestProbeNeverBlocksPastItsDeadline(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOpts{cfg: readiness.Config{ProbeTimeout: 50 * time.Millisecond, CheckTimeout: time.Minute}})
	f.start(t)
	f.pool.Reset()
	f.conn.Set(fakes.Hang().Forever())
	dials := f.conn.Attempts()
	f.clock.Advance(time.Second)

	start := time.Now()
	probeMany(t, f, 20, 200) // answered from the last known result: the check has not failed yet
	if elapsed := time.Since(start); elapsed > 30*time.Second {
		t.Fatalf("probes took %v with a hanging database; they must answer within their deadline", elapsed)
	}
	if got := f.conn.Attempts() - dials; got != 1 {
		t.Errorf("20 probes started %d checks, want 1 shared check", got)
	}
	if s := f.c.Status(); s.Database.Checks != 0 {
		t.Errorf("the hanging check completed (%d checks)", s.Database.Checks)
	}
	// Close stops the hanging check and joins it (goleak checks the rest).
	done := make(chan struct{})
	go func() { f.c.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not stop the hanging check")
	}
	if r := f.do(t, "GET", "/readyz"); r.code != 503 || r.body != "not ready: closed" {
		t.Errorf("after Close: %d %q", r.code, r.body)
	}
}

// A saturated pool still answers 200, with status warn.
func TestSaturatedPoolWarns(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOpts{maxConns: 1})
	f.start(t)
	f.hold(t)
	code, h := f.healthz(t)
	if code != 200 || h.Status != "warn" || h.Reason != "pool-saturated" || h.Checks.Connections[0].Acquired != 1 {
		t.Errorf("saturated: %d %+v, want 200 warn pool-saturated", code, h)
	}
}

// Liveness never depends on the database.
func TestLivenessIgnoresTheDatabase(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOpts{steps: []fakes.Step{fakes.Refused().Forever()}})
	if err := f.c.Start(context.Background()); err == nil {
		t.Fatal("Start succeeded against a refusing database")
	}
	dials := f.conn.Attempts()
	if r := f.do(t, "GET", "/livez"); r.code != 200 || r.body != "ok" {
		t.Errorf("/livez = %d %q, want 200 ok", r.code, r.body)
	}
	if r := f.do(t, "GET", "/livez", "Accept", "application/health+json"); r.code != 200 || r.body != `{"status":"pass"}` {
		t.Errorf("/livez JSON = %d %q", r.code, r.body)
	}
	if f.conn.Attempts() != dials {
		t.Errorf("/livez dialed the database")
	}
	if r := f.do(t, "GET", "/readyz"); r.code != 503 {
		t.Errorf("/readyz = %d, want 503", r.code)
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	pool := lazyPool(t)
	tests := []struct {
		name string
		pool *pgxpool.Pool
		cfg  readiness.Config
		want string
	}{
		{"nil pool", nil, readiness.Config{}, "readiness: invalid targets[0]: neither Pool nor DB is set"},
		{"negative check interval", pool, readiness.Config{CheckInterval: -time.Second}, "readiness: invalid Config.CheckInterval: must not be negative (got -1s)"},
		{"negative check timeout", pool, readiness.Config{CheckTimeout: -1}, "readiness: invalid Config.CheckTimeout: must not be negative (got -1ns)"},
		{"negative probe timeout", pool, readiness.Config{ProbeTimeout: -time.Millisecond}, "readiness: invalid Config.ProbeTimeout: must not be negative (got -1ms)"},
		{"negative threshold", pool, readiness.Config{FailureThreshold: -1}, "readiness: invalid Config.FailureThreshold: must not be negative"},
		{"negative drain timeout", pool, readiness.Config{DrainTimeout: -time.Minute}, "readiness: invalid Config.DrainTimeout: must not be negative (got -1m0s)"},
		{"interval above bound", pool, readiness.Config{DrainInterval: time.Minute, DrainTimeout: time.Second}, "readiness: invalid Config.DrainInterval: must not exceed DrainTimeout (1m0s > 1s)"},
		{"interval above default bound", pool, readiness.Config{DrainInterval: time.Hour}, "readiness: invalid Config.DrainInterval: must not exceed DrainTimeout (1h0m0s > 2m0s)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := readiness.New(tt.cfg, readiness.Pool(tt.pool))
			if c != nil || !errors.As(err, new(*readiness.ConfigError)) || err.Error() != tt.want {
				t.Fatalf("New = %v, %v; want a *ConfigError %q", c, err, tt.want)
			}
		})
	}
	t.Run("zero config means defaults", func(t *testing.T) {
		t.Parallel()
		c, err := readiness.New(readiness.Config{}, readiness.Pool(pool))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		s := c.Status()
		if s.Database.Threshold != 3 || s.Ready() || s.Reason != "starting" || s.Drain.State != readiness.Enabled {
			t.Errorf("zero config status = %+v, want threshold 3, not ready, starting, Enabled", s)
		}
	})
}

// lazyPool is a pool that never connects: its address refuses, and nothing
// acquires from it.
func lazyPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// The check's failures are classified with the factory's rules.
func TestCheckUsesFactoryClassifier(t *testing.T) {
	t.Parallel()
	boom := errors.New("custom dialer outage")
	rule := func(err error) (classify.Verdict, bool) {
		if errors.Is(err, boom) {
			return classify.Verdict{Class: classify.Transient, Reason: "custom-outage"}, true
		}
		return classify.Verdict{}, false
	}
	f := newFixture(t, fixtureOpts{steps: []fakes.Step{fakes.Fail(boom).Forever()}})
	factory, err := holdfast.New(holdfast.WithClassifier(rule), holdfast.WithRetryPolicy(fastPolicy(1)), holdfast.WithStartupPolicy(fastPolicy(1)))
	if err != nil {
		t.Fatal(err)
	}
	c, err := readiness.New(readiness.Config{Factory: factory}, readiness.Pool(f.pool))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.Start(context.Background())
	if s := c.Status(); !strings.Contains(s.String(), "transient/custom-outage") {
		t.Errorf("Start = %v; status %q, want the factory's classification", err, s)
	}
}
