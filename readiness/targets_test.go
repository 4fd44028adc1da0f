package readiness_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/readiness"
	"github.com/holdfast-db/holdfast/sqldb"
)

// adminExec runs statements on the test server as its superuser.
func adminExec(t *testing.T, stmts ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

var databases atomic.Int64

// twoDBs is a service's two databases on the test server: "orders", a
// pgxpool on the server's postgres database, and "reports", a *sql.DB of
// sqldb.OpenDB on a database of its own, reached as a role of its own, so
// that revoking the role's CONNECT takes reports down and leaves orders up.
type twoDBs struct {
	f      *holdfast.Factory
	pool   *pgxpool.Pool // orders
	db     *sql.DB       // reports
	dbPool *pgxpool.Pool // the pool under db
	name   string        // reports' database and role
}

func newTwoDBs(t *testing.T, opts ...holdfast.Option) *twoDBs {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("reports_%d", databases.Add(1))
	adminExec(t, "CREATE ROLE "+name+" LOGIN", "CREATE DATABASE "+name)
	t.Cleanup(func() { adminExec(t, "DROP DATABASE "+name+" WITH (FORCE)", "DROP ROLE "+name) })

	base := []holdfast.Option{holdfast.WithRetryPolicy(fastPolicy(1)), holdfast.WithStartupPolicy(fastPolicy(2)), holdfast.WithRetryBudget(nil)}
	f, err := holdfast.New(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	d := &twoDBs{f: f, name: name}
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	rcfg := cfg.Copy()
	if err := f.Configure(cfg, holdfast.PoolName("orders")); err != nil {
		t.Fatal(err)
	}
	if d.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.pool.Close)

	rcfg.ConnConfig.Database, rcfg.ConnConfig.User = name, name
	if d.dbPool, err = f.NewPool(ctx, rcfg, holdfast.PoolName("reports")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.dbPool.Close)
	d.db = sqldb.OpenDB(d.dbPool)
	t.Cleanup(func() { d.db.Close() })
	return d
}

// down takes reports down: its role may no longer connect to its database
// (42501, fatal), and its pool's idle connections are closed.
func (d *twoDBs) down(t *testing.T) {
	t.Helper()
	adminExec(t, "REVOKE CONNECT ON DATABASE "+d.name+" FROM PUBLIC")
	d.dbPool.Reset()
}

// up lets reports' role connect again.
func (d *twoDBs) up(t *testing.T) {
	t.Helper()
	adminExec(t, "GRANT CONNECT ON DATABASE "+d.name+" TO "+d.name)
}

// multiHealth is the JSON body of a Checker of several targets.
type multiHealth struct {
	Status string `json:"status"`
	Reason string `json:"reason"`
	Output string `json:"output"`
	Checks struct {
		Startup  []checkJSON `json:"startup"`
		Database []checkJSON `json:"postgres:responseTime"`
		Conns    []checkJSON `json:"postgres:connections"`
		Drain    []struct {
			InUse *struct {
				ByTarget map[string]int64 `json:"byTarget"`
			} `json:"inUse"`
		} `json:"drain"`
	} `json:"checks"`
}

type checkJSON struct {
	ComponentID         string   `json:"componentId"`
	Status              string   `json:"status"`
	Reason              string   `json:"reason"`
	Optional            bool     `json:"optional"`
	ObservedValue       *float64 `json:"observedValue"`
	ObservedUnit        string   `json:"observedUnit"`
	ConsecutiveFailures int      `json:"consecutiveFailures"`
}

// probe asks c's admin handler for its JSON body.
func probe(t *testing.T, c *readiness.Checker) (int, multiHealth, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	c.AdminHandler().ServeHTTP(rec, localRequest(http.MethodGet, "/admin"))
	var h multiHealth
	if err := json.Unmarshal(rec.Body.Bytes(), &h); err != nil {
		t.Fatalf("body %q: %v", rec.Body, err)
	}
	return rec.Code, h, rec.Body.String()
}

// byName returns the entries of checks by componentId.
func byName(t *testing.T, what string, checks []checkJSON) map[string]checkJSON {
	t.Helper()
	m := map[string]checkJSON{}
	for _, c := range checks {
		m[c.ComponentID] = c
	}
	if len(m) != 2 || len(checks) != 2 {
		t.Fatalf("%s: %+v, want one entry for each of orders and reports", what, checks)
	}
	return m
}

// A pgxpool and a *sql.DB on another database under one Checker: each check
// is named by its pool's name and has its own status; when the *sql.DB's
// database goes down, readiness fails naming it (or only warns, when it is
// not required), orders' check stays pass, and both recover.
func TestTargetsOneDown(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		optional bool
		code     int
		status   string
		output   string
	}{
		{"required", false, 503, "fail", "not ready: database (reports: fatal/sqlstate-42501, 1 consecutive failure)"},
		{"optional", true, 200, "warn", "ok (warn): database (reports: fatal/sqlstate-42501, 1 consecutive failure)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := newTwoDBs(t)
			reports := readiness.DB(d.db)
			reports.Optional = tt.optional
			c, err := readiness.New(readiness.Config{Factory: d.f, FailureThreshold: 1}, readiness.Pool(d.pool), reports)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			clock := newClock()
			readiness.SetClock(c, clock.Now)
			if err := c.Start(context.Background()); err != nil {
				t.Fatalf("Start = %v", err)
			}

			clock.Advance(time.Hour) // a check is due: each reports its latency
			code, h, body := probe(t, c)
			if code != 200 || h.Status != "pass" {
				t.Fatalf("both up: %d %s", code, body)
			}
			db := byName(t, "postgres:responseTime", h.Checks.Database)
			for _, name := range []string{"orders", "reports"} {
				if c := db[name]; c.Status != "pass" || c.ObservedValue == nil || c.ObservedUnit != "ms" {
					t.Errorf("both up: check %s = %+v, want pass with its latency", name, c)
				}
			}
			if db["reports"].Optional != tt.optional || db["orders"].Optional {
				t.Errorf("optional flags: orders %v, reports %v", db["orders"].Optional, db["reports"].Optional)
			}

			d.down(t)
			clock.Advance(time.Hour)
			code, h, body = probe(t, c)
			if code != tt.code || h.Status != tt.status || h.Reason != "database" || h.Output != tt.output {
				t.Fatalf("reports down: %d %s\nwant %d status %q output %q", code, body, tt.code, tt.status, tt.output)
			}
			db = byName(t, "postgres:responseTime", h.Checks.Database)
			if c := db["orders"]; c.Status != "pass" || c.ConsecutiveFailures != 0 {
				t.Errorf("reports down: orders = %+v, want pass", c)
			}
			if c := db["reports"]; c.Status != "fail" || c.Reason != "fatal/sqlstate-42501" || c.ConsecutiveFailures != 1 {
				t.Errorf("reports down: reports = %+v, want fail fatal/sqlstate-42501", c)
			}
			s := c.Status()
			if s.Target != "reports" || len(s.Targets) != 2 || s.Targets[1].Kind != "database/sql" || s.Targets[0].Kind != "pgxpool" {
				t.Errorf("Status: Target %q, Targets %+v", s.Target, s.Targets)
			}
			if s.Targets[1].Health != readiness.Fail || s.Targets[0].Health != readiness.Pass {
				t.Errorf("target healths: orders %s, reports %s; want pass, fail", s.Targets[0].Health, s.Targets[1].Health)
			}

			d.up(t)
			clock.Advance(time.Hour)
			if code, h, body = probe(t, c); code != 200 || h.Status != "pass" {
				t.Errorf("reports back: %d %s", code, body)
			}
		})
	}
}

