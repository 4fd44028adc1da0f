package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/lb/a10/a10test"
	"github.com/holdfast-db/holdfast/lb/f5/f5test"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitOutput waits until re matches the output, or fails after d.
func waitOutput(t *testing.T, out *syncBuffer, re *regexp.Regexp, d time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s in the output within %s:\n%s", re, d, out)
		}
		<-tick.C
	}
}

// serve runs the console until its context ends, with metrics.
func TestServe(t *testing.T) {
	t.Parallel()
	c := newCLI(t, "cli-serve", f5test.Options{}, nil)
	c.members(f5test.Member{Conns: 4}, a10test.Port{Conns: 2})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"-operator", "alice", "serve", "-listen", "127.0.0.1:0", "-poll", "100ms"}, func(k string) string { return c.env[k] }, &stdout, &stderr)
	}()
	m := waitOutput(t, &stderr, regexp.MustCompile(`console on (http://127\.0\.0\.1:\d+/) \(every request is operator alice\)`), 30*time.Second)
	base := m[1]

	getText := func(path string, accept string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, base+strings.TrimPrefix(path, "/"), nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := getText("/", "application/json")
	if code != 200 || !strings.Contains(body, `"operator": "alice"`) || !strings.Contains(body, `"name": "`+c.group+`"`) {
		t.Errorf("GET / = %d\n%s", code, body)
	}
	req, _ := http.NewRequest(http.MethodPost, base+"groups/"+c.group+"/disable", nil)
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("disable = %d", resp.StatusCode)
	}
	// A drain, waited for, with one transient F5 error on the way.
	c.fakeF5.Inject(f5test.Fault{Kind: f5test.Busy, Path: "/stats"})
	req, _ = http.NewRequest(http.MethodPost, base+"groups/"+c.group+"/drain", strings.NewReader(`{"wait": true}`))
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Content-Type", "application/json")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("drain = %d", resp.StatusCode)
	}
	code, body = getText("/metrics", "")
	for _, want := range []string{
		`holdfast_lb_members{group="` + c.group + `",phase="enabled"}`,
		`holdfast_lb_requests_total{action="disable",group="` + c.group + `",result="ok"} 1`,
		`holdfast_lb_lock_wait_seconds_count{group="` + c.group + `",result="acquired"} 2`,
		`holdfast_lb_drain_duration_seconds_count{group="` + c.group + `",result="drained"} 1`,
		`holdfast_lb_api_errors_total{kind="busy",op="`,
		`holdfast_lb_requests_total{action="drain",group="` + c.group + `",result="ok"} 1`,
		`go_goroutines`,
	} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, body)
		}
	}
	for _, secret := range []string{f5test.DefaultPassword, a10test.DefaultPassword} {
		if strings.Contains(body, secret) || strings.Contains(stderr.String(), secret) {
			t.Errorf("a password shows in the metrics or the log")
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("serve exit %d\n%s", code, stderr.String())
		}
	case <-time.After(45 * time.Second):
		t.Fatal("serve did not stop")
	}
	if n := c.fakeF5.ActiveTokens() + c.fakeA10.ActiveSessions(); n != 0 {
		t.Errorf("%d device sessions left open after serve", n)
	}
}
