package faults_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A connection the server closed in the middle of a request (the end of
// the stream, as a failover, a restart or a maintenance cuts every
// connection at once) sends no cancel request: the session it would name
// ended with it, and a pool cut at once would dial the failing server
// once per connection, beside its own reconnects. pgx sends one on any
// failure; before holdfast held it back, this test saw 2 dials.
func TestHungUpSendsNoCancelRequest(t *testing.T) {
	t.Parallel()
	dsn, addr := serverAddr(t)
	old, fresh := newProxy(t, addr), newProxy(t, addr)
	route, d := routedTo(old)
	pool := pingPool(t, "1", route, d, func() bool { return false }, 0)
	if err := selectOne(pool, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	route.Store(fresh.addr) // the prober's checks and the next connects go there

	const sleep = "SELECT pg_sleep(10) /* TestHungUpSendsNoCancelRequest */"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := pool.Exec(ctx, sleep)
		errc <- err
	}()
	// The request runs on the server when the connection is cut.
	watch, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close(context.Background())
	for running := 0; running == 0; {
		if err := watch.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE query = $1 AND wait_event = 'PgSleep'", sleep).Scan(&running); err != nil {
			t.Fatalf("waiting for the request to run: %v", err)
		}
	}
	old.p.Stop() // closes the connection: the client reads the end of the stream
	if err := <-errc; err == nil {
		t.Fatal("the request succeeded on a connection that was closed under it")
	}
	// Close returns once the closed connection's cleanup (the cancel
	// request pgx would send, then its drain) is over.
	pool.Close()
	if n := d.n.Load(); n != 1 {
		t.Errorf("%d dials to the proxy that closed the connection, want 1 (the connection): no cancel request", n)
	}
	// The backend whose client went away is ended by the server itself.
	if _, err := watch.Exec(ctx, "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query = $1", sleep); err != nil {
		t.Fatal(err)
	}
}
