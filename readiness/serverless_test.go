package readiness_test

import (
	"context"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/fakes/outagetest"
	"github.com/holdfast-db/holdfast/readiness"
)

// Issue 30, item 4 (e): readiness probed all along does not keep the
// instance of a pool with holdfast.WithServerlessV2 awake (it does not
// query a pool that sleeps); while the pool wakes its paused instance
// (outagetest.Serverless, Resume 3 s), readiness warns, reason "waking"
// (not fail), and passes once it answers.
func TestReadinessWaking(t *testing.T) {
	t.Parallel()
	const autoPause, resume = time.Second, 3 * time.Second
	s := outagetest.StartServerlessTest(t, outagetest.ServerlessConfig{AutoPause: autoPause, Resume: resume})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, err := holdfast.New(holdfast.WithServerlessV2(holdfast.ServerlessV2Config{AutoPause: autoPause}))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := s.PoolConfig(s.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	// The default CheckInterval (1 s), and probes every 100 ms (Check):
	// the checks must not keep the instance awake.
	pool, c := startChecker(ctx, t, f, cfg, readiness.Config{})
	if st := c.Check(ctx); st.Health != readiness.Pass {
		t.Fatalf("before the pause: %v", st)
	}
	probing := time.Now()
	until(t, 10*autoPause, c, func(st readiness.Status) bool {
		if st.Health != readiness.Pass {
			t.Fatalf("idle: %v", st)
		}
		return s.Pauses() == 1 && s.Paused()
	})
	t.Logf("MEASURED readiness probed every 20 ms (Check, CheckInterval 1 s): the instance paused %s after probing began, readiness pass throughout", time.Since(probing).Round(time.Millisecond))
	done := make(chan error, 1)
	began := time.Now()
	go func() { _, err := pool.Exec(ctx, "SELECT 1"); done <- err }()
	st := statusUntil(t, 5*time.Second, c, func(st readiness.Status) bool { return st.Reason != "" })
	if st.Health != readiness.Warn || st.Reason != "waking" {
		t.Errorf("waking: health %s, reason %q; want warn, waking", st.Health, st.Reason)
	}
	t.Logf("MEASURED readiness while the pool wakes its instance: %s, %s, %s after the first request", st.Health, st.Reason, time.Since(began).Round(time.Millisecond))
	if err := <-done; err != nil {
		t.Fatalf("the first request after the pause: %v", err)
	}
	st = statusUntil(t, 5*time.Second, c, func(st readiness.Status) bool { return st.Health == readiness.Pass })
	t.Logf("MEASURED readiness: pass %s after the first request began (Resume %s)", time.Since(began).Round(time.Millisecond), resume)
}

// statusUntil returns the first status of c (read every 20 ms, without a
// check) for which cond holds, failing t after d.
func statusUntil(t *testing.T, d time.Duration, c *readiness.Checker, cond func(readiness.Status) bool) readiness.Status {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		st := c.Status()
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %v; the last status: %s", d, st)
		}
		<-tick.C
	}
}
