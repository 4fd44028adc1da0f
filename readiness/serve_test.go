package readiness_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/readiness"
)

// noKeepAlive leaves no idle connection (and no goroutine) behind.
var noKeepAlive = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// serveFixture runs Checker.Serve on a loopback listener.
type serveFixture struct {
	*fixture
	url    string
	cancel context.CancelFunc
	done   chan error
}

// startServe runs f.c.Serve with cfg. Unless cfg sets a ShutdownDelay,
// Serve shuts down without one: these tests shut down through ctx, with
// nothing routing to them (the default's own test holds it with
// startServeHeld).
func startServe(t *testing.T, f *fixture, cfg readiness.ServeConfig) *serveFixture {
	t.Helper()
	if cfg.ShutdownDelay == 0 {
		cfg.ShutdownDelay = -1
	}
	return serve(t, f, cfg)
}

// heldDelay is a shutdown delay that a test ends: Serve's timer, as
// readiness.SetTimer installs it.
type heldDelay struct {
	asked chan time.Duration // the delay Serve asked for
	end   chan time.Time     // closed by release: the delay is over
	once  sync.Once
}

func (h *heldDelay) timer(d time.Duration) (<-chan time.Time, func()) {
	h.asked <- d
	return h.end, func() {}
}

// release ends the delay.
func (h *heldDelay) release() { h.once.Do(func() { close(h.end) }) }

// startServeHeld runs f.c.Serve with cfg, its shutdown delay held until the
// test calls release on the returned heldDelay (or ends).
func startServeHeld(t *testing.T, f *fixture, cfg readiness.ServeConfig) (*serveFixture, *heldDelay) {
	t.Helper()
	h := &heldDelay{asked: make(chan time.Duration, 1), end: make(chan time.Time)}
	readiness.SetTimer(f.c, h.timer)
	s := serve(t, f, cfg)
	t.Cleanup(h.release) // before serve's cleanup waits for Serve
	return s, h
}

func serve(t *testing.T, f *fixture, cfg readiness.ServeConfig) *serveFixture {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listener = ln
	cfg.Signals = []os.Signal{syscall.SIGUSR2} // never sent: these tests shut down through ctx
	ctx, cancel := context.WithCancel(context.Background())
	s := &serveFixture{fixture: f, url: "http://" + ln.Addr().String(), cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- f.c.Serve(ctx, &http.Server{Handler: f.mux, ReadHeaderTimeout: time.Minute}, cfg) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.done:
		case <-time.After(30 * time.Second):
			t.Error("Serve did not return")
		}
	})
	return s
}

