package faults_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"
)

// pool.Close while a connect backs off (a refused dial, 2 s before the
// next attempt) or hangs in its dial (a dial that answers only its
// context) returns promptly, and so does the caller waiting for the
// connection; no attempt follows. pgxpool cancels the connects in progress
// when it closes, and waits for them: holdfast's backoff and dial honour
// the cancellation. goleak, at the end of the package, finds no goroutine
// of theirs left.
func TestCloseDuringConnect(t *testing.T) {
	if testing.Short() {
		t.Skip("plays outages on a real server: skipped with -short")
	}
	t.Parallel()
	dsn, _ := serverAddr(t)
	for _, hang := range []bool{false, true} {
		name := "during backoff"
		if hang {
			name = "during a hung dial"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d := &dialCounter{}
			cfg := configAt(t, dsn, closedPort(t), d, "")
			if hang {
				cfg.ConnConfig.DialFunc = func(ctx context.Context, _, _ string) (net.Conn, error) {
					d.n.Add(1)
					<-ctx.Done()
					return nil, ctx.Err()
				}
			}
			policy := testPolicy()
			policy.InitialInterval, policy.MaxInterval, policy.Jitter = 2*time.Second, 2*time.Second, 0
			policy.AttemptTimeout, policy.MaxElapsed = 10*time.Second, 20*time.Second
			f, _ := newHoldfast(t, policy)
			pool := holdfastPool(t, f, cfg)
			var wg sync.WaitGroup
			var pingErr error
			var pingEnded time.Time
			wg.Go(func() {
				pingErr = pool.Ping(context.Background())
				pingEnded = time.Now()
			})
			for i := 0; i < 500 && d.dials() == 0; i++ { // bounded: 5 s
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(100 * time.Millisecond) // well into the backoff, or the hung dial
			closing := time.Now()
			pool.Close()
			closed := time.Since(closing)
			wg.Wait()
			returned := pingEnded.Sub(closing)
			time.Sleep(300 * time.Millisecond) // a dial that came after Close would show
			if !hang {
				time.Sleep(policy.InitialInterval) // past the backoff Close cut short
			}
			t.Logf("MEASURED Close %s: returned in %v, the waiting Ping %v after Close began (%s); %d dials",
				name, closed.Round(10*time.Microsecond), returned.Round(10*time.Microsecond), outcome(f, pingErr), d.dials())
			if pingErr == nil {
				t.Error("Ping succeeded against a port that refuses")
			}
			within(t, "pool.Close", closed, 500*time.Millisecond)
			within(t, "the waiting Ping after Close", returned, 500*time.Millisecond)
			if n := d.dials(); n != 1 {
				t.Errorf("%d dials, want 1: the connect went on after Close", n)
			}
		})
	}
}
