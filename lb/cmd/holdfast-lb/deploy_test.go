package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast/lb"
	"github.com/holdfast-db/holdfast/lb/a10/a10test"
	"github.com/holdfast-db/holdfast/lb/f5"
	"github.com/holdfast-db/holdfast/lb/f5/f5test"
	"github.com/holdfast-db/holdfast/lb/internal/amtest"
	"github.com/holdfast-db/holdfast/lb/internal/pgtest"
)

func TestMain(m *testing.M) {
	if os.Getenv("HOLDFAST_LB_TEST_HELPER") == "deploy" {
		os.Exit(deployHelper())
	}
	pgtest.Main(m)
}

// helperReport is what the deploy command (this test binary, run by
// holdfast-lb deploy) saw while it ran.
type helperReport struct {
	Env           map[string]string `json:"env"`
	Args          []string          `json:"args"`
	Web1Admin     string            `json:"web1_admin"`     // read from the fake F5 during the deploy
	SilenceState  string            `json:"silence_state"`  // read from Alertmanager during the deploy
	SilenceFailed string            `json:"silence_failed"` // why it could not be read
}

// deployHelper is the deploy command of the tests: it reports what it
// sees, and exits with $HELPER_EXIT.
func deployHelper() int {
	rep := helperReport{Env: map[string]string{}, Args: os.Args[1:]}
	for _, k := range []string{"HOLDFAST_LB_GROUP", "HOLDFAST_LB_OPERATOR", "HOLDFAST_LB_NODES", "HOLDFAST_LB_AUDIT_ID", "HOLDFAST_LB_SILENCE_ID"} {
		rep.Env[k] = os.Getenv(k)
	}
	ctx := context.Background()
	hc := &http.Client{Timeout: 10 * time.Second}
	if pem, err := os.ReadFile(os.Getenv("HELPER_F5_CA")); err == nil {
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(pem)
		hc.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}
	}
	if b, err := f5.New(f5.Config{Endpoint: os.Getenv("HELPER_F5_URL"), Username: f5test.DefaultUsername, Password: f5test.DefaultPassword, HTTPClient: hc}); err == nil && b.Login(ctx) == nil {
		if st, err := b.State(ctx, lb.Member{Pool: "web", Node: "web-1", Port: 80}); err == nil {
			rep.Web1Admin = st.Admin.String()
		}
		_ = b.Logout(ctx)
	}
	if id := os.Getenv("HOLDFAST_LB_SILENCE_ID"); id != "" {
		resp, err := http.Get(os.Getenv("HELPER_AM_URL") + "/api/v2/silence/" + id)
		if err == nil {
			var s struct {
				Status struct{ State string } `json:"status"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&s)
			resp.Body.Close()
			rep.SilenceState = s.Status.State
		} else {
			rep.SilenceFailed = err.Error()
		}
	}
	b, _ := json.Marshal(rep)
	if err := os.WriteFile(os.Getenv("HELPER_REPORT"), b, 0o600); err != nil {
		return 99
	}
	code, _ := strconv.Atoi(os.Getenv("HELPER_EXIT"))
	return code
}

// hookReceiver is the local HTTP receiver of the notifications: the
// three formats on three paths.
type hookReceiver struct {
	srv  *httptest.Server
	mu   sync.Mutex
	got  map[string][][]byte // by path
	kind []string            // the json format's kinds, in order
}

func newHookReceiver(t *testing.T) *hookReceiver {
	h := &hookReceiver{got: map[string][][]byte{}}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		defer h.mu.Unlock()
		h.got[r.URL.Path] = append(h.got[r.URL.Path], b)
		if r.URL.Path == "/json" {
			var e struct{ Kind string }
			_ = json.Unmarshal(b, &e)
			h.kind = append(h.kind, e.Kind)
		}
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookReceiver) kinds() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.kind...)
}

func (h *hookReceiver) bodies(path string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, b := range h.got[path] {
		out = append(out, string(b))
	}
	return out
}

type deployEnv struct {
	*cli
	am     *amtest.Server
	hooks  *hookReceiver
	report string
}

// newDeployEnv is a CLI configuration with notifications to a local
// receiver (Teams, Slack and JSON formats) and a real Alertmanager
// silencing the group's alerts (service=<group>).
func newDeployEnv(t *testing.T, name string, f5m f5test.Member) *deployEnv {
	t.Helper()
	am := amtest.Start(t)
	hooks := newHookReceiver(t)
	var group string
	c := newCLI(t, name, f5test.Options{}, func(cfg map[string]any) {
		for g := range cfg["groups"].(map[string]any) {
			group = g
		}
		cfg["notify"] = map[string]any{"webhooks": []any{
			map[string]any{"name": "teams", "format": "teams", "url_env": "TEAMS_URL"},
			map[string]any{"name": "slack", "format": "slack", "url_env": "SLACK_URL"},
			map[string]any{"name": "json", "format": "json", "url_env": "JSON_URL"},
		}}
		cfg["alertmanager"] = map[string]any{"url": am.URL, "max_duration": "30m", "matchers": map[string]any{
			group: []any{map[string]any{"name": "service", "value": group}},
		}}
	})
	c.members(f5m, a10test.Port{Conns: 2})
	e := &deployEnv{cli: c, am: am, hooks: hooks, report: filepath.Join(t.TempDir(), "report.json")}
	for k, v := range map[string]string{
		"TEAMS_URL": hooks.srv.URL + "/teams", "SLACK_URL": hooks.srv.URL + "/slack", "JSON_URL": hooks.srv.URL + "/json",
	} {
		c.env[k] = v
	}
	return e
}

// deploy runs holdfast-lb deploy with the helper (this test binary) as
// the command; the command inherits the test process's environment, so
// its settings go in as arguments of env(1).
func (e *deployEnv) deploy(t *testing.T, exit int, flags ...string) (int, string, string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"-operator", "alice", "deploy"}, flags...)
	args = append(args, e.group, "--", "env",
		"HOLDFAST_LB_TEST_HELPER=deploy", "HELPER_REPORT="+e.report, "HELPER_F5_URL="+e.fakeF5.URL(), "HELPER_F5_CA="+e.f5CA, "HELPER_AM_URL="+e.am.URL, "HELPER_EXIT="+strconv.Itoa(exit),
		self, "deploy-arg-1")
	return e.run(t, args...)
}

func (e *deployEnv) readReport(t *testing.T) *helperReport {
	t.Helper()
	b, err := os.ReadFile(e.report)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var r helperReport
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

// silences returns the group's silences in Alertmanager.
func (e *deployEnv) silences(t *testing.T) []amtest.Silence {
	t.Helper()
	var out []amtest.Silence
	for _, s := range e.am.Silences(t) {
		if len(s.Matchers) == 1 && s.Matchers[0].Name == "service" && s.Matchers[0].Value == e.group {
			out = append(out, s)
		}
	}
	return out
}

// The whole deploy: silence, drain to zero, the command (which sees the
// members forced offline and the silence active), enable, expire the
// silence, with the notifications sent to the receiver.
func TestDeploy(t *testing.T) {
	t.Parallel()
	e := newDeployEnv(t, "cli-deploy", f5test.Member{Conns: 8, Decay: []int64{3, 0}})
	code, out, errOut := e.deploy(t, 0)
	t.Logf("holdfast-lb deploy (exit %d):\n%s%s", code, errOut, out)
	if code != exitOK {
		t.Fatalf("deploy exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "ok: deploy "+e.group+": drained, deployed and enabled 3 members") {
		t.Errorf("stdout:\n%s", out)
	}
	for _, want := range []string{"lock taken by alice@", "alerts silenced: silence ", "for at most 30m0s", "drained: no connection left on 3 members", "running env (8 arguments)", "the command succeeded", "enabled: 3 members", " expired"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	rep := e.readReport(t)
	if rep == nil {
		t.Fatalf("the command did not run\n%s", errOut)
	}
	if rep.Web1Admin != "forced-offline" {
		t.Errorf("during the command web-1 was %q, want forced-offline", rep.Web1Admin)
	}
	if rep.SilenceState != "active" {
		t.Errorf("during the command the silence was %q (%s), want active", rep.SilenceState, rep.SilenceFailed)
	}
	if rep.Env["HOLDFAST_LB_GROUP"] != e.group || rep.Env["HOLDFAST_LB_OPERATOR"] != "alice" || rep.Env["HOLDFAST_LB_NODES"] != "web-1 web-2 app-1" || rep.Env["HOLDFAST_LB_AUDIT_ID"] == "" {
		t.Errorf("the command's environment = %v", rep.Env)
	}
	if len(rep.Args) != 1 || rep.Args[0] != "deploy-arg-1" {
		t.Errorf("the command's arguments = %v", rep.Args)
	}
	// One silence, expired.
	ss := e.silences(t)
	if len(ss) != 1 || ss[0].Status.State != "expired" || ss[0].CreatedBy != "alice" || ss[0].ID != rep.Env["HOLDFAST_LB_SILENCE_ID"] || !strings.Contains(ss[0].Comment, "holdfast-lb deploy of "+e.group) {
		t.Errorf("silences = %+v, want one, expired, the command's", ss)
	}
	// Enabled again.
	if st, _ := e.fakeF5.MemberState("web", "web-1:80"); st.Session != "user-enabled" {
		t.Errorf("web-1 = %+v after the deploy", st)
	}
	// The notifications, in every format.
	if got := e.hooks.kinds(); !slices.Equal(got, []string{"drain-started", "drained", "enabled"}) {
		t.Errorf("json notifications = %v", got)
	}
	if n, m := len(e.hooks.bodies("/teams")), len(e.hooks.bodies("/slack")); n != 3 || m != 3 {
		t.Errorf("teams got %d, slack %d notifications, want 3 each", n, m)
	}
	if b := e.hooks.bodies("/teams"); len(b) == 3 && (!strings.Contains(b[1], "AdaptiveCard") || !strings.Contains(b[1], e.group+": drained by alice")) {
		t.Errorf("teams card:\n%s", b[1])
	}
	// The audit: the drain and the enable, the lock released.
	entries := e.entries(t)
	if len(entries) != 2 || entries[1].Action != lb.ActionDrain || entries[0].Action != lb.ActionEnable || entries[0].Result != lb.ResultOK {
		t.Errorf("audit = %+v", entries)
	}
	if code, out, _ := e.run(t, "status", e.group); code != exitOK || !strings.Contains(out, "not locked") {
		t.Errorf("status after the deploy:\n%s", out)
	}
	for _, secret := range []string{e.hooks.srv.URL + "/teams", f5test.DefaultPassword} {
		if strings.Contains(out+errOut, secret) {
			t.Errorf("output shows a secret %q", secret)
		}
	}
}

// A drain that times out stops the deploy: exit 1, the command never
// runs, the silence is expired, and the receiver hears of the timeout
// with the member still holding connections.
func TestDeployRefusesTheCommandWhenTheDrainTimesOut(t *testing.T) {
	t.Parallel()
	e := newDeployEnv(t, "cli-deploy-timeout", f5test.Member{Conns: 8, Decay: []int64{3}})
	code, out, errOut := e.deploy(t, 0, "-timeout", "300ms")
	t.Logf("holdfast-lb deploy -timeout 300ms (exit %d):\n%s%s", code, errOut, out)
	if code != exitNotDrained {
		t.Fatalf("deploy exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitNotDrained, out, errOut)
	}
	if rep := e.readReport(t); rep != nil {
		t.Errorf("the command ran although the drain timed out: %+v", rep)
	}
	for _, want := range []string{"NOT DRAINED", "web/web-1:80 not drained: 3 current connections after 300ms", "the command was not run", "forced offline are left so", " expired"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if ss := e.silences(t); len(ss) != 1 || ss[0].Status.State != "expired" {
		t.Errorf("silences = %+v, want one, expired", ss)
	}
	if got := e.hooks.kinds(); !slices.Equal(got, []string{"drain-started", "timed-out"}) {
		t.Fatalf("notifications = %v", got)
	}
	js := e.hooks.bodies("/json")[1]
	var ev struct {
		Busy []lb.BusyMember `json:"busy"`
	}
	if err := json.Unmarshal([]byte(js), &ev); err != nil || len(ev.Busy) != 2 || ev.Busy[0].Member != "f5-prod web/web-1:80" || ev.Busy[0].Conns != 3 {
		t.Errorf("timed-out event = %s", js)
	}
	if sl := e.hooks.bodies("/slack")[1]; !strings.Contains(sl, "TIMED OUT") || !strings.Contains(sl, "f5-prod web/web-1:80: 3 connections") {
		t.Errorf("slack message:\n%s", sl)
	}
	if st, _ := e.fakeF5.MemberState("web", "web-1:80"); st.State != "user-down" {
		t.Errorf("web-1 = %+v, want left forced offline", st)
	}
}

// A command that fails: the group is enabled again, or, with
// -leave-offline-on-failure, left forced offline, and the deploy says so.
func TestDeployCommandFails(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		flags     []string
		wantState string
		kinds     []string
		note      string
	}{
		{"enabled again", nil, "user-enabled", []string{"drain-started", "drained", "enabled", "deploy-failed"}, "the members were enabled again"},
		{"left offline", []string{"-leave-offline-on-failure"}, "user-disabled", []string{"drain-started", "drained", "deploy-failed"}, "left forced offline: 3 members"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newDeployEnv(t, "cli-deploy-fail", f5test.Member{Conns: 8, Decay: []int64{0}})
			code, out, errOut := e.deploy(t, 3, tt.flags...)
			if code != exitCommand {
				t.Fatalf("deploy exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitCommand, out, errOut)
			}
			if !strings.Contains(errOut, "exit status 3") || !strings.Contains(errOut, tt.note) {
				t.Errorf("stderr lacks the failure and %q:\n%s", tt.note, errOut)
			}
			if st, _ := e.fakeF5.MemberState("web", "web-1:80"); st.Session != tt.wantState {
				t.Errorf("web-1 = %+v, want session %s", st, tt.wantState)
			}
			if got := e.hooks.kinds(); !slices.Equal(got, tt.kinds) {
				t.Errorf("notifications = %v, want %v", got, tt.kinds)
			}
			if b := e.hooks.bodies("/json"); len(b) > 0 && !strings.Contains(b[len(b)-1], tt.note) {
				t.Errorf("deploy-failed event lacks the note:\n%s", b[len(b)-1])
			}
			if ss := e.silences(t); len(ss) != 1 || ss[0].Status.State != "expired" {
				t.Errorf("silences = %+v", ss)
			}
		})
	}
}

// A group locked by someone else: refused, nothing silenced, nothing
// changed, the refusal notified.
func TestDeployLocked(t *testing.T) {
	t.Parallel()
	e := newDeployEnv(t, "cli-deploy-locked", f5test.Member{Conns: 8})
	lease := e.lock(t, "carol")
	defer lease.Release(context.Background())
	code, _, errOut := e.deploy(t, 0, "-lock-wait", "200ms")
	if code != exitRefused || !strings.Contains(errOut, "locked by carol@") || !strings.Contains(errOut, "waiting up to 200ms for the lock held by carol@") {
		t.Fatalf("deploy exit %d\n%s", code, errOut)
	}
	if ss := e.silences(t); len(ss) != 0 {
		t.Errorf("silences = %+v, want none", ss)
	}
	if got := e.hooks.kinds(); !slices.Equal(got, []string{"lock-refused"}) {
		t.Errorf("notifications = %v", got)
	}
	if rep := e.readReport(t); rep != nil || e.fakeF5.Count(http.MethodPatch, "") != 0 {
		t.Errorf("something ran or changed")
	}
}

func TestDeployUsage(t *testing.T) {
	t.Parallel()
	c := newCLI(t, "cli-deploy-usage", f5test.Options{}, nil)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-operator", "alice", "deploy", c.group}, "want GROUP -- COMMAND"},
		{[]string{"-operator", "alice", "deploy", c.group, "--"}, "no command after --"},
		{[]string{"-operator", "alice", "deploy", "-lock-wait", "-1s", c.group, "--", "true"}, "must not be negative"},
	} {
		if code, _, errOut := c.run(t, tt.args...); code != exitUsage || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d\n%s", tt.args, code, errOut)
		}
	}
}

// entries returns the group's audit trail, newest first.
func (c *cli) entries(t *testing.T) []lb.Entry {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, c.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	store, err := lb.NewPGStore(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	es, err := store.Entries(ctx, c.group, 0)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// lock takes the group's lock for owner, released when the test ends.
func (c *cli) lock(t *testing.T, owner string) lb.Lease {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, c.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store, err := lb.NewPGStore(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	lease, err := store.Lock(ctx, c.group, owner)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lease.Release(context.Background()) })
	return lease
}
