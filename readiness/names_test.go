package readiness_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/fakes"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/readiness"
	"github.com/holdfast-db/holdfast/sqldb"
)

// A target's default name is the name its pool was given, else
// "database", "database-2", ...: never its address.
func TestTargetNames(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const url = "postgres://app@127.0.0.1:1/app" // never connects in this test
	type pool struct {
		factory  []holdfast.Option // of the factory that configures it; nil: no factory
		name     string            // holdfast.PoolName
		noConfig bool              // a pool no holdfast factory configured
	}
	newPool := func(t *testing.T, p pool) *pgxpool.Pool {
		t.Helper()
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			t.Fatal(err)
		}
		if !p.noConfig {
			f, err := holdfast.New(p.factory...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(f.Close)
			var opts []holdfast.PoolOption
			if p.name != "" {
				opts = append(opts, holdfast.PoolName(p.name))
			}
			if err := f.Configure(cfg, opts...); err != nil {
				t.Fatal(err)
			}
		}
		pp, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pp.Close)
		return pp
	}
	type target struct {
		pool pool
		name string // Target.Name
		db   bool   // a *sql.DB of sqldb.OpenDB over the pool
	}
	for _, tt := range []struct {
		name    string
		targets []target
		want    []string
	}{
		{"unnamed pool", []target{{}}, []string{"database"}},
		{"a pool no factory configured", []target{{pool: pool{noConfig: true}}}, []string{"database"}},
		{"holdfast.PoolName", []target{{pool: pool{name: "orders"}}}, []string{"orders"}},
		{"Target.Name over PoolName", []target{{pool: pool{name: "orders"}, name: "main"}}, []string{"main"}},
		{"a pool named like its address", []target{{pool: pool{name: "127.0.0.1:1/app"}}}, []string{"127.0.0.1:1/app"}},
		{"two unnamed", []target{{}, {db: true}}, []string{"database", "database-2"}},
		{"three unnamed around named ones", []target{{}, {pool: pool{name: "orders"}}, {db: true}, {pool: pool{noConfig: true}}},
			[]string{"database", "orders", "database-2", "database-3"}},
		{"a default skips the names given", []target{{}, {name: "database"}, {pool: pool{name: "database-2"}}},
			[]string{"database-3", "database", "database-2"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var ts []readiness.Target
			for _, tg := range tt.targets {
				pp := newPool(t, tg.pool)
				rt := readiness.Target{Pool: pp, Name: tg.name}
				if tg.db {
					db := sqldb.OpenDB(pp)
					t.Cleanup(func() { db.Close() })
					rt = readiness.Target{DB: db, Name: tg.name}
				}
				ts = append(ts, rt)
			}
			c, err := readiness.New(readiness.Config{}, ts...)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var got []string
			for _, s := range c.Status().Targets {
				got = append(got, s.Name)
			}
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("target names = %q, want %q", got, tt.want)
			}
		})
	}
}

// addressIn returns what of addr (its host, its port, host:port) body
// contains, or "".
func addressIn(body, host string, port uint16) string {
	p := strconv.Itoa(int(port))
	switch {
	case strings.Contains(body, host):
		return host
	case regexp.MustCompile(`(^|[^0-9])` + p + `([^0-9]|$)`).MatchString(body):
		return p
	}
	return ""
}

// servedBodies is what c's handlers serve to a probe or an operator now:
// the plain and JSON readiness answers, the drain state and the admin
// body.
func servedBodies(t *testing.T, c *readiness.Checker) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, r := range []struct {
		name, path, accept string
		h                  http.Handler
	}{
		{"/readyz", "/readyz", "", c.ReadyHandler()},
		{"/readyz?verbose", "/readyz?verbose", "", c.ReadyHandler()},
		{"/readyz as application/json", "/readyz", "application/json", c.ReadyHandler()},
		{"/readyz as application/health+json", "/readyz", "application/health+json", c.ReadyHandler()},
		{"/livez?verbose", "/livez?verbose", "", c.LiveHandler()},
		{"GET /drain", "/drain", "", c.DrainHandler()},
		{"admin", "/admin", "", c.AdminHandler()},
	} {
		rec := httptest.NewRecorder()
		req := localRequest(http.MethodGet, r.path) // the admin handlers answer it
		if r.accept != "" {
			req.Header.Set("Accept", r.accept)
		}
		r.h.ServeHTTP(rec, req)
		out[r.name] = rec.Body.String()
	}
	return out
}

// noAddress fails the test when a body names host or port.
func noAddress(t *testing.T, when string, bodies map[string]string, host string, port uint16) {
	t.Helper()
	for name, body := range bodies {
		if a := addressIn(body, host, port); a != "" {
			t.Errorf("%s: %s serves the database's address (%s):\n%s", when, name, a, body)
		}
	}
}

