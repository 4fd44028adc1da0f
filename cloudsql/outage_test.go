package cloudsql_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast"
	fake "github.com/holdfast-db/holdfast/fakes/cloudsqltest"
	"github.com/holdfast-db/holdfast/internal/gcpconn/gcptest"
)

// TestAdminAPIOutageHeld: the Admin API answers 503 after the pool has
// connected (the connector's certificate refresh fails: the token source
// of the Cloud SQL IAM incident, through the real cloudsqlconn dialer). A
// connect's dial failing with admin-api-503 is the token source's sign, not
// the instance's: the pool's outage layer finds it down, one check at a
// time (each one connector cycle of the Admin API), and the requests that
// need a new connection wait instead of failing; when the Admin API is
// back they all succeed. The control (the hold off) fails them.
func TestAdminAPIOutageHeld(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the Cloud SQL connector's own Admin API retries (seconds): skipped with -short")
	}
	t.Parallel()
	run := func(t *testing.T, hold bool, minCalls int) (failed, calls int, logs string) {
		var opts []holdfast.Option
		if !hold {
			opts = append(opts, holdfast.WithOutage(holdfast.Outage{Off: true}))
		}
		e := newEnv(t, envOpts{holdfast: opts})
		ctx := gcptest.CtxFor(t, 2*time.Minute)
		if err := e.pool.Ping(ctx); err != nil {
			t.Fatal(err)
		}
		// The next dial's handshake is reset, which makes the connector
		// drop its cached certificate: every dial after it refreshes, and
		// the Admin API answers 503.
		e.fake.ResetHandshake(1)
		e.fake.Fail(fake.GenerateEphemeralCert, 503, -1)
		before := e.fake.Stats().GenerateEphemeralCert
		e.pool.Reset()
		const n = 4
		var wg sync.WaitGroup
		var nfailed, ended atomic.Int32
		for range n {
			wg.Go(func() {
				rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
				defer cancel()
				if _, err := e.pool.Exec(rctx, "SELECT 1"); err != nil {
					nfailed.Add(1)
					t.Logf("request: %v", err)
				}
				ended.Add(1)
			})
		}
		// The Admin API comes back after minCalls calls (or when every
		// request ended).
		timeout := time.NewTimer(90 * time.Second)
		defer timeout.Stop()
		tick := time.NewTicker(20 * time.Millisecond) // the fake's counter has no signal
		defer tick.Stop()
		for e.fake.Stats().GenerateEphemeralCert-before < minCalls && ended.Load() < n {
			select {
			case <-tick.C:
			case <-timeout.C:
				t.Fatalf("the Admin API was not called %d times, nor did every request end, within 90 s", minCalls)
			}
		}
		calls = e.fake.Stats().GenerateEphemeralCert - before
		e.fake.Clear()
		wg.Wait()
		return int(nfailed.Load()), calls, e.logs.String()
	}
	// Two of the connector's cycles of five calls: two of the prober's
	// checks.
	failed, calls, logs := run(t, true, 10)
	t.Logf("holdfast: %d of 4 requests failed; %d Admin API calls while it answered 503", failed, calls)
	if failed != 0 {
		t.Errorf("holdfast: %d of 4 requests failed while the Admin API answered 503, want 0:\n%s", failed, logs)
	}
	if !strings.Contains(logs, "token source down") || !strings.Contains(logs, "Check the token source") || !strings.Contains(logs, "token source back") || strings.Contains(logs, "database down") {
		t.Errorf("want \"token source down\" saying to check it, then \"token source back\", and no \"database down\":\n%s", logs)
	}
	// The control: the Admin API comes back only once every request ended
	// (a connect that met the 503 spent its attempts).
	cfailed, ccalls, _ := run(t, false, 1<<30)
	t.Logf("control (no hold): %d of 4 requests failed; %d Admin API calls", cfailed, ccalls)
	if cfailed == 0 {
		t.Errorf("control: no request failed: the Admin API's outage does not bite")
	}
}
