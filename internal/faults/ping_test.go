package faults_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// addrDials is a pool's DialFunc that counts its dials to one address
// (connect attempts and cancel requests alike).
type addrDials struct {
	addr string
	n    atomic.Int64
}

func (a *addrDials) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if addr == a.addr {
		a.n.Add(1)
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, addr)
}

// routedTo returns a route to p (a pool's connects go where it names at
// connect time: store another proxy's address to move them) and a dial
// counter of p's address.
func routedTo(p *proxy) (*atomic.Value, *addrDials) {
	route := &atomic.Value{}
	route.Store(p.addr)
	return route, &addrDials{addr: p.addr}
}

// pingPool returns a holdfast pool of at most conns connections to the
// test server, reached through the proxy that route names at connect
// time, dialing through d; pgxpool pings a connection before handing it
// out while ping is true (instead of after a second idle: no test waits
// for one), each ping bounded by pingTimeout when not 0 (else by the
// request's deadline only).
func pingPool(t *testing.T, conns string, route *atomic.Value, d *addrDials, ping func() bool, pingTimeout time.Duration) *pgxpool.Pool {
	t.Helper()
	dsn, _ := serverAddr(t)
	cfg := routedConfig(t, dsn, func() string { return route.Load().(string) }, "&pool_max_conns="+conns)
	cfg.ConnConfig.DialFunc = d.dial
	cfg.PingTimeout = pingTimeout
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return ping() }
	f, _ := newHoldfast(t, testPolicy())
	return holdfastPool(t, f, cfg)
}

// selectOne runs SELECT 1 on pool within d.
func selectOne(pool *pgxpool.Pool, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var one int
	return pool.QueryRow(ctx, "SELECT 1").Scan(&one)
}

// A connection whose ping before it is handed out goes unanswered (its
// proxy froze: half-open) closes at once, without a cancel request or a
// drain: its pool slot is free for a new connection at the next request,
// where a cancel request to the frozen server and the drain would keep it
// for closeBound (1 s).
func TestUnansweredPingFreesSlot(t *testing.T) {
	t.Parallel()
	_, addr := serverAddr(t)
	old, fresh := newProxy(t, addr), newProxy(t, addr)
	route, d := routedTo(old)
	pool := pingPool(t, "1", route, d, func() bool { return true }, 0)
	if err := selectOne(pool, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	old.freeze(t)
	route.Store(fresh.addr)
	// The ping runs until the request's deadline: longer than a ping's
	// silence that proves nothing (half of closeBound).
	if err := selectOne(pool, time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("request on the frozen connection: %v, want its deadline exceeded", err)
	}
	start := time.Now()
	if err := selectOne(pool, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	within(t, "the next request, on a new connection", time.Since(start), 500*time.Millisecond)
	if n := d.n.Load(); n != 1 {
		t.Errorf("%d dials to the frozen proxy, want 1 (the connection): no cancel request", n)
	}
}

// When the ping of one of the pool's connections goes unanswered, the
// pool's other connections to that server are presumed dead (as when a
// cancel request goes unanswered), before the ping fails: the same
// request, its ping bounded by pgxpool's PingTimeout, destroys the idle
// other one instead of being handed it, and gets a new connection
// instead of hanging on a dead one.
func TestUnansweredPingEvictsTheOthers(t *testing.T) {
	t.Parallel()
	_, addr := serverAddr(t)
	old, fresh := newProxy(t, addr), newProxy(t, addr)
	route, d := routedTo(old)
	var pingNext atomic.Bool
	pool := pingPool(t, "2", route, d, func() bool { return pingNext.CompareAndSwap(true, false) }, time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	a, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a.Release()
	b.Release()
	old.freeze(t)
	route.Store(fresh.addr)
	pingNext.Store(true) // the first connection the request gets only
	start := time.Now()
	if err := selectOne(pool, 5*time.Second); err != nil {
		t.Fatalf("request after a ping went unanswered: %v (handed the other dead connection?)", err)
	}
	// The ping's second, then a new connection.
	within(t, "the request", time.Since(start), 1500*time.Millisecond)
	if n := d.n.Load(); n != 2 {
		t.Errorf("%d dials to the frozen proxy, want 2 (the two connections): no cancel request", n)
	}
}

// A request that times out on a connection just pinged still has its
// cancel request sent (the server may be running it): only the ping is
// spared one.
func TestTimedOutQueryAfterPingIsCanceled(t *testing.T) {
	t.Parallel()
	_, addr := serverAddr(t)
	p := newProxy(t, addr)
	route, d := routedTo(p)
	pool := pingPool(t, "1", route, d, func() bool { return true }, 0)
	if err := selectOne(pool, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	// Longer than a ping's silence that proves nothing (half of
	// closeBound): were the request taken for the ping, no cancel
	// request would be sent, and the server would sleep on.
	const sleep = "SELECT pg_sleep(10) /* TestTimedOutQueryAfterPingIsCanceled */"
	ctx, cancel := context.WithTimeout(context.Background(), 800*time.Millisecond)
	_, err := pool.Exec(ctx, sleep)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("pg_sleep(10) within 800 ms: %v, want its deadline exceeded", err)
	}
	// The pool's one slot is free once the connection closed: its cancel
	// request answered, pgx's drain read the server's close.
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var running int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE query = $1", sleep).Scan(&running); err != nil {
		t.Fatal(err)
	}
	if running != 0 {
		t.Errorf("the timed-out request still runs on the server (%d): no cancel request", running)
	}
}
