package console_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast/lb"
	"github.com/holdfast-db/holdfast/lb/a10"
	"github.com/holdfast-db/holdfast/lb/a10/a10test"
	"github.com/holdfast-db/holdfast/lb/console"
	"github.com/holdfast-db/holdfast/lb/f5"
	"github.com/holdfast-db/holdfast/lb/f5/f5test"
	"github.com/holdfast-db/holdfast/lb/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// env is a console over a fake F5 and a fake A10 with the lock and the
// audit trail in a real PostgreSQL: two groups, "pay-XXXX" (two F5 pool
// members and an A10 server port) and "search-XXXX" (one F5 node).
type env struct {
	drain atomic.Pointer[lb.DrainConfig] // of the controls to come

	pay, search string // group names, unique per test
	f5          *f5test.Server
	a10         *a10test.Server
	store       *lb.PGStore
	groups      map[string][]lb.Target
	perms       lb.Permissions
	monitor     *lb.Monitor
	con         *console.Console
	srv         *httptest.Server
}

type envOpts struct {
	identity console.Identity
	poll     time.Duration
	drain    lb.DrainConfig
	// operators besides the defaults: alice and dave control pay, bob
	// controls search, carol controls both.
	perms lb.Permissions
}

func uniq(prefix string) string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

func newEnv(t *testing.T, o envOpts) *env {
	t.Helper()
	e := &env{pay: uniq("pay"), search: uniq("search"), f5: f5test.New(f5test.Options{}), a10: a10test.New(a10test.Options{})}
	t.Cleanup(e.f5.Close)
	t.Cleanup(e.a10.Close)
	e.f5.AddPoolMember("web", "web-1:443", f5test.Member{Conns: 12})
	e.f5.AddPoolMember("web", "web-2:443", f5test.Member{Conns: 7})
	e.a10.AddServer("app-1", a10test.Real{Ports: []a10test.Port{{Number: 8443, Conns: 3}}})
	e.f5.AddNode("idx-1", f5test.Member{Conns: 2})
	e.groups = map[string][]lb.Target{
		e.pay: {
			{Balancer: "f5-prod", Member: lb.Member{Pool: "web", Node: "web-1", Port: 443}},
			{Balancer: "f5-prod", Member: lb.Member{Pool: "web", Node: "web-2", Port: 443}},
			{Balancer: "a10-prod", Member: lb.Member{Node: "app-1", Port: 8443}},
		},
		e.search: {{Balancer: "f5-prod", Member: lb.Member{Node: "idx-1"}}},
	}
	e.perms = lb.Permissions{"alice": {e.pay}, "dave": {e.pay}, "bob": {e.search}, "carol": {"*"}}
	for k, v := range o.perms {
		e.perms[k] = v
	}
	if o.drain == (lb.DrainConfig{}) {
		o.drain = lb.DrainConfig{Interval: 20 * time.Millisecond, Timeout: 20 * time.Second}
	}
	e.drain.Store(&o.drain)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if e.store, err = lb.NewPGStore(ctx, pool); err != nil {
		t.Fatal(err)
	}
	bs, err := e.balancers()
	if err != nil {
		t.Fatal(err)
	}
	e.monitor, err = lb.NewMonitor(lb.MonitorConfig{Balancers: bs, Groups: e.groups, Locker: e.store})
	if err != nil {
		t.Fatal(err)
	}
	poll := o.poll
	if poll == 0 {
		poll = 50 * time.Millisecond
	}
	e.con, err = console.New(console.Config{
		Groups:        e.groups,
		Permissions:   e.perms,
		Status:        e.monitor,
		Store:         e.store,
		NewController: e.controller,
		Identity:      o.identity,
		Poll:          poll,
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewServer(e.con.Handler())
	t.Cleanup(func() {
		e.srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := e.con.Close(ctx); err != nil {
			t.Errorf("console Close: %v", err)
		}
		if err := e.monitor.Close(ctx); err != nil {
			t.Errorf("monitor Close: %v", err)
		}
		// Every session was logged out: the controls', the monitor's.
		if n := e.f5.ActiveTokens(); n != 0 {
			t.Errorf("%d F5 tokens left open", n)
		}
		if n := e.a10.ActiveSessions(); n != 0 {
			t.Errorf("%d A10 sessions left open", n)
		}
	})
	return e
}

// balancers returns fresh adapters on the fakes, with sessions of their own.
func (e *env) balancers() (map[string]lb.Balancer, error) {
	fb, err := f5.New(f5.Config{Endpoint: e.f5.URL(), Username: f5test.DefaultUsername, Password: f5test.DefaultPassword, HTTPClient: e.f5.Client()})
	if err != nil {
		return nil, err
	}
	ab, err := a10.New(a10.Config{Endpoint: e.a10.URL(), Username: a10test.DefaultUsername, Password: a10test.DefaultPassword, HTTPClient: e.a10.Client()})
	if err != nil {
		return nil, err
	}
	return map[string]lb.Balancer{"f5-prod": fb, "a10-prod": ab}, nil
}

// controller returns a controller of its own, as every console control
// and every command-line run has.
func (e *env) controller() (*lb.Controller, error) {
	bs, err := e.balancers()
	if err != nil {
		return nil, err
	}
	return lb.NewController(lb.ControllerConfig{
		Balancers: bs, Groups: e.groups, Permissions: e.perms,
		Locker: e.store.WithHost("ci-7"), Audit: e.store, Drain: *e.drain.Load(), Host: "ci-7",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
}
