package readiness_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/fakes"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/readiness"
	"github.com/holdfast-db/holdfast/retry"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// fakeClock is a manual clock for the check cache.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock { return &fakeClock{t: time.Date(2025, 1, 2, 15, 4, 5, 0, time.UTC)} }

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t
}

func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	f.t = f.t.Add(d)
	f.mu.Unlock()
}

// queryCounter counts the queries run on the pool's connections: the
// database round trips of the readiness check.
type queryCounter struct{ n atomic.Int64 }

func (q *queryCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	q.n.Add(1)
	return ctx
}

func (q *queryCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// fixture is a real PostgreSQL pool behind a scripted connector, a Checker
// on it and an httptest.Server serving its handlers.
type fixture struct {
	pool    *pgxpool.Pool
	factory *holdfast.Factory // that configured pool
	conn    *fakes.Connector
	queries *queryCounter
	clock   *fakeClock
	c       *readiness.Checker
	srv     *httptest.Server
	mux     *http.ServeMux
}

type fixtureOpts struct {
	steps    []fakes.Step     // the connector's script
	cfg      readiness.Config // Factory is filled in
	maxConns int32
	startup  int // startup policy attempts; default 3
	// wrap, if set, builds the server's handler from the mux
	wrap func(c *readiness.Checker, mux *http.ServeMux) http.Handler
}

func fastPolicy(attempts int) retry.Policy {
	p := retry.Default()
	p.MaxAttempts = attempts
	p.InitialInterval = time.Millisecond
	p.MaxInterval = 2 * time.Millisecond
	return p
}

func newFixture(t *testing.T, o fixtureOpts) *fixture {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port)))
	f := &fixture{conn: fakes.NewConnector(addr, o.steps...), queries: &queryCounter{}, clock: newClock()}
	cfg.ConnConfig.DialFunc = f.conn.Dial
	cfg.ConnConfig.Tracer = f.queries
	if o.maxConns > 0 {
		cfg.MaxConns = o.maxConns
	}
	budget, err := retry.NewBudget(retry.DefaultBudget())
	if err != nil {
		t.Fatal(err)
	}
	if o.startup == 0 {
		o.startup = 3
	}
	// One dial per connection attempt, so that the connector counts
	// checks; and no outage layer, whose prober would dial too while the
	// database is away (TestReadinessOutage covers readiness with it).
	factory, err := holdfast.New(holdfast.WithRetryPolicy(fastPolicy(1)), holdfast.WithStartupPolicy(fastPolicy(o.startup)), holdfast.WithRetryBudget(budget),
		holdfast.WithOutage(holdfast.Outage{Off: true}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(factory.Close)
	if err := factory.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	f.pool, err = pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.pool.Close)
	o.cfg.Factory, f.factory = factory, factory
	f.c, err = readiness.New(o.cfg, readiness.Pool(f.pool))
	if err != nil {
		t.Fatal(err)
	}
	readiness.SetClock(f.c, f.clock.Now)
	f.mux = http.NewServeMux()
	f.mux.Handle("/readyz", f.c.ReadyHandler())
	f.mux.Handle("/livez", f.c.LiveHandler())
	f.mux.Handle("/drain", f.c.DrainHandler()) // answers the test's loopback client
	f.mux.Handle("/admin", f.c.AdminHandler())
	var h http.Handler = f.mux
	if o.wrap != nil {
		h = o.wrap(f.c, f.mux)
	}
	f.srv = httptest.NewServer(h)
	t.Cleanup(f.srv.Close)
	t.Cleanup(f.c.Close) // first: it interrupts drains that requests may wait on
	return f
}

// hold acquires a pool connection for the test. It is released at the end
// of the test at the latest, so that a failing test does not leave
// pool.Close waiting for it.
func (f *fixture) hold(t *testing.T) *pgxpool.Conn {
	t.Helper()
	conn, err := f.pool.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Release)
	return conn
}

// start opens the startup gate, failing the test if it does not open.
func (f *fixture) start(t *testing.T) {
	t.Helper()
	if err := f.c.Start(context.Background()); err != nil {
		t.Fatalf("Start = %v", err)
	}
}

type response struct {
	code   int
	body   string
	header http.Header
}

// do sends a request to the fixture's server.
func (f *fixture) do(t *testing.T, method, path string, header ...string) response {
	t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{code: resp.StatusCode, body: strings.TrimSpace(string(b)), header: resp.Header}
}