func (s *serveFixture) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := noKeepAlive.Get(s.url + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// waitReady polls /readyz until it answers 200: Serve opens the startup gate
// in the background.
func (s *serveFixture) waitReady(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if code, _ := s.get(t, "/readyz"); code == 200 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("not ready within 30s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (s *serveFixture) result(t *testing.T) error {
	t.Helper()
	select {
	case err := <-s.done:
		s.done <- err // for the cleanup
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not return within 30s")
		return nil
	}
}

// On shutdown, Serve drains (readiness 503 while work is in use, requests
// still served), then stops the server and closes the pool.
func TestServeDrainsThenShutsDown(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOpts{cfg: readiness.Config{DrainInterval: 10 * time.Millisecond}})
	s := startServe(t, f, readiness.ServeConfig{})
	s.waitReady(t)
	p := newPoller(t, f.c)
	conn := f.hold(t)

	s.cancel() // as SIGTERM would
	u := p.next(t)
	for u.AcquiredConns > 1 { // a probe of the checker's own may be in use at a poll too
		u = p.next(t)
	}
	if u.AcquiredConns != 1 {
		t.Fatalf("drain poll = %v, want the held connection", u)
	}
	p.next(t) // the drain is waiting, blocked in its next poll
	if code, body := s.get(t, "/readyz"); code != 503 || body != "not ready: draining" {
		t.Errorf("readiness during the shutdown drain = %d %q", code, body)
	}
	if code, _ := s.get(t, "/livez"); code != 200 {
		t.Errorf("liveness during the shutdown drain = %d, want 200", code)
	}
	select {
	case err := <-s.done:
		t.Fatalf("Serve returned %v while a connection was held", err)
	default:
	}

	conn.Release()
	p.release()
	if err := s.result(t); err != nil {
		t.Fatalf("Serve = %v, want nil after a clean shutdown", err)
	}
	if _, err := noKeepAlive.Get(s.url + "/livez"); err == nil {
		t.Error("the server still answers after Serve returned")
	}
	if _, err := f.pool.Acquire(context.Background()); err == nil || !strings.Contains(err.Error(), "closed pool") {
		t.Errorf("pool.Acquire after Serve = %v, want a closed pool", err)
	}
	if got := f.c.Status().Reason; got != "closed" {
		t.Errorf("Checker reason after Serve = %q, want closed", got)
	}
}

// A drain that does not complete within the bound is returned, and the
// shutdown still happens; ShutdownDelay keeps serving meanwhile.
func TestServeDrainTimeout(t *testing.T) {
	t.Parallel()
	logs := &recordLog{want: "readiness: drain did not complete; traffic not proven gone", seen: make(chan struct{})}
	f := newFixture(t, fixtureOpts{cfg: readiness.Config{DrainInterval: 10 * time.Millisecond, Logger: slog.New(logs)}})
	s := startServe(t, f, readiness.ServeConfig{DrainTimeout: 100 * time.Millisecond, ShutdownDelay: 150 * time.Millisecond})
	s.waitReady(t)
	conn := f.hold(t)
	start := time.Now()
	s.cancel()
	select {
	case <-logs.seen:
	case <-time.After(30 * time.Second):
		t.Fatal("the shutdown drain did not time out within 30s")
	}
	// pool.Close waits for the connection still held.
	conn.Release()
	err := s.result(t)
	if elapsed := time.Since(start); elapsed < 150*time.Millisecond {
		t.Errorf("Serve shut down after %v, before its 150ms ShutdownDelay", elapsed)
	}
	var te *readiness.DrainTimeoutError
	// The held connection, and perhaps a probe of the checker's own in
	// use at the last poll.
	if !errors.As(err, &te) || te.Owner != "shutdown" || te.InUse.AcquiredConns < 1 {
		t.Fatalf("Serve = %v, want the drain's *DrainTimeoutError naming the acquired connection", err)
	}
}

func TestServeValidates(t *testing.T) {
	t.Parallel()
	c, err := readiness.New(readiness.Config{}, readiness.Pool(lazyPool(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	srv := &http.Server{}
	tests := []struct {
		name string
		srv  *http.Server
		cfg  readiness.ServeConfig
		want string
	}{
		{"nil server", nil, readiness.ServeConfig{}, "readiness: invalid srv: must not be nil"},
		{"negative drain timeout", srv, readiness.ServeConfig{DrainTimeout: -time.Second}, "readiness: invalid ServeConfig.DrainTimeout: must not be negative (got -1s)"},
		{"negative shutdown timeout", srv, readiness.ServeConfig{ShutdownTimeout: -time.Minute}, "readiness: invalid ServeConfig.ShutdownTimeout: must not be negative (got -1m0s)"},
		{"nil signal", srv, readiness.ServeConfig{Signals: []os.Signal{nil}}, "readiness: invalid ServeConfig.Signals: a signal is nil"},
		{"admin without an address", srv, readiness.ServeConfig{Admin: &http.Server{}}, "readiness: invalid ServeConfig.Admin.Addr: empty: give the admin server an address, such as 127.0.0.1:8081, or an AdminListener"},
		{"admin listener without a server", srv, readiness.ServeConfig{AdminListener: nopListener{}}, "readiness: invalid ServeConfig.AdminListener: set without ServeConfig.Admin, the server to serve it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := c.Serve(context.Background(), tt.srv, tt.cfg)
			if !errors.As(err, new(*readiness.ConfigError)) || err.Error() != tt.want {
				t.Fatalf("Serve = %v, want %q", err, tt.want)
			}
		})
	}
}

// recordLog is a slog.Handler that closes seen at the first record whose
// message is want.
type recordLog struct {
	want string
	seen chan struct{}
	once sync.Once
}

func (h *recordLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.want {
		h.once.Do(func() { close(h.seen) })
	}
	return nil
}
func (h *recordLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordLog) WithGroup(string) slog.Handler      { return h }

// nopListener is a net.Listener that Serve must refuse before using it.
type nopListener struct{}

func (nopListener) Accept() (net.Conn, error) { return nil, errors.New("not used") }
func (nopListener) Close() error              { return nil }
func (nopListener) Addr() net.Addr            { return &net.TCPAddr{} }

// Issue 29, item 7: with ServeConfig{}, Serve keeps the port open for the
// default delay after the shutdown began, so that load balancers see the
// 503 before the port closes: a request in flight finishes, readiness
// answers 503 throughout, requests that still arrive are served, and the
// listener closes once the delay is over. The delay's timer is the
// test's: nothing here waits 10s.
func TestIssue29ServeKeepsServingThroughShutdownDelay(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOpts{cfg: readiness.Config{DrainInterval: 10 * time.Millisecond}})
	entered, finish := make(chan struct{}), make(chan struct{})
	f.mux.Handle("/slow", f.c.Middleware(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		close(entered)
		<-finish
		_, _ = io.WriteString(w, "done")
	})))
	s, delay := startServeHeld(t, f, readiness.ServeConfig{})
	s.waitReady(t)

	type answer struct {
		code int
		body string
		err  error
	}
	slow := make(chan answer, 1)
	go func() {
		resp, err := noKeepAlive.Get(s.url + "/slow")
		if err != nil {
			slow <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		slow <- answer{resp.StatusCode, string(b), err}
	}()
	within(t, entered, "the slow request did not reach its handler")

	s.cancel() // as SIGTERM would
	// The drain waits for the request in flight; readiness fails at once.
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := s.get(t, "/readyz")
		if code == 503 && body == "not ready: draining" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz after the shutdown began = %d %q, want 503 draining", code, body)
		}
		time.Sleep(time.Millisecond)
	}
	close(finish)
	select {
	case a := <-slow:
		if a.err != nil || a.code != 200 || a.body != "done" {
			t.Fatalf("the request in flight at the shutdown = %d %q %v, want 200 done", a.code, a.body, a.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the request in flight did not finish")
	}

	// The drain is done; the delay keeps the port open.
	select {
	case d := <-delay.asked:
		if d <= 0 || d > 10*time.Second {
			t.Errorf("Serve waits %v after the drain, want the rest of the default 10s", d)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Serve asked for no shutdown delay: ServeConfig{} must keep serving after the drain")
	}
	if code, body := s.get(t, "/readyz"); code != 503 || body != "not ready: draining" {
		t.Errorf("/readyz during the delay = %d %q, want 503 draining", code, body)
	}
	if code, _ := s.get(t, "/livez"); code != 200 {
		t.Errorf("a new request during the delay = %d, want served (200)", code)
	}
	select {
	case err := <-s.done:
		t.Fatalf("Serve returned %v during the delay", err)
	default:
	}

	delay.release()
	if err := s.result(t); err != nil {
		t.Fatalf("Serve = %v, want nil", err)
	}
	if c, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://")); err == nil {
		c.Close()
		t.Error("the listener still accepts after the delay and Serve's return")
	}
}

// A negative ShutdownDelay means none: Serve shuts down once the drain
// completes, without a timer.
func TestServeNoShutdownDelay(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOpts{cfg: readiness.Config{DrainInterval: 10 * time.Millisecond}})
	s, delay := startServeHeld(t, f, readiness.ServeConfig{ShutdownDelay: -1})
	s.waitReady(t)
	s.cancel()
	if err := s.result(t); err != nil {
		t.Fatalf("Serve = %v, want nil", err)
	}
	select {
	case d := <-delay.asked:
		t.Errorf("Serve waited %v with ShutdownDelay -1, want no delay", d)
	default:
	}
}

// within fails t unless ch is closed within 30s.
func within(t *testing.T, ch <-chan struct{}, msg string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatal(msg)
	}
}