// Start opens the gate of every target; a required target that cannot
// start makes Start fail naming it, an optional one is only logged, and
// readiness then fails or warns with reason startup-failed.
func TestTargetsStart(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		optional bool
		code     int
		output   string
	}{
		{"required", false, 503, "not ready: startup-failed (reports: fatal/sqlstate-42501)"},
		{"optional", true, 200, "ok (warn): startup-failed (reports: fatal/sqlstate-42501)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := newTwoDBs(t)
			d.down(t)
			c, err := readiness.New(readiness.Config{Factory: d.f},
				readiness.Pool(d.pool), readiness.Target{DB: d.db, Optional: tt.optional})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			err = c.Start(context.Background())
			var te *readiness.TargetError
			switch {
			case tt.optional && err != nil:
				t.Fatalf("Start = %v, want nil: the failing target is optional", err)
			case !tt.optional && (!errors.As(err, &te) || te.Target != "reports" || te.Err == nil):
				t.Fatalf("Start = %v, want a *TargetError for reports wrapping Factory.Start's error", err)
			case !tt.optional && (!errors.As(te.Err, new(*holdfast.ConnectError)) || d.f.Classify(te.Err).String() != "fatal/sqlstate-42501"):
				t.Errorf("Start's verdict = %s", d.f.Classify(te.Err))
			}
			code, h, body := probe(t, c)
			if code != tt.code || h.Output != tt.output {
				t.Fatalf("readiness = %d %s, want %d %q", code, body, tt.code, tt.output)
			}
			st := byName(t, "startup", h.Checks.Startup)
			if st["orders"].Status != "pass" || st["reports"].Status != "fail" || st["reports"].Reason != "fatal/sqlstate-42501" {
				t.Errorf("startup checks = %+v", st)
			}
		})
	}
}

