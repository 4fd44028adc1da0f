package holdfast_test

import (
	"context"
	"errors"
	"sync"
	"testing"

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
