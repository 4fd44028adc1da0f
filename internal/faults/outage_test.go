package faults_test

import (
	"context"
	"fmt"
	"math"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/retry"
)

// What a sustained outage costs: 1,000 goroutines each call
// Factory.Acquire on a pool (pool_max_conns=1000, retry.Default) whose
// database is down, behind a port that refuses, or behind a front end (a
// proxy, a load balancer) that accepts each connection and closes it, its
// backend being down. Every connection is dialed once, and retried only as
// the factory's retry budget allows: under the plain bucket
// (retry.DefaultBudget, the default until the demand budget: 100 tokens, 5
// a retry, 1 back a second; refunded only by a completed handshake) about
// 20 retries for all 1,000, plus one per 5 s the outage lasts; under the
// factory's default, a budget relative to demand (40 tokens, every failure
// takes one, retries only above 20, 0.5 back a second), 19 retries for all
// 1,000, plus what its time refill allows. Without a
// budget (measured for comparison) each connection makes MaxAttempts (3)
// dials. With a token function (an IAM token fetched for each connect,
// successfully: the token endpoint is up, the database is not) the cost
// is the same: a fetched token refunds nothing, only a completed
// handshake does.
func TestOutageCost(t *testing.T) {
	if testing.Short() {
		t.Skip("plays outages on a real server: skipped with -short")
	}
	t.Parallel()
	dsn, _ := serverAddr(t)
	const callers = 1000
	for _, front := range []string{"refused port", "accepts then closes"} {
		for _, run := range []struct {
			budgeted, token, demand bool
		}{{true, false, false}, {true, true, false}, {true, false, true}, {true, true, true}, {false, false, false}} {
			budgeted := run.budgeted
			name := front + "/plain budget"
			switch {
			case !budgeted:
				name = front + "/no budget"
			case run.demand:
				name = front + "/default budget"
			}
			if run.token {
				name += "/token function"
			}
			// Not parallel: 1,000 goroutines at a time are enough for
			// 2 cores and the race detector's goroutine limit.
			t.Run(name, func(t *testing.T) {
				down := closedPort(t)
				addr := down
				if front == "accepts then closes" {
					addr = newProxy(t, down).addr // toxiproxy closes a client whose upstream refuses
				}
				d := &dialCounter{}
				var f *holdfast.Factory
				var b *retry.Budget
				var opts []holdfast.Option
				var fetches atomic.Int64
				if run.token {
					opts = append(opts, holdfast.WithPasswordFunc(func(context.Context, string) (string, error) {
						fetches.Add(1)
						return "a-fresh-token", nil
					}))
				}
				switch {
				case budgeted && run.demand: // the factory's own default budget
					var err error
					if f, err = holdfast.New(append([]holdfast.Option{holdfast.WithRetryPolicy(retry.Default())}, opts...)...); err != nil {
						t.Fatal(err)
					}
					t.Cleanup(f.Close)
				case budgeted:
					f, b = newHoldfast(t, retry.Default(), opts...)
				default:
					f, _ = newHoldfast(t, retry.Default(), append(opts, holdfast.WithRetryBudget(nil))...)
				}
				pool := holdfastPool(t, f, configAt(t, dsn, addr, d, "&pool_max_conns=1000"))
				verdicts := map[string]int{}
				var mu sync.Mutex
				var wg sync.WaitGroup
				began := time.Now()
				for range callers {
					wg.Go(func() {
						ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
						defer cancel()
						c, err := f.Acquire(ctx, pool)
						if err == nil {
							c.Release()
						}
						mu.Lock()
						verdicts[outcome(f, err)]++
						mu.Unlock()
					})
				}
				wg.Wait()
				took := time.Since(began)
				dials := d.dials()
				counts := fmt.Sprintf("%d retries allowed, %d refused by the budget", b.Retries(), b.Denied())
				if b == nil {
					counts = fmt.Sprintf("%d retries", dials-callers) // the factory's own budget, or none
				}
				t.Logf("MEASURED outage, %s: %d callers, %d dials (%.2f per caller), %d token fetches, %s, %v; outcomes %v",
					name, callers, dials, float64(dials)/callers, fetches.Load(), counts, took.Round(time.Millisecond), verdicts)
				if verdicts["ok"] != 0 {
					t.Errorf("%d callers connected to a database that is down", verdicts["ok"])
				}
				for v, n := range verdicts {
					if !strings.HasPrefix(v, "transient/") {
						t.Errorf("%d callers failed %s, want transient (the database may come back)", n, v)
					}
				}
				if !budgeted {
					if want := int64(callers * retry.Default().MaxAttempts); dials != want {
						t.Errorf("dials = %d, want %d (MaxAttempts each)", dials, want)
					}
					return
				}
				// The plain bucket: 20 retries from a full bucket, and one per
				// 5 s of refill while the outage lasted. The default: 19 from a
				// full bucket (40 tokens, a failure takes one, retries above
				// 20), and at most one per token of its 0.5 a second refill;
				// read from the dials, its counters being the factory's.
				allowed := int64(20 + math.Ceil(took.Seconds()/5))
				if run.demand {
					allowed = int64(19 + math.Ceil(took.Seconds()*0.5))
					if dials < callers || dials > callers+allowed {
						t.Errorf("dials = %d, want %d first attempts + at most %d retries", dials, callers, allowed)
					}
					return
				}
				if r := b.Retries(); r > allowed {
					t.Errorf("%d retries in %v, want at most %d", r, took, allowed)
				}
				if dials < callers || dials > callers+b.Retries() {
					t.Errorf("dials = %d, want %d first attempts + at most the %d retries", dials, callers, b.Retries())
				}
				if dials > callers+25 {
					t.Errorf("dials = %d, want at most %d: a token fetch must not refill the budget", dials, callers+25)
				}
			})
		}
	}
}

// closedPort returns a loopback address where nothing listens (a port just
// released).
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
