package holdfast_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/fakes"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/retry"
)

// Each factory has a retry budget of its own by default: 300 goroutines
// failing against a dead database through factory A leave factory B the
// retries it needs for one blip against a healthy database. The control
// shares one budget between them, as the process-wide default did: B's
// blip then fails with the budget exhausted.
func TestBudgetPerFactory(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	for _, shared := range []bool{false, true} {
		name := "own budgets"
		if shared {
			name = "control: one shared budget"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var optsA, optsB []holdfast.Option
			for _, o := range []*[]holdfast.Option{&optsA, &optsB} {
				*o = append(*o, holdfast.WithRetryPolicy(fastPolicy()))
			}
			if shared {
				b, err := retry.NewBudget(retry.DefaultBudget())
				if err != nil {
					t.Fatal(err)
				}
				optsA = append(optsA, holdfast.WithRetryBudget(b))
				optsB = append(optsB, holdfast.WithRetryBudget(b))
			}
			fA, err := holdfast.New(optsA...)
			if err != nil {
				t.Fatal(err)
			}
			fB, err := holdfast.New(optsB...)
			if err != nil {
				t.Fatal(err)
			}

			// A: a database that refuses every dial, 300 callers.
			cfgA, addr := poolConfig(t, dsn, "sslmode=disable", "pool_max_conns=300")
			cfgA.ConnConfig.DialFunc = fakes.NewConnector(addr, fakes.Refused().Forever()).Dial
			poolA := newPool(t, fA, cfgA)
			var wg sync.WaitGroup
			for range 300 {
				wg.Go(func() {
					if c, err := fA.Acquire(context.Background(), poolA); err == nil {
						c.Release()
						t.Error("Acquire succeeded against a dead database")
					}
				})
			}
			wg.Wait()

			// B: a healthy database whose first dial is refused once.
			cfgB, addrB := poolConfig(t, dsn, "sslmode=disable")
			connB := fakes.NewConnector(addrB, fakes.Refused())
			cfgB.ConnConfig.DialFunc = connB.Dial
			poolB := newPool(t, fB, cfgB)
			err = poolB.Ping(context.Background())
			switch {
			case !shared && err != nil:
				t.Errorf("B's blip was not retried: %v", err)
			case !shared && connB.Attempts() != 2:
				t.Errorf("B dials = %d, want 2", connB.Attempts())
			case shared && !errors.Is(err, retry.ErrBudgetExhausted):
				t.Errorf("control: B = %v, want the shared budget exhausted by A", err)
			}
		})
	}
}

// A dial that a front end accepts is no success for the retry budget: only
// a completed handshake refills it. Against a front end that accepts each
// connection and closes it (a proxy whose database is down), a
// connection's two retry rounds spend two retries and get nothing back.
func TestAcceptedDialRefundsNothing(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	b, err := retry.NewBudget(retry.BudgetConfig{Capacity: 100, RetryCost: 5, SuccessRefill: 1})
	if err != nil {
		t.Fatal(err)
	}
	f := newFactory(t, holdfast.WithRetryBudget(b))
	cfg, err := pgxpool.ParseConfig("postgres://u@" + ln.Addr().String() + "/db?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	pool := newPool(t, f, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := pool.Ping(ctx); err == nil {
		t.Fatal("Ping succeeded against a front end that closes every connection")
	}
	if got, want := b.Available(), 90.0; b.Retries() != 2 || got != want {
		t.Errorf("%d retries, %v tokens left; want 2 retries and %v (no refund for an accepted dial)", b.Retries(), got, want)
	}
}

// A password rotation under load with the default budget: eight connects
// at once are refused with the password they fetched (28P01), and each
// Factory.Acquire retries once with a fresh one. That retry has a bound of
// its own (once per connection), so the budget neither charges nor
// refuses it: all eight succeed. Charged to the default budget (relative
// to demand: a retry only while more than 2.5 of its 5 tokens are left
// after a failure), the third refusal left the rest failing with the
// budget exhausted.
func TestFreshPasswordRetriesOutsideTheBudget(t *testing.T) {
	t.Parallel()
	s := pgtest.NewServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const user, password, conns = "rotated_app", "the-new-one", 8
	if err := s.PasswordRole(ctx, user, password); err != nil {
		t.Fatal(err)
	}
	// The first eight fetches, one per connect, wait for each other and
	// get the old password; every later one, the new.
	var mu sync.Mutex
	calls := 0
	all := make(chan struct{})
	f, err := holdfast.New(holdfast.WithPasswordFunc(func(ctx context.Context, _ string) (string, error) {
		mu.Lock()
		calls++
		n := calls
		if n == conns {
			close(all)
		}
		mu.Unlock()
		if n > conns {
			return password, nil
		}
		select {
		case <-all:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		return "the-old-one", nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := pgxpool.ParseConfig(fmt.Sprintf("postgres://%s@%s/postgres?sslmode=disable&pool_max_conns=%d", user, s.Addr(), conns))
	if err != nil {
		t.Fatal(err)
	}
	pool := newPool(t, f, cfg) // not started: every connect is a request's
	var wg sync.WaitGroup
	var held sync.WaitGroup // each Acquire keeps its connection until all have one
	held.Add(conns)
	errs := make(chan error, conns)
	for range conns {
		wg.Go(func() {
			c, err := f.Acquire(ctx, pool)
			held.Done()
			if err != nil {
				errs <- err
				return
			}
			held.Wait()
			c.Release()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Acquire through the rotation: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 2*conns {
		t.Errorf("%d password fetches, want %d: each connect's old one and its fresh one", calls, 2*conns)
	}
}