// Item 8 of issue 28: by default nothing served to a probe or through the
// drain endpoint names a database's address (host, port or IP), in any
// state: starting, startup-failed with the cause, ready, draining, a drain
// that timed out with the connections still acquired, and back in
// service. The addresses stay in the log lines.
func TestBodyServesNoAddress(t *testing.T) {
	t.Parallel()
	logs := &lockedBuffer{}
	f := newFixture(t, fixtureOpts{steps: []fakes.Step{fakes.Refused().Forever()},
		cfg: readiness.Config{Logger: slog.New(slog.NewTextHandler(logs, nil)), DrainInterval: time.Millisecond}})
	cc := f.pool.Config().ConnConfig
	host, port := cc.Host, cc.Port
	noAddress(t, "starting", servedBodies(t, f.c), host, port)

	if err := f.c.Start(context.Background()); err == nil {
		t.Fatal("Start succeeded against a refusing database")
	}
	bodies := servedBodies(t, f.c)
	if !strings.Contains(bodies["admin"], `"componentId":"database"`) {
		t.Errorf("startup-failed: want componentId \"database\": %s", bodies["admin"])
	}
	noAddress(t, "startup-failed", bodies, host, port)

	f.conn.Set()
	f.clock.Advance(time.Hour)
	if s := f.c.Check(context.Background()); s.Health != readiness.Pass {
		t.Fatalf("after the database came back: %v", s)
	}
	noAddress(t, "ready", servedBodies(t, f.c), host, port)

	f.hold(t) // a connection the drain waits for
	r := f.do(t, "POST", "/drain?timeout=20ms", "X-Drain-Owner", "deploy-1")
	if r.code != 503 {
		t.Fatalf("a drain with a connection held: %d %s, want 503", r.code, r.body)
	}
	if a := addressIn(r.body, host, port); a != "" {
		t.Errorf("POST /drain serves the database's address (%s): %s", a, r.body)
	}
	noAddress(t, "draining", servedBodies(t, f.c), host, port)
	r = f.do(t, "DELETE", "/drain", "X-Drain-Owner", "deploy-1")
	if a := addressIn(r.body, host, port); r.code != 200 || a != "" {
		t.Errorf("DELETE /drain: %d %s (address: %q)", r.code, r.body, a)
	}

	if !strings.Contains(logs.String(), "server.address="+host) {
		t.Errorf("the log lines do not name the database's address:\n%s", logs.String())
	}
}

// With several unnamed targets, each is named apart ("database",
// "database-2") and no body names an address, the drain's by-target
// answer and its error included.
func TestBodyServesNoAddressTargets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, err := holdfast.New(holdfast.WithRetryPolicy(fastPolicy(1)), holdfast.WithStartupPolicy(fastPolicy(1)), holdfast.WithRetryBudget(nil))
	if err != nil {
		t.Fatal(err)
	}
	newPool := func() *pgxpool.Pool {
		cfg, err := pgxpool.ParseConfig(pgtest.DSN(t))
		if err != nil {
			t.Fatal(err)
		}
		pool, err := f.NewPool(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return pool
	}
	pool, under := newPool(), newPool()
	db := sqldb.OpenDB(under)
	t.Cleanup(func() { db.Close() })
	c, err := readiness.New(readiness.Config{Factory: f, DrainInterval: time.Millisecond}, readiness.Pool(pool), readiness.DB(db))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	readiness.SetClock(c, newClock().Now)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cc := pool.Config().ConnConfig
	host, port := cc.Host, cc.Port
	bodies := servedBodies(t, c)
	for _, id := range []string{`"componentId":"database"`, `"componentId":"database-2"`} {
		if !strings.Contains(bodies["admin"], id) {
			t.Errorf("want %s: %s", id, bodies["admin"])
		}
	}
	noAddress(t, "ready", bodies, host, port)

	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rec := httptest.NewRecorder()
	req := localRequest(http.MethodPost, "/drain?timeout=20ms&owner=deploy-2")
	c.DrainHandler().ServeHTTP(rec, req)
	if rec.Code != 503 || !strings.Contains(rec.Body.String(), "database-2: 1") {
		t.Fatalf("a drain with a *sql.Conn held: %d %s, want 503 naming database-2", rec.Code, rec.Body)
	}
	if a := addressIn(rec.Body.String(), host, port); a != "" {
		t.Errorf("POST /drain serves the database's address (%s): %s", a, rec.Body)
	}
	bodies = servedBodies(t, c)
	if !strings.Contains(bodies["admin"], `"byTarget":{"database":0,"database-2":1}`) {
		t.Errorf("draining: want the connections by target: %s", bodies["admin"])
	}
	noAddress(t, "draining", bodies, host, port)
}

// lockedBuffer is an io.Writer for a logger that several goroutines use.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
