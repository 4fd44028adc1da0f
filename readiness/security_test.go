package readiness_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/fakes"
	fake "github.com/holdfast-db/holdfast/fakes/bluegreentest"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/readiness"
)

// secretText is what a failing password function says: an AWS role ARN
// and a provider's token, as the review reproduced them (issue 34, item 2).
const secretText = "sts: AssumeRole arn:aws:iam::123456789012:role/holdfast-prod denied: " +
	"web identity token ghp_R3v13wS3cr3tT0k3n expired"

// remoteServer serves h on a real HTTP server that its clients reach from
// an address that is not loopback: a listener on a non-loopback address
// of this machine, or, where it has none, a loopback server whose handler
// sees the request come from 198.51.100.7 (as an httptest request with
// RemoteAddr set would). It returns the server's URL.
func remoteServer(t *testing.T, h http.Handler) string {
	t.Helper()
	if ip := nonLoopbackIP(); ip != "" {
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err == nil {
			srv := httptest.NewUnstartedServer(h)
			srv.Listener.Close()
			srv.Listener = ln
			srv.Start()
			t.Cleanup(srv.Close)
			return srv.URL
		}
	}
	t.Log("no non-loopback address to listen on: requests are served as from 198.51.100.7")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.RemoteAddr = "198.51.100.7:40000"
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// nonLoopbackIP returns an IPv4 address of an interface of this machine
// that is up and not loopback, or "".
func nonLoopbackIP() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	return ""
}

