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

func startServe(t *testing.T, f *fixture, cfg readiness.ServeConfig) *serveFixture {
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
		{"negative delay", srv, readiness.ServeConfig{ShutdownDelay: -1}, "readiness: invalid ServeConfig.ShutdownDelay: must not be negative (got -1ns)"},
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
