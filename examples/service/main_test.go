package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/fakes"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
)

// envChild makes the test binary run the service instead of the tests: the
// SIGTERM test runs it as a subprocess.
const envChild = "HOLDFAST_SERVICE_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(envChild) == "1" {
		if err := run(context.Background(), os.Getenv, os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, "service:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	pgtest.Main(m)
}

// client keeps no idle connection, so nothing is left behind.
var client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Minute}

type result struct {
	code int
	body string
	err  error
}

func get(url string) result {
	resp, err := client.Get(url)
	if err != nil {
		return result{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return result{code: resp.StatusCode, body: strings.TrimSpace(string(b)), err: err}
}

// until polls cond every few milliseconds until it holds, or fails the test
// after 30s. Polling an endpoint is how a client observes a subprocess.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A rolling deploy loses no request: every request started before SIGTERM
// completes with 200, readiness answers 503 during the drain while requests
// are still served, and the process exits 0. The service is the real
// example, run as a subprocess, against a real PostgreSQL.
func TestSIGTERMLosesNoRequest(t *testing.T) {
	const n = 8
	dsn := pgtest.DSN(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"=1", "DATABASE_URL="+dsn, "ADDR=127.0.0.1:0", "SHUTDOWN_DELAY=1s", "DRAIN_TIMEOUT=30s")
	stderr := &fakes.LogBuffer{}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	defer func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("service stderr:\n%s", stderr)
		}
	}()
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait() // after stdout is read to the end, as Wait requires
	}()

	var base string
	select {
	case line, ok := <-lines:
		addr, found := strings.CutPrefix(line, "listening on ")
		if !ok || !found {
			t.Fatalf("first stdout line = %q, want \"listening on http://...\"", line)
		}
		base = addr
	case <-time.After(30 * time.Second):
		t.Fatal("the service did not start listening within 30s")
	}
	until(t, "/readyz to answer 200", func() bool { return get(base+"/readyz").code == 200 })

	// n slow requests, all in flight before SIGTERM.
	results := make(chan result, n)
	for range n {
		go func() { results <- get(base + "/work?ms=300") }()
	}
	until(t, fmt.Sprintf("%d requests in flight", n), func() bool {
		var d struct{ InFlight int64 }
		r := get(base + "/drain")
		return r.err == nil && json.Unmarshal([]byte(r.body), &d) == nil && d.InFlight == n
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}

	// Readiness flips to 503 "draining" while the service still serves.
	until(t, "/readyz to answer 503 draining", func() bool {
		r := get(base + "/readyz")
		if r.err != nil {
			t.Fatalf("/readyz after SIGTERM: %v (the service stopped listening before readiness failed)", r.err)
		}
		return r.code == 503 && strings.HasPrefix(r.body, "not ready: draining")
	})
	if r := get(base + "/work?ms=1"); r.err != nil || r.code != 200 {
		t.Errorf("a request during the drain = %d %q %v, want 200", r.code, r.body, r.err)
	}

	for range n {
		r := <-results
		if r.err != nil || r.code != 200 || r.body != "worked 300ms" {
			t.Errorf("a request started before SIGTERM ended with %d %q %v, want 200", r.code, r.body, r.err)
		}
	}
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Fatalf("the service exited with %v, want status 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the service did not exit within 30s of SIGTERM")
	}
	logs := stderr.String()
	for _, want := range []string{"database: DATABASE_URL", "readiness: drain started", "readiness: drain complete", "readiness: shut down: server stopped, pool closed"} {
		if !strings.Contains(logs, want) {
			t.Errorf("service log lacks %q", want)
		}
	}
	// http.Server.Shutdown alone would also wait for the requests; the
	// drain must have seen them: its first poll found work in flight.
	m := regexp.MustCompile(`msg="readiness: drain complete[^"]*" owner=shutdown elapsed=\S+ polls=(\d+)`).FindStringSubmatch(logs)
	if m == nil {
		t.Fatalf("no drain-complete log line with its polls")
	}
	if polls, _ := strconv.Atoi(m[1]); polls < 2 {
		t.Errorf("the shutdown drain completed at poll %d; with %d requests in flight it must have waited", polls, n)
	}
}

// With no DATABASE_URL the example starts its own throwaway PostgreSQL, so
// that it runs with no setup.
func TestRunWithoutDatabaseURL(t *testing.T) {
	if _, err := pgtest.BinDir(); err != nil {
		pgtest.DSN(t) // skips, or fails under HOLDFAST_REQUIRE_PG=1, with the harness's message
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	env := map[string]string{"ADDR": "127.0.0.1:0"}
	logs := &fakes.LogBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, func(k string) string { return env[k] }, pw, logs)
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	if !sc.Scan() {
		t.Fatalf("run ended before listening: %v", <-done)
	}
	base, ok := strings.CutPrefix(sc.Text(), "listening on ")
	if !ok {
		t.Fatalf("stdout = %q", sc.Text())
	}
	go io.Copy(io.Discard, pr)
	until(t, "/readyz to answer 200", func() bool { return get(base+"/readyz").code == 200 })
	if r := get(base + "/work?ms=1"); r.code != 200 || r.body != "worked 1ms" {
		t.Errorf("/work = %d %q", r.code, r.body)
	}
	if r := get(base + "/work?ms=nope"); r.code != 400 {
		t.Errorf("/work?ms=nope = %d, want 400", r.code)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run = %v, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return")
	}
	if want := `msg="database: DATABASE_URL is not set, started a throwaway PostgreSQL" addr=127.0.0.1:`; !strings.Contains(logs.String(), want) {
		t.Errorf("service log lacks %q:\n%s", want, logs)
	}
}

func TestRunRejectsBadEnvironment(t *testing.T) {
	for _, tt := range []struct{ name, key, value, want string }{
		{"bad drain timeout", "DRAIN_TIMEOUT", "soon", `DRAIN_TIMEOUT: want a non-negative Go duration such as 20s, got "soon"`},
		{"negative delay", "SHUTDOWN_DELAY", "-1s", `SHUTDOWN_DELAY: want a non-negative Go duration such as 20s, got "-1s"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{tt.key: tt.value}
			err := run(context.Background(), func(k string) string { return env[k] }, io.Discard, io.Discard)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("run = %v, want %q", err, tt.want)
			}
		})
	}
}
