package readiness_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/readiness"
)

func TestProbeHTTPConventions(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOpts{})
	f.start(t)
	tests := []struct {
		name     string
		method   string
		path     string
		header   []string
		code     int
		ctype    string
		body     string // exact, or a prefix when it ends in "..."
		allowHdr string
	}{
		{name: "ready plain", method: "GET", path: "/readyz", code: 200, ctype: "text/plain; charset=utf-8", body: "ok"},
		{name: "ready HEAD", method: "HEAD", path: "/readyz", code: 200, ctype: "text/plain; charset=utf-8", body: ""},
		{name: "ready verbose", method: "GET", path: "/readyz?verbose", code: 200, ctype: "application/health+json", body: `{"status":"pass"}`},
		{name: "ready verbose=1", method: "GET", path: "/readyz?verbose=1", code: 200, ctype: "application/health+json", body: `{"status":"pass"}`},
		{name: "ready health+json", method: "GET", path: "/readyz", header: []string{"Accept", "text/html;q=0.9, application/health+json"}, code: 200, ctype: "application/health+json", body: `{"status":"pass"}`},
		{name: "ready json", method: "GET", path: "/readyz", header: []string{"Accept", "application/json"}, code: 200, ctype: "application/health+json", body: `{"status":"pass"}`},
		{name: "admin", method: "GET", path: "/admin", code: 200, ctype: "application/health+json", body: `{"status":"pass","checks":...`},
		{name: "admin POST", method: "POST", path: "/admin", code: 405, ctype: "text/plain; charset=utf-8", body: "method not allowed", allowHdr: "GET, HEAD"},
		{name: "kube-probe accepts anything", method: "GET", path: "/readyz", header: []string{"Accept", "*/*", "User-Agent", "kube-probe/1.30"}, code: 200, ctype: "text/plain; charset=utf-8", body: "ok"},
		{name: "ready POST", method: "POST", path: "/readyz", code: 405, ctype: "text/plain; charset=utf-8", body: "method not allowed", allowHdr: "GET, HEAD"},
		{name: "live POST", method: "POST", path: "/livez", code: 405, ctype: "text/plain; charset=utf-8", body: "method not allowed", allowHdr: "GET, HEAD"},
		{name: "drain PUT", method: "PUT", path: "/drain", code: 405, ctype: "application/json", body: `{"error":"readiness: method not allowed"}`, allowHdr: "GET, HEAD, POST, DELETE"},
		{name: "drain without owner", method: "POST", path: "/drain", code: 400, ctype: "application/json", body: `{"error":"readiness: invalid owner: missing: set the X-Drain-Owner header or the owner query parameter"}`},
		{name: "drain owners differ", method: "POST", path: "/drain?owner=a", header: []string{"X-Drain-Owner", "b"}, code: 400, ctype: "application/json", body: `{"error":"readiness: invalid owner: the X-Drain-Owner header and the owner parameter differ"}`},
		{name: "drain bad timeout", method: "POST", path: "/drain?owner=a&timeout=soon", code: 400, ctype: "application/json", body: `{"error":"readiness: invalid timeout \"soon\": want a positive Go duration such as 30s"}`},
		{name: "drain negative timeout", method: "POST", path: "/drain?owner=a&timeout=-1s", code: 400, ctype: "application/json", body: `{"error":"readiness: invalid timeout \"-1s\": want a positive Go duration such as 30s"}`},
		{name: "drain status", method: "GET", path: "/drain", code: 200, ctype: "application/json", body: `{"componentType":"system","status":"pass","state":"Enabled",...`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.do(t, tt.method, tt.path, tt.header...)
			if r.code != tt.code {
				t.Errorf("status = %d, want %d (%s)", r.code, tt.code, r.body)
			}
			if got := r.header.Get("Content-Type"); got != tt.ctype {
				t.Errorf("Content-Type = %q, want %q", got, tt.ctype)
			}
			if got := r.header.Get("Cache-Control"); got != "no-store" {
				t.Errorf("Cache-Control = %q, want no-store", got)
			}
			if got := r.header.Get("Allow"); got != tt.allowHdr {
				t.Errorf("Allow = %q, want %q", got, tt.allowHdr)
			}
			if prefix, ok := strings.CutSuffix(tt.body, "..."); ok {
				if !strings.HasPrefix(r.body, prefix) {
					t.Errorf("body = %q, want prefix %q", r.body, prefix)
				}
			} else if r.body != tt.body {
				t.Errorf("body = %q, want %q", r.body, tt.body)
			}
		})
	}
	if f.c.Status().Drain.State != readiness.Enabled {
		t.Errorf("refused drain requests changed the state to %v", f.c.Status().Drain.State)
	}
}