// Serve's drain waits for the connections the application holds from
// every target: one of the pgxpool and one of the *sql.DB (a *sql.Conn).
// Each release is seen by a drain poll, and Serve returns only after both;
// then the *sql.DB and both pools are closed.
func TestServeDrainsEveryTarget(t *testing.T) {
	t.Parallel()
	d := newTwoDBs(t)
	c, err := readiness.New(readiness.Config{Factory: d.f, DrainInterval: time.Millisecond},
		readiness.Pool(d.pool), readiness.DB(d.db))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	mux := http.NewServeMux()
	mux.Handle("/readyz", c.ReadyHandler())
	s := startServe(t, &fixture{c: c, mux: mux}, readiness.ServeConfig{})
	s.waitReady(t)

	ctx := context.Background()
	pgConn, err := d.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pgConn.Release)      // before Serve's cleanup waits for it: a failing test does not hang
	sqlConn, err := d.db.Conn(ctx) // holds a connection of the pool under the *sql.DB
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sqlConn.Close() })
	p := newPoller(t, c)
	s.cancel() // as SIGTERM would

	// The first polls see both connections (and maybe a probe's, ending).
	u := p.next(t)
	for u.AcquiredConns > 2 {
		u = p.next(t)
	}
	if u.AcquiredConns != 2 {
		t.Fatalf("drain poll = %v, want the two held connections", u)
	}
	by := c.Status().Drain.ByTarget
	if len(by) != 2 || by[0] != (readiness.TargetInUse{Name: "orders", AcquiredConns: 1}) || by[1] != (readiness.TargetInUse{Name: "reports", AcquiredConns: 1}) {
		t.Errorf("drain by target = %+v, want orders 1, reports 1", by)
	}
	_, h, body := probe(t, c)
	if h.Checks.Drain[0].InUse == nil || h.Checks.Drain[0].InUse.ByTarget["reports"] != 1 {
		t.Errorf("drain JSON during the drain: %s", body)
	}

	pgConn.Release()
	for u.AcquiredConns != 1 {
		u = p.next(t)
	}
	if by := c.Status().Drain.ByTarget; by[0].AcquiredConns != 0 || by[1].AcquiredConns != 1 {
		t.Errorf("after the pgxpool connection's release: by target %+v, want reports' still held", by)
	}
	p.next(t) // the drain polled again and goes on waiting
	select {
	case err := <-s.done:
		t.Fatalf("Serve returned %v while the *sql.DB's connection was held", err)
	default:
	}

	if err := sqlConn.Close(); err != nil {
		t.Fatal(err)
	}
	p.release()
	if err := s.result(t); err != nil {
		t.Fatalf("Serve = %v, want a clean shutdown", err)
	}
	if err := d.db.PingContext(ctx); err == nil || !strings.Contains(err.Error(), "database is closed") {
		t.Errorf("after Serve, the *sql.DB's Ping = %v, want closed", err)
	}
	if _, err := d.dbPool.Acquire(ctx); err == nil {
		t.Error("after Serve, the *sql.DB's pool still acquires")
	}
	if _, err := d.pool.Acquire(ctx); err == nil {
		t.Error("after Serve, the pgxpool still acquires")
	}
}

