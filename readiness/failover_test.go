package readiness_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/fakes/failovertest"
	"github.com/holdfast-db/holdfast/readiness"
)

type failoverCheck struct {
	Status    string `json:"status"`
	Writer    string `json:"writer"`
	Routing   string `json:"routing"`
	Failovers int    `json:"failovers"`
}

// readyBody asks the ready handler for its JSON and returns the overall
// status and the failover check (ok false when absent).
func readyBody(t *testing.T, c *readiness.Checker) (string, failoverCheck, bool) {
	t.Helper()
	status, fc, ok, err := readyJSON(c)
	if err != nil {
		t.Fatal(err)
	}
	return status, fc, ok
}

func readyJSON(c *readiness.Checker) (string, failoverCheck, bool, error) {
	body, err := readyHealthJSON(c)
	if err != nil {
		return "", failoverCheck{}, false, err
	}
	raw, ok := body.Checks["failover"]
	if !ok {
		return body.Status, failoverCheck{}, false, nil
	}
	var fc failoverCheck
	err = json.Unmarshal(raw[0], &fc)
	return body.Status, fc, true, err
}

// With holdfast.WithFailover, readiness shows the failover check, and
// through a writer crash it answers warn, never fail: the checks that fail
// or wait while the cluster has no writer are the failover's, which
// holdfast routes through.
func TestReadinessThroughFailover(t *testing.T) {
	c := failovertest.StartTest(t, failovertest.Config{TTL: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f, err := holdfast.New(holdfast.WithFailover(failover.Config{}))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := c.PoolConfig(c.ClusterEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := f.NewPool(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	rc, err := readiness.New(readiness.Config{Factory: f, CheckInterval: 50 * time.Millisecond}, readiness.Pool(pool))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if err := rc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for f.Failover(pool).Status().Writer == "" {
		select {
		case <-ctx.Done():
			t.Fatal("the monitor never read the topology")
		case <-time.After(10 * time.Millisecond):
		}
	}
	status, fc, ok := readyBody(t, rc)
	if !ok || status != "pass" || fc.Status != "pass" || fc.Writer != c.Writer() || fc.Routing != "normal" {
		t.Fatalf("before: status %q, failover check %+v (present %v); want pass, writer %s, routing normal", status, fc, ok, c.Writer())
	}

	// Readiness asked every 50 ms through the failover.
	seen := map[readiness.Health]int{}
	reasons := map[string]int{}
	checks := map[string]int{}
	var mu sync.Mutex
	pctx, pcancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for pctx.Err() == nil {
			st := rc.Check(pctx)
			_, fc, _, err := readyJSON(rc)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			seen[st.Health]++
			reasons[st.Reason]++
			checks[fc.Status+"/"+fc.Routing]++
			mu.Unlock()
			select {
			case <-pctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
	_, err = c.Failover(ctx, failovertest.Scenario{Kind: failovertest.Crash, Detect: 500 * time.Millisecond, DNSLag: 2 * time.Second})
	pcancel()
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("health %v, reasons %v, failover checks %v", seen, reasons, checks)
	if seen[readiness.Fail] > 0 {
		t.Errorf("readiness failed %d times during a failover holdfast routes", seen[readiness.Fail])
	}
	if checks["warn/redirect"]+checks["warn/held"] == 0 {
		t.Errorf("the failover check never warned (held or redirect): %v", checks)
	}
	for f.Failover(pool).Status().Routing != "normal" {
		select {
		case <-ctx.Done():
			t.Fatal("routing never returned to normal")
		case <-time.After(10 * time.Millisecond):
		}
	}
	if _, fc, _ := readyBody(t, rc); fc.Status != "pass" || fc.Writer != c.Writer() || fc.Failovers != 1 {
		t.Errorf("after: failover check %+v; want pass, writer %s, 1 failover", fc, c.Writer())
	}
	if st := rc.Status(); st.Failover == nil || st.Failover.Writer != c.Writer() {
		t.Errorf("Status().Failover = %+v", st.Failover)
	}
}
