package readiness_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/readiness"
)

// Issue 30, item 1: readiness reads the pool's outage state, not only its
// checks. While the pool's database is down (a server shut down; the pool
// found it down at a request's connect) readiness warns, reason
// "database-down", with DownSince; once down NotReadyAfter (here 3 s) it
// fails; it is ready again as soon as the database is back, without
// waiting for another check's success.
func TestReadinessOutage(t *testing.T) {
	t.Parallel()
	s := pgtest.NewServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, err := holdfast.New()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig(s.DSN())
	if err != nil {
		t.Fatal(err)
	}
	pool, c := startChecker(ctx, t, f, cfg, readiness.Config{NotReadyAfter: 3 * time.Second, CheckInterval: 50 * time.Millisecond})
	if st := c.Check(ctx); st.Health != readiness.Pass {
		t.Fatalf("before the outage: %v", st)
	}
	if err := s.Shutdown(ctx, pgtest.ShutdownFast); err != nil {
		t.Fatal(err)
	}
	// A request finds it down (and waits: its deadline ends it).
	rctx, rcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, _ = pool.Exec(rctx, "SELECT 1")
	rcancel()
	st := until(t, 5*time.Second, c, func(st readiness.Status) bool { return st.Reason == "database-down" })
	if st.Health != readiness.Warn || st.Database.DownSince.IsZero() {
		t.Errorf("down: health %s, reason %s, DownSince %v; want warn, database-down and when", st.Health, st.Reason, st.Database.DownSince)
	}
	downSince := st.Database.DownSince
	st = until(t, 5*time.Second, c, func(st readiness.Status) bool { return st.Health == readiness.Fail })
	if st.Reason != "database-down" || time.Since(downSince) < 3*time.Second {
		t.Errorf("not ready: reason %s %v after it went down; want database-down after NotReadyAfter (3s)", st.Reason, time.Since(downSince))
	}
	if st.Database.ConsecutiveFailures == 0 {
		t.Errorf("no failed check while the database was down: the fault does not bite")
	}
	t.Logf("MEASURED readiness: warn database-down, then fail %v after the database went down (NotReadyAfter 3s; %d failed checks): %s",
		time.Since(downSince).Round(10*time.Millisecond), st.Database.ConsecutiveFailures, st)
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	// Ready again at "back": the status, without a new check's success.
	st = until(t, 5*time.Second, c, func(st readiness.Status) bool { return st.Health == readiness.Pass })
	t.Logf("MEASURED readiness: pass %v after the restart", time.Since(restarted).Round(10*time.Millisecond))
}

// until returns the first status of c (checked every 20 ms) for which
// cond holds, failing t after d.
func until(t *testing.T, d time.Duration, c *readiness.Checker, cond func(readiness.Status) bool) readiness.Status {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		st := c.Check(context.Background())
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %v; the last status: %s", d, st)
		}
		<-tick.C
	}
}

// The token source down while the database is up (the password function
// fails with a Transient error: an IAM token API's 503): readiness warns,
// reason "token-source-down", and does not fail after NotReadyAfter, since
// the pool's open connections still serve (the database check fails it if
// they end); ready again when the token source is back.
func TestReadinessTokenSourceDown(t *testing.T) {
	t.Parallel()
	s := pgtest.NewServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var down atomic.Bool
	errToken := errors.New("token API: 503")
	f, err := holdfast.New(
		holdfast.WithPasswordFunc(func(context.Context, string) (string, error) {
			if down.Load() {
				return "", errToken
			}
			return "unused-by-trust-auth", nil
		}),
		holdfast.WithClassifier(func(err error) (classify.Verdict, bool) {
			return classify.Verdict{Class: classify.Transient, Reason: "token-503"}, errors.Is(err, errToken)
		}))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig(s.DSN())
	if err != nil {
		t.Fatal(err)
	}
	const notReadyAfter = time.Second
	pool, c := startChecker(ctx, t, f, cfg, readiness.Config{NotReadyAfter: notReadyAfter, CheckInterval: 50 * time.Millisecond})
	down.Store(true)
	pool.Reset() // its connections end: new ones need a token
	rctx, rcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, _ = pool.Exec(rctx, "SELECT 1")
	rcancel()
	st := until(t, 5*time.Second, c, func(st readiness.Status) bool { return st.Reason == "token-source-down" })
	since := st.Database.DownSince
	st = until(t, 5*time.Second, c, func(st readiness.Status) bool {
		return st.Health != readiness.Warn || st.Reason != "token-source-down" || time.Since(since) > notReadyAfter+500*time.Millisecond
	})
	if st.Health != readiness.Warn || st.Reason != "token-source-down" {
		t.Fatalf("the token source down %v: %s; want warn token-source-down until it is back", time.Since(since).Round(time.Millisecond), st)
	}
	down.Store(false)
	until(t, 5*time.Second, c, func(st readiness.Status) bool { return st.Health == readiness.Pass })
}

// startChecker makes a pool named "orders" of f from cfg and a Checker of
// it with rc (its Factory set to f), started; both close with t.
func startChecker(ctx context.Context, t *testing.T, f *holdfast.Factory, cfg *pgxpool.Config, rc readiness.Config) (*pgxpool.Pool, *readiness.Checker) {
	t.Helper()
	t.Cleanup(f.Close)
	pool, err := f.NewPool(ctx, cfg, holdfast.PoolName("orders"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	rc.Factory = f
	c, err := readiness.New(rc, readiness.Pool(pool))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return pool, c
}
