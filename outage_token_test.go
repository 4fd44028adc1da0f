package holdfast_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
)

// tokenSource is a password function whose token API can be down: each
// call while it is counts.
type tokenSource struct {
	down  atomic.Bool
	calls atomic.Int64 // calls while down
}

var errToken503 = errors.New("token API: 503 Service Unavailable")

func (s *tokenSource) token(ctx context.Context, host string) (string, error) {
	if s.down.Load() {
		s.calls.Add(1)
		return "", errToken503
	}
	return "unused-by-trust-auth", nil
}

// token503 classifies the token API's 503 as Transient, "token-fetch-503",
// as the cloudsql and alloydb integrations' rules classify their
// connectors' token errors.
func token503(err error) (classify.Verdict, bool) {
	if errors.Is(err, errToken503) {
		return classify.Verdict{Class: classify.Transient, Reason: classify.ReasonPrefixTokenFetch + "503"}, true
	}
	return classify.Verdict{}, false
}

// dial is a dial function whose connector fetches a token first (as
// cloudsqlconn's and alloydbconn's do), failing while the token API is down.
func (s *tokenSource) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if s.down.Load() {
		s.calls.Add(1)
		return nil, fmt.Errorf("connector: refresh: %w", errToken503)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

type tokenRun struct {
	calls, failed, requests int
	window                  time.Duration
	firstErr                error
	logs                    *syncBuffer
}

// runTokenOutage: a pool of 4 on a PostgreSQL that stays up, its token
// API down. A request on the pool's open connection is served; then the
// pool loses its connections (Reset) and 8 requests, 10 s deadlines,
// need new ones. The token API comes back once it was called (while
// down) at least minCalls times, or every request ended.
func runTokenOutage(t *testing.T, dsn string, atDial bool, minCalls int64, opts ...holdfast.Option) tokenRun {
	t.Helper()
	src := &tokenSource{}
	logs := &syncBuffer{}
	opts = append([]holdfast.Option{
		holdfast.WithLogger(slog.New(slog.NewJSONHandler(logs, nil))),
		holdfast.WithClassifier(token503),
	}, opts...)
	if !atDial {
		opts = append(opts, holdfast.WithPasswordFunc(src.token))
	}
	f, err := holdfast.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, _ := poolConfig(t, dsn, "sslmode=disable")
	cfg.MaxConns = 4
	if atDial {
		cfg.ConnConfig.DialFunc = src.dial
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := f.NewPool(ctx, cfg, holdfast.PoolName("orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}

	src.down.Store(true)
	octx, ocancel := context.WithTimeout(ctx, 2*time.Second)
	_, err = p.Exec(octx, "SELECT 1")
	ocancel()
	if err != nil {
		t.Fatalf("a request on the pool's open connection, the token API down: %v", err)
	}
	if n := src.calls.Load(); n != 0 {
		t.Fatalf("a request on the pool's open connection called the token API %d times", n)
	}

	p.Reset()
	start := time.Now()
	const n = 8
	var wg sync.WaitGroup
	var failed, ended atomic.Int64
	var firstMu sync.Mutex
	var firstErr error
	for range n {
		wg.Go(func() {
			rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
			defer rcancel()
			if _, err := p.Exec(rctx, "SELECT 1"); err != nil {
				failed.Add(1)
				firstMu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				firstMu.Unlock()
			}
			ended.Add(1)
		})
	}
	waitFor(t, 15*time.Second, "the token API called while down, or every request ended", func() <-chan struct{} { return nil },
		func() bool { return src.calls.Load() >= minCalls || ended.Load() == n })
	calls, window := src.calls.Load(), time.Since(start)
	src.down.Store(false)
	wg.Wait()
	return tokenRun{calls: int(calls), failed: int(failed.Load()), requests: n, window: window, firstErr: firstErr, logs: logs}
}

// TestOutageTokenSource: the token API down while the database is up (the
// Cloud SQL IAM 503 of ../shared/seeds), as the password function's
// failure and as a connector's dial failing to fetch its token: the
// pool's open connection still serves; the requests that need a new
// connection wait for the token API instead of failing, and no connect
// fetches on its own meanwhile: the prober's one call a step, at most
// (the smallest step is 80 ms), and at most the first fetches of the
// pool's 4 connects in flight before the sign; "token source down" is
// logged once with what to check, then "token source back", and no
// "database down" line. The control (the outage
// hold off) fails requests and calls the token API for each retry of each
// connect.
func TestOutageTokenSource(t *testing.T) {
	s := pgtest.NewServer(t)
	for _, atDial := range []bool{false, true} {
		name := "password function"
		if atDial {
			name = "connector's dial"
		}
		t.Run(name, func(t *testing.T) {
			hf := runTokenOutage(t, s.DSN(), atDial, 20)
			// One call per step (80 ms at the least), one at the sign, the
			// first fetches of the 4 connects that pgxpool starts at once.
			bound := 4 + 1 + int(hf.window/(80*time.Millisecond)) + 1
			t.Logf("holdfast: %d of %d requests failed; %d token calls in %v while down (bound %d)", hf.failed, hf.requests, hf.calls, hf.window.Round(time.Millisecond), bound)
			if hf.failed != 0 {
				t.Errorf("holdfast: %d of %d requests failed, want 0 (first: %v)", hf.failed, hf.requests, hf.firstErr)
			}
			if hf.calls > bound {
				t.Errorf("holdfast: %d token calls in %v while the token API was down, want at most %d (one per check)", hf.calls, hf.window, bound)
			}
			down, back := hf.logs.lines("holdfast: token source down"), hf.logs.lines("holdfast: token source back")
			if len(down) != 1 || len(back) != 1 || len(hf.logs.lines("holdfast: database down")) != 0 {
				t.Fatalf("want one \"token source down\", one \"token source back\" and no \"database down\", got %d and %d:\n%s", len(down), len(back), hf.logs.String())
			}
			for _, want := range []string{"token API: 503", "the pool's open connections still serve", "Check the token source"} {
				if !strings.Contains(down[0], want) {
					t.Errorf("the \"token source down\" line lacks %q: %s", want, down[0])
				}
			}

			// The control: the same without the hold.
			ctl := runTokenOutage(t, s.DSN(), atDial, 1000, holdfast.WithOutage(holdfast.Outage{Off: true}))
			t.Logf("control (no hold): %d of %d requests failed; %d token calls in %v (first: %v)", ctl.failed, ctl.requests, ctl.calls, ctl.window.Round(time.Millisecond), ctl.firstErr)
			if ctl.failed == 0 {
				t.Errorf("control: no request failed: the token API's outage does not bite")
			}
		})
	}
}
