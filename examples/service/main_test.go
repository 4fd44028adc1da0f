package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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

// health is the part of the admin listener's /readyz the tests read.
type health struct {
	Status string `json:"status"`
	Checks struct {
		Database []struct {
			ComponentID string `json:"componentId"`
			Status      string `json:"status"`
			Optional    bool   `json:"optional"`
		} `json:"postgres:responseTime"`
		Conns []struct {
			ComponentID string `json:"componentId"`
			Acquired    int    `json:"acquired"`
		} `json:"postgres:connections"`
	} `json:"checks"`
}

// healthOf reads the admin listener's /readyz, the details.
func healthOf(t *testing.T, admin string) health {
	t.Helper()
	r := get(admin + "/readyz")
	var h health
	if r.err != nil || json.Unmarshal([]byte(r.body), &h) != nil {
		t.Fatalf("admin /readyz = %d %q %v", r.code, r.body, r.err)
	}
	return h
}

// acquired returns the connections acquired from each pool, by check name.
func (h health) acquired() map[string]int {
	m := map[string]int{}
	for _, c := range h.Checks.Conns {
		m[c.ComponentID] = c.Acquired
	}
	return m
}

// reportsDB creates a database of its own for the service's reports on the
// test server and returns its connection string.
func reportsDB(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE service_reports"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE service_reports WITH (FORCE)"); err != nil {
			t.Error(err)
		}
	})
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("postgres://%s@%s/service_reports?sslmode=disable", cfg.User, net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))))
}