// A drain that times out names the target whose pool still has a
// connection acquired.
func TestDrainTimeoutNamesTarget(t *testing.T) {
	t.Parallel()
	d := newTwoDBs(t)
	c, err := readiness.New(readiness.Config{Factory: d.f, DrainInterval: time.Millisecond},
		readiness.Pool(d.pool), readiness.DB(d.db))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	conn, err := d.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = drainNow(t, c, "deploy-1", readiness.WithDrainTimeout(20*time.Millisecond))
	var te *readiness.DrainTimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("Drain = %v, want a *DrainTimeoutError", err)
	}
	want := `readiness: drain by "deploy-1" timed out after 20ms: still in use: 1 acquired connection (reports: 1); service stays Disabling`
	if err.Error() != want {
		t.Errorf("Drain error =\n%s\nwant\n%s", err, want)
	}
}

// Bad targets are *ConfigErrors, never a panic.
func TestNewCheckerConfigErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, err := holdfast.New()
	if err != nil {
		t.Fatal(err)
	}
	newPool := func(name string) *pgxpool.Pool {
		cfg, err := pgxpool.ParseConfig("postgres://app@127.0.0.1:1/app")
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Configure(cfg, holdfast.PoolName(name)); err != nil {
			t.Fatal(err)
		}
		pool, err := pgxpool.NewWithConfig(ctx, cfg) // never connects in this test
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return pool
	}
	orders, reports := newPool("orders"), newPool("reports")
	overReports := sqldb.OpenDB(reports)
	defer overReports.Close()
	foreignPool := newPool("foreign")
	foreign := sql.OpenDB(sqldb.NewConnector(foreignPool))
	defer foreign.Close()

	for _, tt := range []struct {
		name    string
		targets []readiness.Target
		want    string
	}{
		{"no target", nil, "readiness: invalid targets: none given"},
		{"empty target", []readiness.Target{{}}, "readiness: invalid targets[0]: neither Pool nor DB is set"},
		{"two names alike", []readiness.Target{{Pool: orders, Name: "main"}, {Pool: reports, Name: "main"}},
			`readiness: invalid targets[1].Name: "main" is also the name of targets[0]`},
		{"a DB of unknown pool", []readiness.Target{readiness.DB(foreign)}, "readiness: invalid targets[0].DB: its pool is unknown"},
		{"a DB with another pool", []readiness.Target{{DB: overReports, Pool: orders}}, "readiness: invalid targets[0].Pool: is not the pool under DB"},
		{"an unprintable name", []readiness.Target{{Pool: orders, Name: "a\nb"}}, "readiness: invalid targets[0].Name: contains an unprintable character"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := readiness.New(readiness.Config{Factory: f}, tt.targets...)
			var ce *readiness.ConfigError
			if c != nil || !errors.As(err, &ce) || !errors.As(err, new(*readiness.ConfigError)) || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("NewChecker = %v, %v; want a *ConfigError starting %q", c, err, tt.want)
			}
		})
	}

	// A DB of a Connector is one with its pool given.
	c, err := readiness.New(readiness.Config{Factory: f}, readiness.Target{DB: foreign, Pool: foreignPool})
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Status(); s.Target != "foreign" || s.Targets[0].Kind != "database/sql" {
		t.Errorf("a DB given with its pool: target %q, kind %q", s.Target, s.Targets[0].Kind)
	}
	c.Close()
}

