package holdfast_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/retry"
)

// A service started before its database comes up with the defaults,
// whose budget is relative to demand: its startup is bounded by the
// startup policy alone, neither charged to the request budget nor refused
// by it. The database is down until the startup's fourth dial (its second
// round: the first connect's three dials are what retry.DemandBudget lets
// a request make) and then starts.
//
//   - defaults: NewPool of a factory with no option succeeds, after more
//     than three dials, within the startup policy's 30 s;
//   - the same with retry.DemandBudget given (WithRetryBudget: the
//     strictest budget relative to demand, 2 retries in a burst where the
//     default's allows 9), to read it: NewPool succeeds and leaves it
//     full, with no failure charged;
//   - control: requests (Factory.Acquire) against the same database, down,
//     on that budget: the first one's connect makes its three dials, and
//     the second one's retry is refused (retry.ErrBudgetExhausted) after
//     one: what a startup charged to the budget would meet, and did
//     before it was exempt (the second case failed so, after 3 dials).
func TestStartupBeforeDatabase(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		budget bool // give retry.DemandBudget explicitly, to read it
	}{{"defaults", false}, {"DemandBudget given", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := pgtest.NewServer(t)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := srv.Shutdown(ctx, pgtest.ShutdownFast); err != nil {
				t.Fatal(err)
			}
			cfg, err := pgxpool.ParseConfig(srv.DSN())
			if err != nil {
				t.Fatal(err)
			}
			// The server starts when the startup dials for the fourth
			// time; Restart returns once it accepts connections.
			var dials atomic.Int64
			var restart sync.WaitGroup
			restarted := make(chan error, 1)
			var d net.Dialer
			cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
				if dials.Add(1) == 4 {
					restart.Go(func() { restarted <- srv.Restart(context.Background()) })
				}
				return d.DialContext(ctx, network, addr)
			}
			t.Cleanup(restart.Wait)
			var opts []holdfast.Option
			var b *retry.Budget
			if tc.budget {
				b, err = retry.NewBudget(retry.DemandBudget())
				if err != nil {
					t.Fatal(err)
				}
				opts = append(opts, holdfast.WithRetryBudget(b))
			}
			f, err := holdfast.New(opts...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(f.Close)
			start := time.Now()
			pool, err := f.NewPool(ctx, cfg)
			took := time.Since(start)
			if err != nil {
				t.Fatalf("NewPool after %v and %d dials: %v", took, dials.Load(), err)
			}
			defer pool.Close()
			if err := <-restarted; err != nil {
				t.Fatal(err)
			}
			t.Logf("NewPool succeeded after %v and %d dials", took.Round(time.Millisecond), dials.Load())
			if n := dials.Load(); n <= 3 {
				t.Errorf("%d dials: the database was down for the first 3", n)
			}
			if took > 30*time.Second {
				t.Errorf("NewPool took %v, over the startup policy's 30 s", took)
			}
			if err := pool.Ping(ctx); err != nil {
				t.Errorf("Ping after startup: %v", err)
			}
			if b == nil {
				return
			}
			capacity := retry.DemandBudget().Capacity
			if b.Available() != capacity || b.Failures() != 0 || b.Retries() != 0 || b.Denied() != 0 {
				t.Errorf("after the startup the budget has %v tokens, %d failures charged, %d retries, %d refused; want %v and none",
					b.Available(), b.Failures(), b.Retries(), b.Denied(), capacity)
			}

			// Control: a request on the same budget against the database
			// down.
			if err := srv.Shutdown(ctx, pgtest.ShutdownFast); err != nil {
				t.Fatal(err)
			}
			down, err := pgxpool.ParseConfig(srv.DSN())
			if err != nil {
				t.Fatal(err)
			}
			var requestDials atomic.Int64
			down.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
				requestDials.Add(1)
				return d.DialContext(ctx, network, addr)
			}
			if err := f.Configure(down); err != nil {
				t.Fatal(err)
			}
			rp, err := pgxpool.NewWithConfig(ctx, down)
			if err != nil {
				t.Fatal(err)
			}
			defer rp.Close()
			// The first request's connect makes its three dials and takes
			// a token for each failure; the second's first failure finds
			// the bucket at its threshold, and its retry is refused.
			for i, want := range []error{nil, retry.ErrBudgetExhausted} {
				c, err := f.Acquire(ctx, rp)
				if err == nil {
					c.Release()
					t.Fatal("control: Acquire succeeded against a database that is down")
				}
				if want != nil && !errors.Is(err, want) {
					t.Errorf("control: request %d: %v, want the budget exhausted", i+1, err)
				}
			}
			if n := requestDials.Load(); n != 4 {
				t.Errorf("control: %d dials for two requests, want 4 (3, then 1 refused a retry)", n)
			}
		})
	}
}