// A rolling deploy loses no request: every request started before SIGTERM,
// on the pgxpool (/work) and on the *sql.DB (/report), completes with 200,
// the drain waits for the connections of both databases, readiness
// answers 503 during the drain while requests are still served, and the
// process exits 0. The service is the real example, run as a subprocess,
// against a real PostgreSQL with a database for each.
func TestSIGTERMLosesNoRequest(t *testing.T) {
	if testing.Short() {
		t.Skip("sends the service SIGTERM under load and waits out its drain: skipped with -short")
	}
	const n = 6 // half on each pool, below its 4 connections
	dsn := pgtest.DSN(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"=1", "DATABASE_URL="+dsn, "REPORTS_DATABASE_URL="+reportsDB(t),
		"ADDR=127.0.0.1:0", "ADMIN_ADDR=127.0.0.1:0", "SHUTDOWN_DELAY=1s", "DRAIN_TIMEOUT=30s")
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

	var base, admin string
	for _, l := range []struct {
		prefix string
		url    *string
	}{{"listening on ", &base}, {"admin on ", &admin}} {
		select {
		case line, ok := <-lines:
			addr, found := strings.CutPrefix(line, l.prefix)
			if !ok || !found {
				t.Fatalf("stdout line = %q, want %q and the URL", line, l.prefix)
			}
			*l.url = addr
		case <-time.After(30 * time.Second):
			t.Fatal("the service did not start listening within 30s")
		}
	}
	until(t, "/readyz to answer 200", func() bool { return get(base+"/readyz").code == 200 })

	// n slow requests, half holding an orders (pgxpool) connection and half
	// a reports (database/sql) one, all in flight before SIGTERM.
	type answer struct {
		result
		want string
	}
	results := make(chan answer, n)
	for i := range n {
		path, want := "/work?ms=1500", "worked 1.5s"
		if i%2 == 1 {
			path, want = "/report?ms=1500", "reported 1.5s"
		}
		go func() { results <- answer{get(base + path), want} }()
	}
	until(t, fmt.Sprintf("%d connections acquired from each pool", n/2), func() bool {
		a := healthOf(t, admin).acquired()
		return a["orders"] >= n/2 && a["reports"] >= n/2
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The drain's polls see the connections of both databases.
	until(t, "a drain poll to find both databases' connections", func() bool {
		var d struct {
			InUse *struct{ ByTarget map[string]int } `json:"inUse"`
		}
		r := get(admin + "/drain")
		return r.err == nil && json.Unmarshal([]byte(r.body), &d) == nil && d.InUse != nil &&
			d.InUse.ByTarget["orders"] >= n/2 && d.InUse.ByTarget["reports"] >= n/2
	})

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
	if r := get(base + "/report?ms=1"); r.err != nil || r.code != 200 {
		t.Errorf("a reports request during the drain = %d %q %v, want 200", r.code, r.body, r.err)
	}

	for range n {
		r := <-results
		if r.err != nil || r.code != 200 || r.body != r.want {
			t.Errorf("a request started before SIGTERM ended with %d %q %v, want 200 %q", r.code, r.body, r.err, r.want)
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
	for _, want := range []string{"database: DATABASE_URL", "readiness: drain started", "readiness: drain complete",
		"readiness: shut down: server stopped, pools and databases closed",
		"holdfast.readiness.check=reports holdfast.pool=reports", "db.namespace=service_reports"} {
		if !strings.Contains(logs, want) {
			t.Errorf("service log lacks %q", want)
		}
	}
	// http.Server.Shutdown alone would also wait for the requests; the
	// drain must have seen them: its first poll found work in flight.
	m := regexp.MustCompile(`msg="readiness: drain complete[^"]*" owner=shutdown elapsed_s=\S+ polls=(\d+)`).FindStringSubmatch(logs)
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
	if testing.Short() {
		t.Skip("runs the service against a throwaway server through a database stop: skipped with -short")
	}
	if _, err := pgtest.BinDir(); err != nil {
		pgtest.DSN(t) // skips, or fails under HOLDFAST_REQUIRE_PG=1, with the harness's message
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	env := map[string]string{"ADDR": "127.0.0.1:0", "ADMIN_ADDR": "127.0.0.1:0", "SHUTDOWN_DELAY": "0"}
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
	if !sc.Scan() {
		t.Fatalf("run ended before the admin listener: %v", <-done)
	}
	admin, ok := strings.CutPrefix(sc.Text(), "admin on ")
	if !ok {
		t.Fatalf("stdout = %q", sc.Text())
	}
	go io.Copy(io.Discard, pr)
	until(t, "/readyz to answer 200", func() bool { return get(base+"/readyz").code == 200 })
	if r := get(base + "/work?ms=1"); r.code != 200 || r.body != "worked 1ms" {
		t.Errorf("/work = %d %q", r.code, r.body)
	}
	if r := get(base + "/report?ms=1"); r.code != 200 || r.body != "reported 1ms" {
		t.Errorf("/report = %d %q", r.code, r.body)
	}
	// One check per database, named after its pool; reports is optional.
	h := healthOf(t, admin)
	checks := map[string]bool{}
	for _, c := range h.Checks.Database {
		if c.Status != "pass" {
			t.Errorf("check %s = %s, want pass", c.ComponentID, c.Status)
		}
		checks[c.ComponentID] = c.Optional
	}
	if optional, ok := checks["reports"]; len(checks) != 2 || !ok || !optional || checks["orders"] {
		t.Errorf("checks (name: optional) = %v, want orders and an optional reports", checks)
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
	for _, want := range []string{`msg="database: DATABASE_URL is not set, started a throwaway PostgreSQL" addr=127.0.0.1:`,
		`msg="readiness: startup: first connection made" holdfast.readiness.check=reports holdfast.pool=reports server.address=127.0.0.1`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("service log lacks %q:\n%s", want, logs)
		}
	}
	if !strings.Contains(logs.String(), "db.namespace=reports") {
		t.Errorf("no log line names the reports database:\n%s", logs)
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

// serve runs the example in-process with env (ADDR and ADMIN_ADDR on
// 127.0.0.1:0) and returns its service and admin URLs; the test's cleanup
// stops it and checks that it shut down cleanly.
func serve(t *testing.T, env map[string]string) (base, admin string) {
	t.Helper()
	env["ADDR"], env["ADMIN_ADDR"], env["SHUTDOWN_DELAY"] = "127.0.0.1:0", "127.0.0.1:0", "0" // nothing routes to it
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	logs := &fakes.LogBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, func(k string) string { return env[k] }, pw, logs)
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run = %v, want nil", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("run did not return within 30s")
		}
		if t.Failed() {
			t.Logf("service log:\n%s", logs)
		}
	})
	sc := bufio.NewScanner(pr)
	for _, l := range []struct {
		prefix string
		url    *string
	}{{"listening on ", &base}, {"admin on ", &admin}} {
		if !sc.Scan() {
			t.Fatalf("run ended before listening")
		}
		u, ok := strings.CutPrefix(sc.Text(), l.prefix)
		if !ok {
			t.Fatalf("stdout line = %q, want %q and the URL", sc.Text(), l.prefix)
		}
		*l.url = u
	}
	go io.Copy(io.Discard, pr)
	until(t, "/readyz to answer ok (both databases started)", func() bool { return get(base+"/readyz").body == "ok" })
	return base, admin
}

// do sends a request with header pairs.
func do(t *testing.T, method, url string, header ...string) result {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		return result{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return result{code: resp.StatusCode, body: strings.TrimSpace(string(b)), err: err}
}

// The service's port tells a probe the status and nothing more and has no
// drain; the admin listener has the details and the drain, for callers on
// this host (issue 34, items 2 and 3). Before the change the drain was on
// the service's port and /readyz?verbose served the details: this test
// failed.
func TestAdminListener(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the service against a throwaway server: skipped with -short")
	}
	base, admin := serve(t, map[string]string{"DATABASE_URL": pgtest.DSN(t), "REPORTS_DATABASE_URL": reportsDB(t)})
	for _, path := range []string{"/readyz", "/readyz?verbose"} {
		r := get(base + path)
		if want := map[string]string{"/readyz": "ok", "/readyz?verbose": `{"status":"pass"}`}[path]; r.code != 200 || r.body != want {
			t.Errorf("%s on the service's port = %d %q, want 200 %q", path, r.code, r.body, want)
		}
	}
	if r := do(t, "POST", base+"/drain", "X-Drain-Owner", "mallory"); r.code != 404 {
		t.Errorf("POST /drain on the service's port = %d %q, want 404: no drain there", r.code, r.body)
	}
	if h := healthOf(t, admin); h.Status != "pass" || len(h.Checks.Database) != 2 {
		t.Errorf("admin /readyz = %+v, want pass with both databases' checks", h)
	}
	if r := do(t, "POST", admin+"/drain", "X-Drain-Owner", "me"); r.code != 200 || !strings.Contains(r.body, `"owner":"me"`) {
		t.Errorf("POST /drain on the admin listener = %d %q, want 200 drained by me", r.code, r.body)
	}
	if r := get(base + "/readyz"); r.code != 503 || r.body != "not ready: draining" {
		t.Errorf("/readyz while drained = %d %q", r.code, r.body)
	}
	if r := do(t, "DELETE", admin+"/drain", "X-Drain-Owner", "me"); r.code != 200 {
		t.Errorf("DELETE /drain on the admin listener = %d %q", r.code, r.body)
	}
}

// With ADMIN_TOKEN, the admin listener answers the token's holders only,
// local callers included, and the owner is theirs: "ops/" and the job.
func TestAdminToken(t *testing.T) {
	_, admin := serve(t, map[string]string{"DATABASE_URL": pgtest.DSN(t), "REPORTS_DATABASE_URL": reportsDB(t), "ADMIN_TOKEN": "t0ken"})
	if r := do(t, "POST", admin+"/drain", "X-Drain-Owner", "deploy-1"); r.code != 403 {
		t.Errorf("POST /drain without the token = %d %q, want 403", r.code, r.body)
	}
	if r := get(admin + "/readyz"); r.code != 403 {
		t.Errorf("admin /readyz without the token = %d %q, want 403", r.code, r.body)
	}
	auth := []string{"Authorization", "Bearer t0ken", "X-Drain-Owner", "deploy-1"}
	if r := do(t, "POST", admin+"/drain", auth...); r.code != 200 || !strings.Contains(r.body, `"owner":"ops/deploy-1"`) {
		t.Errorf("POST /drain with the token = %d %q, want 200 drained by ops/deploy-1", r.code, r.body)
	}
	if r := do(t, "DELETE", admin+"/drain", auth...); r.code != 200 {
		t.Errorf("DELETE /drain with the token = %d %q, want 200", r.code, r.body)
	}
}