// health is the JSON body of the readiness probe.
type health struct {
	Status string `json:"status"`
	Reason string `json:"reason"`
	Output string `json:"output"`
	Checks struct {
		Startup []struct {
			Status string `json:"status"`
			Time   string `json:"time"`
			Reason string `json:"reason"`
		} `json:"startup"`
		Database []struct {
			Status              string   `json:"status"`
			ObservedValue       *float64 `json:"observedValue"`
			ObservedUnit        string   `json:"observedUnit"`
			Time                string   `json:"time"`
			LastSuccess         string   `json:"lastSuccess"`
			ConsecutiveFailures int      `json:"consecutiveFailures"`
			FailureThreshold    int      `json:"failureThreshold"`
			Reason              string   `json:"reason"`
		} `json:"postgres:responseTime"`
		Connections []struct {
			Status   string `json:"status"`
			Acquired int32  `json:"acquired"`
			Max      int32  `json:"max"`
		} `json:"postgres:connections"`
		Drain []drainJSON `json:"drain"`
	} `json:"checks"`
}

type drainJSON struct {
	Status   string `json:"status"`
	State    string `json:"state"`
	Owner    string `json:"owner"`
	Since    string `json:"since"`
	LockedAt string `json:"lockedAt"`
	InFlight int64  `json:"inFlight"`
	InUse    *struct {
		AcquiredConns int64 `json:"acquiredConns"`
		InFlight      int64 `json:"inFlight"`
	} `json:"inUse"`
}

// healthz fetches the admin body and decodes it.
func (f *fixture) healthz(t *testing.T) (int, health) {
	t.Helper()
	r := f.do(t, "GET", "/admin")
	if ct := r.header.Get("Content-Type"); ct != "application/health+json" {
		t.Errorf("Content-Type = %q, want application/health+json", ct)
	}
	var h health
	if err := json.Unmarshal([]byte(r.body), &h); err != nil {
		t.Fatalf("decoding %q: %v", r.body, err)
	}
	return r.code, h
}

// poller receives the drain polls of a Checker, one at a time: the
// draining goroutine blocks in its poll until the test takes it, so the test
// sees every poll and decides when the next one may happen.
type poller struct {
	polls chan readiness.InUse
	stop  chan struct{}
	once  sync.Once
}

func newPoller(t *testing.T, c *readiness.Checker) *poller {
	p := &poller{polls: make(chan readiness.InUse), stop: make(chan struct{})}
	readiness.SetPollHook(c, func(u readiness.InUse) {
		select {
		case p.polls <- u:
		case <-p.stop:
		}
	})
	t.Cleanup(p.release)
	return p
}

// next returns the next poll, or fails the test after a generous bound.
func (p *poller) next(t *testing.T) readiness.InUse {
	t.Helper()
	select {
	case u := <-p.polls:
		return u
	case <-time.After(30 * time.Second):
		t.Fatal("no drain poll within 30s")
		return readiness.InUse{}
	}
}

// release lets every later poll through without the test.
func (p *poller) release() { p.once.Do(func() { close(p.stop) }) }

type drainOutcome struct {
	res readiness.DrainResult
	err error
}

// drainAsync starts a drain on its own goroutine.
func drainAsync(c *readiness.Checker, owner string, opts ...readiness.DrainOption) <-chan drainOutcome {
	out := make(chan drainOutcome, 1)
	go func() {
		res, err := c.Drain(context.Background(), owner, opts...)
		out <- drainOutcome{res, err}
	}()
	return out
}

// drainNow drains and waits for the outcome, failing the test instead of
// hanging if the drain does not return.
func drainNow(t *testing.T, c *readiness.Checker, owner string, opts ...readiness.DrainOption) (readiness.DrainResult, error) {
	t.Helper()
	o := waitOutcome(t, drainAsync(c, owner, opts...))
	return o.res, o.err
}

func waitOutcome(t *testing.T, ch <-chan drainOutcome) drainOutcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(30 * time.Second):
		t.Fatal("drain did not return within 30s")
		return drainOutcome{}
	}
}

// healthJSON is the ready handler's application/health+json body.
type healthJSON struct {
	Status string                       `json:"status"`
	Checks map[string][]json.RawMessage `json:"checks"`
	raw    string
}

// localRequest is a request from this host, as the admin handlers admit
// without Config.Authorize.
func localRequest(method, target string) *http.Request {
	req := httptest.NewRequest(method, target, nil)
	req.RemoteAddr, req.Host = "127.0.0.1:40000", "localhost"
	return req
}

// readyHealthJSON asks c's admin handler for its JSON body.
func readyHealthJSON(c *readiness.Checker) (healthJSON, error) {
	rec := httptest.NewRecorder()
	c.AdminHandler().ServeHTTP(rec, localRequest(http.MethodGet, "/admin"))
	body := healthJSON{raw: rec.Body.String()}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		return body, fmt.Errorf("body %q: %w", body.raw, err)
	}
	return body, nil
}