// The drain endpoint drains through HTTP, and its own request is not counted
// even when the middleware wraps it.
func TestDrainEndpoint(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	entered := make(chan struct{}, 10)
	f := newFixture(t, fixtureOpts{
		cfg: readiness.Config{DrainInterval: 10 * time.Millisecond},
		wrap: func(c *readiness.Checker, mux *http.ServeMux) http.Handler {
			mux.HandleFunc("/work", func(w http.ResponseWriter, r *http.Request) {
				entered <- struct{}{}
				<-release
				w.Write([]byte("done"))
			})
			mux.HandleFunc("/quick", func(w http.ResponseWriter, r *http.Request) {})
			return c.Middleware(mux) // everything, /drain and /readyz included, behind the middleware
		},
	})
	t.Cleanup(unblock) // before the server's Close, which waits for the handler
	f.start(t)

	// A request in flight holds the drain.
	work := make(chan response, 1)
	go func() { work <- f.do(t, "GET", "/work") }()
	<-entered
	if got := f.c.Status().Drain.InFlight; got != 1 {
		t.Fatalf("InFlight = %d with one request in its handler, want 1", got)
	}
	p := newPoller(t, f.c)
	drained := make(chan response, 1)
	go func() { drained <- f.do(t, "POST", "/drain?timeout=1m", "X-Drain-Owner", "ci-job-7") }()
	if u := p.next(t); u.InFlight != 1 {
		t.Fatalf("drain poll found %v, want exactly the /work request in flight (not the drain request)", u)
	}
	if r := f.do(t, "GET", "/drain"); !strings.Contains(r.body, `"state":"Disabling","owner":"ci-job-7"`) || !strings.Contains(r.body, `"inFlight":1`) {
		t.Errorf("GET /drain while draining = %s", r.body)
	}
	if r := f.do(t, "GET", "/quick"); r.code != 200 { // served: refusal is off by default
		t.Errorf("a request during the drain got %d, want 200", r.code)
	}
	unblock()
	p.release()
	if r := <-work; r.code != 200 || r.body != "done" {
		t.Errorf("the in-flight request ended %d %q, want 200", r.code, r.body)
	}
	r := <-drained
	var res struct{ Result, Owner, State, Elapsed string }
	if err := json.Unmarshal([]byte(r.body), &res); err != nil || r.code != 200 || res.Result != "drained" || res.Owner != "ci-job-7" || res.State != "Disabled" {
		t.Fatalf("POST /drain = %d %s, want 200 drained by ci-job-7", r.code, r.body)
	}
	if f.c.Status().Drain.InFlight != 0 {
		t.Errorf("InFlight = %d after every request ended", f.c.Status().Drain.InFlight)
	}

	// A drain that times out answers 503 with what was in use.
	end := f.c.Begin()
	r = f.do(t, "POST", "/drain?owner=ci-job-7&timeout=50ms")
	end()
	var te struct {
		Error string
		State string
		InUse struct{ AcquiredConns, InFlight int64 }
	}
	if err := json.Unmarshal([]byte(r.body), &te); err != nil || r.code != 503 || te.State != "Disabling" || te.InUse.InFlight != 1 ||
		!strings.Contains(te.Error, "still in use: 1 in-flight request") {
		t.Errorf("timed-out POST /drain = %d %s, want 503 naming the in-flight request", r.code, r.body)
	}
}

// With RefuseWhileDraining, new requests are refused during a drain, but the
// probes and the drain endpoint behind the same middleware are not.
func TestRefuseWhileDraining(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	served := 0
	f := newFixture(t, fixtureOpts{
		cfg: readiness.Config{RefuseWhileDraining: true, DrainInterval: 10 * time.Millisecond},
		wrap: func(c *readiness.Checker, mux *http.ServeMux) http.Handler {
			mux.HandleFunc("/work", func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				served++
				mu.Unlock()
			})
			return c.Middleware(mux)
		},
	})
	f.start(t)
	if r := f.do(t, "GET", "/work"); r.code != 200 {
		t.Fatalf("/work while Enabled = %d", r.code)
	}
	if _, err := f.c.Drain(context.Background(), "alice"); err != nil {
		t.Fatal(err)
	}
	r := f.do(t, "GET", "/work")
	if r.code != 503 || r.header.Get("Retry-After") != "1" || !strings.HasPrefix(r.body, "readiness: draining") {
		t.Errorf("/work while Disabled = %d %q %v, want 503 with Retry-After", r.code, r.body, r.header)
	}
	if r := f.do(t, "GET", "/livez"); r.code != 200 || r.body != "ok" {
		t.Errorf("/livez behind the middleware while draining = %d %q, want 200 ok", r.code, r.body)
	}
	if r := f.do(t, "GET", "/readyz"); r.code != 503 || !strings.HasPrefix(r.body, "not ready: draining") {
		t.Errorf("/readyz behind the middleware while draining = %d %q", r.code, r.body)
	}
	if r := f.do(t, "DELETE", "/drain?owner=alice"); r.code != 200 {
		t.Errorf("DELETE /drain behind the middleware = %d %s", r.code, r.body)
	}
	if r := f.do(t, "GET", "/work"); r.code != 200 {
		t.Errorf("/work after Enable = %d", r.code)
	}
	mu.Lock()
	defer mu.Unlock()
	if served != 2 {
		t.Errorf("the handler ran %d times, want 2 (the refused request must not reach it)", served)
	}
	if f.c.Status().Drain.InFlight != 0 {
		t.Errorf("InFlight = %d after every request ended", f.c.Status().Drain.InFlight)
	}
}

func TestBeginIsIdempotent(t *testing.T) {
	t.Parallel()
	c, err := readiness.New(readiness.Config{}, readiness.Pool(lazyPool(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	end1, end2 := c.Begin(), c.Begin()
	if c.Status().Drain.InFlight != 2 {
		t.Fatalf("InFlight = %d, want 2", c.Status().Drain.InFlight)
	}
	end1()
	end1()
	if c.Status().Drain.InFlight != 1 {
		t.Fatalf("InFlight = %d after ending one twice, want 1", c.Status().Drain.InFlight)
	}
	end2()
	if c.Status().Drain.InFlight != 0 {
		t.Fatalf("InFlight = %d, want 0", c.Status().Drain.InFlight)
	}
}