// Each target's series carry its pool name and server; the overall ready
// gauge carries none.
func TestTargetsTelemetry(t *testing.T) {
	t.Parallel()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	d := newTwoDBs(t, holdfast.WithMeterProvider(mp))
	c, err := readiness.New(readiness.Config{Factory: d.f, FailureThreshold: 1},
		readiness.Pool(d.pool), readiness.Target{DB: d.db, Optional: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	clock := newClock()
	readiness.SetClock(c, clock.Now)
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	if s := c.Check(ctx); s.Health != readiness.Pass {
		t.Fatalf("both up: %v", s)
	}
	d.down(t)
	clock.Advance(time.Hour)
	if s := c.Check(ctx); s.Health != readiness.Warn {
		t.Fatalf("with optional reports down: %v", s)
	}

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
	ready, ok := got["holdfast.readiness.check.ready"].Data.(metricdata.Gauge[int64])
	if !ok {
		t.Fatalf("no holdfast.readiness.check.ready; metrics: %v", keys(got))
	}
	wantDB := map[string]string{"orders": "postgres", "reports": d.name}
	seen := map[string]int64{}
	for _, dp := range ready.DataPoints {
		pool, _ := dp.Attributes.Value("db.client.connection.pool.name")
		check, _ := dp.Attributes.Value("holdfast.readiness.check")
		ns, _ := dp.Attributes.Value("db.namespace")
		addr, _ := dp.Attributes.Value("server.address")
		port, _ := dp.Attributes.Value("server.port")
		name := pool.AsString()
		seen[name] = dp.Value
		if check.AsString() != name || ns.AsString() != wantDB[name] || addr.AsString() != d.pool.Config().ConnConfig.Host ||
			port.AsInt64() != int64(d.pool.Config().ConnConfig.Port) {
			t.Errorf("check.ready series %s", dp.Attributes.Encoded(nil))
		}
	}
	if len(seen) != 2 || seen["orders"] != 1 || seen["reports"] != 0 {
		t.Errorf("holdfast.readiness.check.ready by pool = %v, want orders 1, reports 0", seen)
	}

	moves, ok := got["holdfast.readiness.check.transitions"].Data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("no holdfast.readiness.check.transitions")
	}
	transitions := map[string]int64{}
	for _, dp := range moves.DataPoints {
		pool, _ := dp.Attributes.Value("db.client.connection.pool.name")
		h, _ := dp.Attributes.Value("holdfast.readiness.health")
		r, _ := dp.Attributes.Value("holdfast.readiness.reason")
		transitions[pool.AsString()+" "+h.AsString()+"/"+r.AsString()] += dp.Value
	}
	for _, want := range []string{"orders pass/", "reports pass/", "reports fail/database"} {
		if transitions[want] != 1 {
			t.Errorf("check.transitions %v: want one %q", transitions, want)
		}
	}

	durations, ok := got["holdfast.readiness.check.duration"].Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("no holdfast.readiness.check.duration")
	}
	outcomes := map[string]uint64{}
	for _, dp := range durations.DataPoints {
		pool, _ := dp.Attributes.Value("db.client.connection.pool.name")
		o, _ := dp.Attributes.Value("holdfast.outcome")
		outcomes[pool.AsString()+" "+o.AsString()] += dp.Count
	}
	if outcomes["orders success"] != 2 || outcomes["reports success"] != 1 || outcomes["reports failure"] != 1 {
		t.Errorf("check.duration counts = %v", outcomes)
	}

	overall, ok := got["holdfast.readiness.ready"].Data.(metricdata.Gauge[int64])
	if !ok || len(overall.DataPoints) != 1 || overall.DataPoints[0].Attributes.Len() != 0 || overall.DataPoints[0].Value != 1 {
		t.Errorf("holdfast.readiness.ready = %+v, want one series without attributes, 1 (an optional target only warns)", got["holdfast.readiness.ready"].Data)
	}
}