// call sends a request with header pairs to url and returns the answer.
func call(t *testing.T, client *http.Client, method, url string, header ...string) response {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	if client == nil {
		client = noKeepAlive
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{code: resp.StatusCode, body: strings.TrimSpace(string(b)), header: resp.Header}
}

// waitFor waits for cond after each close of changed(), bounded by ctx.
func waitFor(ctx context.Context, t *testing.T, what string, changed func() <-chan struct{}, cond func() bool) {
	t.Helper()
	for {
		ch := changed()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// mux mounts every handler of c, as an operator who put them all on one
// port would.
func allHandlers(c *readiness.Checker) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/readyz", c.ReadyHandler())
	mux.Handle("/livez", c.LiveHandler())
	mux.Handle("/drain", c.DrainHandler())
	mux.Handle("/admin", c.AdminHandler())
	return mux
}

// Issue 34, item 2: a probe is told the status and the reason, nothing
// else, in every form, while the details (targets, the blue/green mapping
// with its host names and addresses, the writer) are the admin handler's,
// and a failover monitor's error text, here a password function's with
// an ARN and a token, is served by neither: the admin body has its
// classified cause. Two targets on a simulated Aurora blue/green
// deployment: "main" with blue/green and failover routing, healthy;
// "billing" (optional), whose password function fails.
//
// Before the change, /readyz?verbose and the JSON Accept types served the
// mapping, the writer and the failover monitor's error with the ARN and
// the token, and a POST /drain from another host drained (200): this test
// failed on each.
func TestProbeTellsStatusAndReasonOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a blue/green deployment of real servers: skipped with -short")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env, err := fake.Start(ctx, fake.Config{BlueHost: "127.0.0.18", GreenHost: "127.0.0.28"})
	if errors.Is(err, fake.ErrNotFound) && os.Getenv(pgtest.EnvRequire) != "1" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Close(); err != nil {
			t.Error(err)
		}
	})
	d, err := env.NewDeployment(ctx, fake.DeploymentConfig{Engine: fake.Aurora, Name: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	const user = "app_orders"
	if err := d.CreateRole(ctx, user); err != nil {
		t.Fatal(err)
	}
	if err := d.SetStatus(ctx, fake.StatusAvailable); err != nil {
		t.Fatal(err)
	}

	fMain, err := holdfast.New(holdfast.WithBlueGreen(bluegreen.Config{BaselineInterval: 20 * time.Millisecond}),
		holdfast.WithFailover(failover.Config{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fMain.Close)
	cfg, err := d.RolePoolConfig(d.Names.Cluster, user, "pool_max_conns=2")
	if err != nil {
		t.Fatal(err)
	}
	main, err := fMain.NewPool(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(main.Close)

	fBilling, err := holdfast.New(holdfast.WithFailover(failover.Config{}),
		holdfast.WithRetryPolicy(fastPolicy(1)), holdfast.WithStartupPolicy(fastPolicy(1)),
		holdfast.WithPasswordFunc(func(context.Context, string) (string, error) { return "", errors.New(secretText) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fBilling.Close)
	bcfg, err := d.RolePoolConfig(d.Names.Cluster, user, "pool_max_conns=2")
	if err != nil {
		t.Fatal(err)
	}
	if err := fBilling.Configure(bcfg); err != nil {
		t.Fatal(err)
	}
	billing, err := pgxpool.NewWithConfig(ctx, bcfg) // connects on first use: it never can
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(billing.Close)

	c, err := readiness.New(readiness.Config{Factory: fMain, DrainInterval: time.Millisecond},
		readiness.Target{Pool: main, Name: "main"},
		readiness.Target{Pool: billing, Name: "billing", Factory: fBilling, Optional: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.Start(ctx); err != nil { // billing fails, optional: not returned
		t.Fatal(err)
	}

	// The details exist: the mapping, the writer, and the billing
	// monitor's error with the password function's text.
	bg := fMain.BlueGreen(main)
	waitFor(ctx, t, "the blue/green mapping", bg.Changed, func() bool {
		s := bg.Status()
		return len(s.Mapping) > 0 && s.Mapping[0].BlueAddr != "" && s.Mapping[0].GreenAddr != ""
	})
	mon := fMain.Failover(main)
	waitFor(ctx, t, "the writer", mon.Changed, func() bool { return mon.Status().Writer != "" })
	writer := mon.Status().Writer
	bmon := fBilling.Failover(billing)

	public := remoteServer(t, allHandlers(c))
	local := httptest.NewServer(allHandlers(c))
	t.Cleanup(local.Close)

	port := strconv.Itoa(env.Blue.Port)
	forbidden := []string{user, d.Database, "amazonaws", env.Blue.Host, env.Green.Host, writer,
		"arn:", "123456789012", "AssumeRole", "ghp_", "mapping"}
	for _, m := range bg.Status().Mapping {
		forbidden = append(forbidden, m.Blue, m.Green, m.BlueAddr, m.GreenAddr)
	}
	check := func(what, body string, also ...string) {
		t.Helper()
		for _, f := range append(also, forbidden...) {
			if f != "" && strings.Contains(body, f) {
				t.Errorf("%s serves %q: %s", what, f, body)
			}
		}
		if strings.Contains(body, ":"+port) || strings.Contains(body, port+"/") {
			t.Errorf("%s serves the port %s: %s", what, port, body)
		}
	}

	// The public forms, each asked while the billing monitor's error holds
	// the password function's text (and still does after the answer: the
	// monitor's status did not change in between).
	type form struct {
		name, method, path string
		header             []string
		code               int
		body               string
	}
	forms := []form{
		{"plain", "GET", "/readyz", nil, 200, "ok (warn): startup-failed"},
		{"HEAD", "HEAD", "/readyz", nil, 200, ""},
		{"?verbose", "GET", "/readyz?verbose", nil, 200, `{"status":"warn","reason":"startup-failed"}`},
		{"application/health+json", "GET", "/readyz", []string{"Accept", "application/health+json"}, 200, `{"status":"warn","reason":"startup-failed"}`},
		{"application/json", "GET", "/readyz", []string{"Accept", "application/json"}, 200, `{"status":"warn","reason":"startup-failed"}`},
		{"livez", "GET", "/livez?verbose", nil, 200, `{"status":"pass"}`},
		{"GET /drain", "GET", "/drain", nil, 403, `{"error":"readiness: forbidden"}`},
		{"POST /drain", "POST", "/drain?owner=x", []string{"X-Drain-Owner", "x"}, 403, `{"error":"readiness: forbidden"}`},
		{"DELETE /drain", "DELETE", "/drain?owner=x", nil, 403, `{"error":"readiness: forbidden"}`},
		{"admin", "GET", "/admin", nil, 403, `{"error":"readiness: forbidden"}`},
	}
	for _, f := range forms {
		for attempt := 0; ; attempt++ {
			ch := bmon.Changed()
			if !strings.Contains(bmon.Status().Error, "arn:aws") {
				select {
				case <-ch:
					continue
				case <-ctx.Done():
					t.Fatalf("the billing monitor's error never held the password function's text: %q", bmon.Status().Error)
				}
			}
			r := call(t, nil, f.method, public+f.path, f.header...)
			select {
			case <-ch: // the monitor's status changed meanwhile: ask again
				if attempt < 100 {
					continue
				}
			default:
			}
			if r.code != f.code || r.body != f.body {
				t.Errorf("%s from another host = %d %q, want %d %q", f.name, r.code, r.body, f.code, f.body)
			}
			check(f.name+" from another host", r.body, "billing", "main") // not even the targets' names
			break
		}
	}
	if s := c.Status(); s.Drain.State != readiness.Enabled {
		t.Errorf("after the refused drains: state %v, want Enabled", s.Drain.State)
	}

	// The admin form, from this host: the details, the monitor's error by
	// its classified cause only.
	ch := bmon.Changed()
	for !strings.Contains(bmon.Status().Error, "arn:aws") {
		select {
		case <-ch:
			ch = bmon.Changed()
		case <-ctx.Done():
			t.Fatal("the billing monitor's error never held the password function's text")
		}
	}
	r := call(t, nil, "GET", local.URL+"/admin")
	for _, want := range []string{`"componentId":"main"`, `"componentId":"billing"`, `"writer":"` + writer + `"`,
		`"blue":"` + d.Names.Cluster + `"`, `"blue_addr":"` + env.Blue.Host + `"`, `"green_addr":"` + env.Green.Host + `"`,
		`"reason":"fatal/unknown"`} {
		if !strings.Contains(r.body, want) {
			t.Errorf("admin body lacks %s: %s", want, r.body)
		}
	}
	for _, secret := range []string{"arn:", "123456789012", "AssumeRole", "ghp_", `"error"`} {
		if strings.Contains(r.body, secret) {
			t.Errorf("admin body serves %q: %s", secret, r.body)
		}
	}

	// A drain that times out, from this host: what is in use, by target
	// name, and nothing of the databases.
	conn, err := main.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	r = call(t, nil, "POST", local.URL+"/drain?timeout=20ms", "X-Drain-Owner", "deploy-7")
	if r.code != 503 || !strings.Contains(r.body, "main: 1") {
		t.Errorf("a drain with a connection held = %d %s, want 503 naming main", r.code, r.body)
	}
	check("the drain-timeout error", r.body) // it names the targets, by the names the operator gave
	r = call(t, nil, "GET", public+"/readyz")
	if r.code != 503 || r.body != "not ready: draining" {
		t.Errorf("draining, from another host = %d %q, want 503 \"not ready: draining\" (no owner)", r.code, r.body)
	}
	r = call(t, nil, "DELETE", local.URL+"/drain", "X-Drain-Owner", "deploy-7")
	if r.code != 200 {
		t.Errorf("DELETE /drain from this host = %d %s", r.code, r.body)
	}
	check("DELETE /drain", r.body)
}

// tokens is an Authorize of bearer tokens: each names its holder.
func tokens(holders map[string]string) func(*http.Request) (string, error) {
	return func(r *http.Request) (string, error) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if tok == "panic" {
			panic("authorizer bug")
		}
		if owner, known := holders[tok]; ok && known {
			return owner, nil
		}
		return "", errors.New("no valid admin token")
	}
}

// Issue 34, item 3: a drain needs authority. A caller from another host,
// without Config.Authorize, is refused (403) whatever it asks, readiness
// stays 200 and the drain state Enabled; the admin body too. Real HTTP
// server on a non-loopback address of this machine.
//
// Before the change, the POST drained (200) and readiness answered 503:
// this test failed.
func TestDrainRefusesRemoteCallers(t *testing.T) {
	t.Parallel()
	logs := &fakes.LogBuffer{}
	f := newFixture(t, fixtureOpts{cfg: readiness.Config{Logger: slog.New(slog.NewTextHandler(logs, nil)), DrainInterval: time.Millisecond}})
	f.start(t)
	public := remoteServer(t, f.mux)
	start := time.Now()
	for _, req := range []struct{ method, path string }{
		{"POST", "/drain?owner=mallory"},
		{"POST", "/drain?owner=mallory&timeout=1s"},
		{"DELETE", "/drain?owner=mallory"},
		{"GET", "/drain"},
		{"PUT", "/drain"},
		{"GET", "/admin"},
	} {
		r := call(t, nil, req.method, public+req.path, "X-Drain-Owner", "mallory")
		if r.code != http.StatusForbidden || r.body != `{"error":"readiness: forbidden"}` {
			t.Errorf("%s %s from another host = %d %s, want 403 forbidden", req.method, req.path, r.code, r.body)
		}
	}
	elapsed := time.Since(start)
	if r := call(t, nil, "GET", public+"/readyz"); r.code != 200 || r.body != "ok" {
		t.Errorf("readiness after the refused drains = %d %q, want 200 ok", r.code, r.body)
	}
	if s := f.c.Status(); s.Drain.State != readiness.Enabled || s.Drain.Owner != "" {
		t.Errorf("drain state after the refused drains = %v %q, want Enabled", s.Drain.State, s.Drain.Owner)
	}
	// At most one log line a second for the burst, naming why.
	if n := strings.Count(logs.String(), "readiness: admin request refused"); n < 1 || n > 1+int(elapsed/time.Second) ||
		!strings.Contains(logs.String(), `why="not a local request, and Config.Authorize is not set"`) {
		t.Errorf("%d refusal lines for 6 refusals in %v, want one a second naming why:\n%s", n, elapsed, logs)
	}
}

// With Config.Authorize, the owner of a drain is the one Authorize names,
// not the one the caller claims: alice drains (claiming to be mallory),
// bob and the unauthenticated may not enable, whatever owner they name,
// and only alice can. Authorize decides every request, local ones too; an
// invalid owner or a panic refuses. Real HTTP server on a non-loopback
// address.
//
// Before the change (no Config.Authorize: the test did not compile), the
// owner was the query's: "DELETE /drain?owner=alice" from anyone enabled
// the service (200).
func TestDrainOwnerIsTheAuthorizers(t *testing.T) {
	t.Parallel()
	logs := &fakes.LogBuffer{}
	f := newFixture(t, fixtureOpts{cfg: readiness.Config{
		Logger:        slog.New(slog.NewTextHandler(logs, nil)),
		DrainInterval: time.Millisecond,
		Authorize:     tokens(map[string]string{"alice-token": "alice", "bob-token": "bob", "empty-token": ""}),
	}})
	f.start(t)
	public := remoteServer(t, f.mux)
	ready := func(want int) {
		t.Helper()
		if r := call(t, nil, "GET", public+"/readyz"); r.code != want {
			t.Errorf("readiness = %d %q, want %d", r.code, r.body, want)
		}
	}

	for _, tt := range []struct{ name, token string }{{"no token", ""}, {"a wrong token", "mallory"}, {"an empty owner", "empty-token"}, {"a panic", "panic"}} {
		r := call(t, nil, "POST", public+"/drain?owner=alice", "Authorization", "Bearer "+tt.token)
		if r.code != http.StatusForbidden || r.body != `{"error":"readiness: forbidden"}` {
			t.Errorf("POST /drain with %s = %d %s, want 403", tt.name, r.code, r.body)
		}
	}
	ready(200)

	r := call(t, nil, "POST", public+"/drain?owner=mallory", "Authorization", "Bearer alice-token", "X-Drain-Owner", "mallory")
	if r.code != 200 || !strings.Contains(r.body, `"owner":"alice"`) {
		t.Fatalf("POST /drain by alice claiming mallory = %d %s, want 200 drained by alice", r.code, r.body)
	}
	if got := f.c.Status().Drain.Owner; got != "alice" {
		t.Errorf("drain owner = %q, want alice (Authorize's), not the one claimed", got)
	}
	ready(503)

	r = call(t, nil, "DELETE", public+"/drain?owner=alice", "Authorization", "Bearer bob-token", "X-Drain-Owner", "alice")
	if r.code != http.StatusConflict || !strings.Contains(r.body, `"holder":"alice"`) {
		t.Errorf("DELETE /drain by bob claiming alice = %d %s, want 409 held by alice", r.code, r.body)
	}
	r = call(t, nil, "DELETE", public+"/drain?owner=alice", "X-Drain-Owner", "alice")
	if r.code != http.StatusForbidden {
		t.Errorf("DELETE /drain?owner=alice without a token = %d %s, want 403", r.code, r.body)
	}
	// Authorize decides for local callers too: the loopback server.
	if r := f.do(t, "DELETE", "/drain?owner=alice", "X-Drain-Owner", "alice"); r.code != http.StatusForbidden {
		t.Errorf("DELETE /drain from this host without a token = %d %s, want 403", r.code, r.body)
	}
	ready(503)
	if s := f.c.Status(); s.Drain.State != readiness.Disabled || s.Drain.Owner != "alice" {
		t.Errorf("after the refused enables: %v held by %q, want Disabled held by alice", s.Drain.State, s.Drain.Owner)
	}

	r = call(t, nil, "DELETE", public+"/drain", "Authorization", "Bearer alice-token")
	if r.code != 200 || !strings.Contains(r.body, `"state":"Enabled"`) {
		t.Errorf("DELETE /drain by alice = %d %s, want 200 Enabled", r.code, r.body)
	}
	ready(200)
	if r := call(t, nil, "GET", public+"/admin", "Authorization", "Bearer bob-token"); r.code != 200 || !strings.Contains(r.body, `"componentId":"database"`) {
		t.Errorf("admin body for bob = %d %s, want 200 with the details", r.code, r.body)
	}
	if !strings.Contains(logs.String(), `error="no valid admin token"`) || !strings.Contains(logs.String(), "owner=alice") {
		t.Errorf("the log lacks the refusal's error or the drain by alice:\n%s", logs)
	}
	if strings.Contains(logs.String(), "authorizer bug") {
		t.Errorf("the log holds the value of Authorize's panic (its type only):\n%s", logs)
	}
}

// Without Config.Authorize, local callers drain as documented: over
// loopback, naming a loopback host, with no proxy header, or over a Unix
// socket; a proxied request (X-Forwarded-For, Forwarded, Via, X-Real-Ip,
// X-Envoy-*), a foreign Host (DNS rebinding) or a cross-origin browser
// request is refused. Real HTTP servers on 127.0.0.1 and a Unix socket.
//
// Before the change, each refused request here drained (200): this test
// failed.
func TestDrainLocalDefault(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOpts{cfg: readiness.Config{DrainInterval: time.Millisecond}})
	f.start(t)
	for _, tt := range []struct {
		name   string
		header []string
	}{
		{"X-Forwarded-For", []string{"X-Forwarded-For", "203.0.113.9"}},
		{"Forwarded", []string{"Forwarded", "for=203.0.113.9"}},
		{"Via", []string{"Via", "1.1 sidecar"}},
		{"X-Real-Ip", []string{"X-Real-Ip", "203.0.113.9"}},
		{"X-Envoy-External-Address", []string{"X-Envoy-External-Address", "203.0.113.9"}},
		{"X-Forwarded-Proto", []string{"X-Forwarded-Proto", "https"}},
		{"a foreign Host", []string{"Host", "attacker.example"}},
		{"a foreign Host with the port", []string{"Host", "attacker.example:" + strings.Split(f.srv.Listener.Addr().String(), ":")[1]}},
		{"Sec-Fetch-Site: cross-site", []string{"Sec-Fetch-Site", "cross-site"}},
		{"an Origin of another site", []string{"Origin", "http://attacker.example"}},
	} {
		r := call(t, f.srv.Client(), "POST", f.srv.URL+"/drain", append([]string{"X-Drain-Owner", "x"}, tt.header...)...)
		if r.code != http.StatusForbidden {
			t.Errorf("POST /drain from this host with %s = %d %s, want 403", tt.name, r.code, r.body)
		}
		if tt.name == "Sec-Fetch-Site: cross-site" || tt.name == "an Origin of another site" {
			continue // a browser's cross-origin GET is harmless, and answered
		}
		if r := call(t, f.srv.Client(), "GET", f.srv.URL+"/admin", tt.header...); r.code != http.StatusForbidden {
			t.Errorf("GET /admin from this host with %s = %d, want 403", tt.name, r.code)
		}
	}
	if s := f.c.Status(); s.Drain.State != readiness.Enabled {
		t.Fatalf("after the refused drains: %v, want Enabled", s.Drain.State)
	}

	// The documented use: curl on the host, or through kubectl port-forward.
	for _, host := range []string{"", "localhost:8081", "127.0.0.1", "[::1]:8081", "admin.localhost"} {
		var hdr []string
		if host != "" {
			hdr = []string{"Host", host}
		}
		if r := call(t, f.srv.Client(), "GET", f.srv.URL+"/drain", hdr...); r.code != 200 {
			t.Errorf("GET /drain with Host %q = %d %s, want 200", host, r.code, r.body)
		}
	}
	r := call(t, f.srv.Client(), "POST", f.srv.URL+"/drain?timeout=10s", "X-Drain-Owner", "deploy-1", "Host", "localhost:8081")
	if r.code != 200 || !strings.Contains(r.body, `"owner":"deploy-1"`) {
		t.Fatalf("POST /drain from this host = %d %s, want 200 drained by deploy-1", r.code, r.body)
	}
	if r := call(t, f.srv.Client(), "DELETE", f.srv.URL+"/drain?owner=deploy-1"); r.code != 200 {
		t.Errorf("DELETE /drain from this host = %d %s, want 200", r.code, r.body)
	}

	// A Unix socket is local whatever the Host.
	sock := filepath.Join(t.TempDir(), "admin.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: f.mux, ReadHeaderTimeout: time.Minute}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		srv.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Error(err)
		}
	}()
	unix := &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
	r = call(t, unix, "POST", "http://service/drain?timeout=10s", "X-Drain-Owner", "deploy-2")
	if r.code != 200 || !strings.Contains(r.body, `"owner":"deploy-2"`) {
		t.Errorf("POST /drain over a Unix socket = %d %s, want 200", r.code, r.body)
	}
	if r := call(t, unix, "DELETE", "http://service/drain", "X-Drain-Owner", "deploy-2"); r.code != 200 {
		t.Errorf("DELETE /drain over a Unix socket = %d %s, want 200", r.code, r.body)
	}
}

// Issue 34, item 7 (readiness): the log lines of a failed startup and of a
// failed check pass through the redactor. A password function mints a
// token per connection, which pushes the DSN's password out of the
// factory's redactor (it keeps the last 16 secrets), then fails with an
// error that echoes that password: neither readiness line shows it.
//
// Before the change, both lines carried the password: this test failed.
func TestCheckerLogsRedacted(t *testing.T) {
	t.Parallel()
	const password = "s3cr3t-dsn-pass"
	ctx := context.Background()
	var minted atomic.Int64
	var failing atomic.Bool
	f, err := holdfast.New(holdfast.WithRetryPolicy(fastPolicy(1)), holdfast.WithStartupPolicy(fastPolicy(1)),
		holdfast.WithPasswordFunc(func(context.Context, string) (string, error) {
			if failing.Load() {
				return "", errors.New(secretText + "; the fallback password " + password + " was refused")
			}
			return fmt.Sprintf("token-%04d-minted", minted.Add(1)), nil // the server trusts any password
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(t) + "&password=" + password)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	for range 20 { // 20 connections, 20 tokens
		conn, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := conn.Hijack().Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	failing.Store(true)

	logs := &fakes.LogBuffer{}
	c, err := readiness.New(readiness.Config{Factory: f, Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))},
		readiness.Pool(pool))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.Start(ctx); err == nil {
		t.Fatal("Start succeeded with a failing password function")
	}
	if s := c.Check(ctx); s.Database.ConsecutiveFailures != 1 {
		t.Fatalf("after a check: %+v, want one failed check", s.Database)
	}
	for _, line := range []string{"readiness: startup: first connection failed", "readiness: database check failed"} {
		found := false
		for l := range strings.SplitSeq(logs.String(), "\n") {
			if !strings.Contains(l, line) {
				continue
			}
			found = true
			if strings.Contains(l, password) || !strings.Contains(l, "the fallback password [redacted] was refused") {
				t.Errorf("%q line, want the password redacted:\n%s", line, l)
			}
		}
		if !found {
			t.Errorf("no %q line:\n%s", line, logs)
		}
	}
}

// Serve serves ServeConfig.Admin beside the service's server: the drain
// and the details there, the probe on the service's port, and the admin
// server is shut down with the rest.
func TestServeAdmin(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOpts{cfg: readiness.Config{DrainInterval: time.Millisecond}})
	mux := http.NewServeMux()
	mux.Handle("/readyz", f.c.ReadyHandler())
	admin := http.NewServeMux()
	admin.Handle("/readyz", f.c.AdminHandler())
	admin.Handle("/drain", f.c.DrainHandler())
	aln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	adminURL := "http://" + aln.Addr().String()
	s := startServe(t, &fixture{c: f.c, mux: mux}, readiness.ServeConfig{
		Admin: &http.Server{Handler: admin, ReadHeaderTimeout: time.Minute}, AdminListener: aln})
	s.waitReady(t)
	if code, body := s.get(t, "/drain"); code != 404 {
		t.Errorf("/drain on the service's port = %d %q, want 404: not mounted there", code, body)
	}
	if r := call(t, nil, "GET", adminURL+"/readyz"); r.code != 200 || !strings.Contains(r.body, `"postgres:responseTime"`) {
		t.Errorf("admin /readyz = %d %s, want the details", r.code, r.body)
	}
	if r := call(t, nil, "POST", adminURL+"/drain", "X-Drain-Owner", "ops"); r.code != 200 {
		t.Errorf("admin POST /drain = %d %s, want 200", r.code, r.body)
	}
	if code, body := s.get(t, "/readyz"); code != 503 || body != "not ready: draining" {
		t.Errorf("/readyz after the drain = %d %q", code, body)
	}
	s.cancel()
	if err := s.result(t); err != nil {
		t.Fatalf("Serve = %v, want nil", err)
	}
	if _, err := noKeepAlive.Get(adminURL + "/drain"); err == nil {
		t.Error("the admin server still answers after Serve returned")
	}
}
