package a10_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/holdfast-db/holdfast/lb"
	"github.com/holdfast-db/holdfast/lb/a10"
	"github.com/holdfast-db/holdfast/lb/a10/a10test"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func setup(t *testing.T, opts a10test.Options, cfg a10.Config) (*a10test.Server, *a10.Client) {
	t.Helper()
	srv := a10test.New(opts)
	t.Cleanup(srv.Close)
	cfg.Endpoint = srv.URL()
	if cfg.Username == "" {
		cfg.Username = a10test.DefaultUsername
	}
	if cfg.Password == "" {
		cfg.Password = a10test.DefaultPassword
	}
	cfg.HTTPClient = srv.Client()
	c, err := a10.New(cfg)
	if err != nil {
		t.Fatalf("a10.New: %v", err)
	}
	return srv, c
}

func login(t *testing.T, c *a10.Client) context.Context {
	t.Helper()
	ctx := context.Background()
	if err := c.Login(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Logout(context.Background()) })
	return ctx
}

var (
	server = lb.Member{Node: "app-1"}
	port   = lb.Member{Node: "app-1", Port: 8080}
)

func TestSetStateAndReadBack(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		member     lb.Member
		set        lb.AdminState
		wantAction string
		wantOper   string
	}{
		{"server forced offline", server, lb.ForcedOffline, "disable", "Disabled"},
		{"server disabled", server, lb.Disabled, "disable-with-health-check", "Disabled"},
		{"server enabled", server, lb.Enabled, "enable", "Up"},
		{"port forced offline", port, lb.ForcedOffline, "disable", "Disabled"},
		{"port enabled", port, lb.Enabled, "enable", "Up"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, c := setup(t, a10test.Options{}, a10.Config{})
			srv.AddServer("app-1", a10test.Real{Ports: []a10test.Port{{Number: 8080}}})
			ctx := login(t, c)
			if tt.set == lb.Enabled {
				if err := c.SetState(ctx, tt.member, lb.ForcedOffline); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.SetState(ctx, tt.member, tt.set); err != nil {
				t.Fatalf("SetState: %v", err)
			}
			if got, _ := srv.Action("app-1", tt.member.Port); got != tt.wantAction {
				t.Errorf("device action = %q, want %q", got, tt.wantAction)
			}
			st, err := c.State(ctx, tt.member)
			if err != nil {
				t.Fatal(err)
			}
			if st.Admin != tt.set || st.Availability != tt.wantOper {
				t.Errorf("State = %+v, want %v and oper %q", st, tt.set, tt.wantOper)
			}
			reqs := srv.Requests()
			var post *a10test.Request
			for i := range reqs {
				if reqs[i].Method == "POST" && strings.Contains(reqs[i].Path, "/slb/server/") {
					post = &reqs[i]
				}
			}
			if post == nil {
				t.Fatal("no POST to the object: aXAPI modifies with POST (PUT replaces)")
			}
			if post.Header.Get("Authorization") == "" || !strings.HasPrefix(post.Header.Get("Authorization"), "A10 ") {
				t.Errorf("Authorization = %q", post.Header.Get("Authorization"))
			}
		})
	}
}

func TestConnectionsBothSpellings(t *testing.T) {
	t.Parallel()
	srv, c := setup(t, a10test.Options{}, a10.Config{})
	srv.AddServer("app-1", a10test.Real{Conns: 11, Decay: []int64{6, 0}, Ports: []a10test.Port{{Number: 8080, Conns: 5, Decay: []int64{2, 0}}}})
	ctx := login(t, c)
	var got []int64
	for _, m := range []lb.Member{server, port} {
		n, err := c.Connections(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, n)
		if err := c.SetState(ctx, m, lb.ForcedOffline); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			n, err := c.Connections(ctx, m)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, n)
		}
	}
	if fmt.Sprint(got) != "[11 6 0 5 2 0]" {
		t.Errorf("connections = %v, want [11 6 0 5 2 0] (server curr-conn, port curr_conn)", got)
	}
}

func TestParseCurrConn(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body, key string
		want            int64
		wantErr         bool
	}{
		{"server hyphen", `{"server":{"stats":{"curr-conn":4,"total-conn":9}}}`, "server", 4, false},
		{"server underscore", `{"server":{"stats":{"curr_conn":4}}}`, "server", 4, false},
		{"port underscore", `{"port":{"stats":{"curr_conn":2}}}`, "port", 2, false},
		{"port hyphen", `{"port":{"stats":{"curr-conn":2}}}`, "port", 2, false},
		{"missing", `{"server":{"stats":{"total-conn":9}}}`, "server", 0, true},
		{"wrong level", `{"port":{"stats":{"curr_conn":2}}}`, "server", 0, true},
		{"negative", `{"server":{"stats":{"curr-conn":-1}}}`, "server", 0, true},
		{"not JSON", `oops`, "server", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := a10.ParseCurrConn([]byte(tt.body), tt.key)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("ParseCurrConn = %d, %v; want %d (error %v)", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestStatsDisabledIsRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		real   a10test.Real
		member lb.Member
	}{
		{"server", a10test.Real{Conns: 7, StatsDisabled: true}, server},
		{"port", a10test.Real{Ports: []a10test.Port{{Number: 8080, Conns: 7, StatsDisabled: true}}}, port},
		{"port of a server without stats", a10test.Real{StatsDisabled: true, Ports: []a10test.Port{{Number: 8080, Conns: 7}}}, port},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, c := setup(t, a10test.Options{}, a10.Config{})
			srv.AddServer("app-1", tt.real)
			ctx := login(t, c)
			n, err := c.Connections(ctx, tt.member)
			if kindOf(err) != lb.KindStatsDisabled || retryable(err) {
				t.Fatalf("Connections = %d, %v; want KindStatsDisabled (the device reads 0 with 7 connections)", n, err)
			}
			if !strings.Contains(err.Error(), "stats-data-disable") {
				t.Errorf("error = %q, want it to name the setting", err)
			}
			if got := srv.Count("GET", "/stats"); got != 0 {
				t.Errorf("%d stats reads, want 0: the counters are not trusted", got)
			}
		})
	}
}

func TestInvalidSessionReAuthenticatesOnce(t *testing.T) {
	t.Parallel()
	srv, c := setup(t, a10test.Options{}, a10.Config{})
	srv.AddServer("app-1", a10test.Real{Conns: 4})
	ctx := login(t, c)
	srv.Inject(a10test.Fault{Kind: a10test.ExpireSession, Path: "/stats"})
	n, err := c.Connections(ctx, server)
	if err != nil || n != 4 {
		t.Fatalf("Connections = %d, %v; want 4", n, err)
	}
	if got := srv.Logins(); got != 2 {
		t.Errorf("logins = %d, want 2", got)
	}
	// A session that stays invalid after one re-auth is an error, not a loop.
	srv.Inject(a10test.Fault{Kind: a10test.ExpireSession, Path: "/stats", Times: -1})
	_, err = c.Connections(ctx, server)
	if kindOf(err) != lb.KindSession {
		t.Fatalf("Connections = %v, want KindSession", err)
	}
	if got := srv.Logins(); got != 3 {
		t.Errorf("logins = %d, want 3: one more re-auth, no more", got)
	}
}

func TestIdleTimeoutAndKeepAlive(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Unix(1_700_000_000, 0)}
	srv, c := setup(t, a10test.Options{Now: clk.Now, IdleTimeout: 10 * time.Minute}, a10.Config{})
	srv.AddServer("app-1", a10test.Real{})
	ctx := login(t, c)
	for range 5 { // keep-alives every 9 minutes keep the session
		clk.Add(9 * time.Minute)
		if err := c.KeepAlive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := srv.Logins(); got != 1 {
		t.Fatalf("logins = %d, want 1", got)
	}
	if got := srv.Count("GET", "/axapi/v3/version/oper"); got != 5 {
		t.Errorf("keep-alive calls = %d, want 5", got)
	}
	clk.Add(11 * time.Minute) // idle too long: the next call re-authenticates
	if _, err := c.State(ctx, server); err != nil {
		t.Fatal(err)
	}
	if got := srv.Logins(); got != 2 {
		t.Errorf("logins = %d, want 2", got)
	}
}

func TestErrorsAreClassified(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		fault     *a10test.Fault
		member    lb.Member
		want      lb.Kind
		code      int64
		retryable bool
	}{
		{"busy code on HTTP 400", &a10test.Fault{Kind: a10test.Busy, Path: "/slb/"}, server, lb.KindBusy, a10.CodeSystemBusy, true},
		{"no write privilege", &a10test.Fault{Kind: a10test.Denied, Path: "/slb/"}, server, lb.KindNoPrivilege, a10.CodeNoPrivilege, false},
		{"unknown server", nil, lb.Member{Node: "nope"}, lb.KindNotFound, a10.CodeNotFound, false},
		{"unknown port", nil, lb.Member{Node: "app-1", Port: 9}, lb.KindNotFound, 0, false},
		{"server error", &a10test.Fault{Kind: a10test.ServerError, Path: "/slb/"}, server, lb.KindUnavailable, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, c := setup(t, a10test.Options{}, a10.Config{})
			srv.AddServer("app-1", a10test.Real{Ports: []a10test.Port{{Number: 8080}}})
			ctx := login(t, c)
			if tt.fault != nil {
				srv.Inject(*tt.fault)
			}
			err := c.SetState(ctx, tt.member, lb.ForcedOffline)
			if tt.fault == nil {
				_, err = c.State(ctx, tt.member)
			}
			if kindOf(err) != tt.want || retryable(err) != tt.retryable {
				t.Fatalf("error = %v, want Kind %v (retryable %v)", err, tt.want, tt.retryable)
			}
			var ae *lb.APIError
			if !errors.As(err, &ae) || ae.Code != tt.code {
				t.Errorf("error = %#v, want code %d", err, tt.code)
			}
		})
	}
}

func TestPartition(t *testing.T) {
	t.Parallel()
	srv := a10test.New(a10test.Options{Partitions: []string{"p1"}})
	t.Cleanup(srv.Close)
	srv.AddServer("app-1", a10test.Real{Partition: "p1", Conns: 3})
	client := func(part string) *a10.Client {
		c, err := a10.New(a10.Config{Endpoint: srv.URL(), Username: a10test.DefaultUsername, Password: a10test.DefaultPassword, Partition: part, HTTPClient: srv.Client()})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ctx := context.Background()
	in := client("p1")
	if err := in.Login(ctx); err != nil {
		t.Fatal(err)
	}
	defer in.Logout(ctx)
	if n, err := in.Connections(ctx, server); err != nil || n != 3 {
		t.Errorf("in p1: Connections = %d, %v; want 3", n, err)
	}
	// The partition is re-activated after a re-auth.
	srv.Inject(a10test.Fault{Kind: a10test.ExpireSession, Path: "/stats"})
	if n, err := in.Connections(ctx, server); err != nil || n != 3 {
		t.Errorf("in p1 after re-auth: Connections = %d, %v; want 3", n, err)
	}
	shared := client("")
	if err := shared.Login(ctx); err != nil {
		t.Fatal(err)
	}
	defer shared.Logout(ctx)
	if _, err := shared.State(ctx, server); kindOf(err) != lb.KindNotFound {
		t.Errorf("in shared: State = %v, want KindNotFound", err)
	}
	if err := client("nope").Login(ctx); kindOf(err) != lb.KindNotFound || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("unknown partition: Login = %v, want KindNotFound naming it", err)
	}
}

func TestLogoutAndLoginFailures(t *testing.T) {
	t.Parallel()
	srv, c := setup(t, a10test.Options{}, a10.Config{})
	ctx := context.Background()
	if err := c.Login(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Logout(ctx); err != nil {
		t.Fatal(err)
	}
	if got := srv.ActiveSessions(); got != 0 {
		t.Errorf("active sessions = %d, want 0", got)
	}
	if err := c.Logout(ctx); err != nil {
		t.Errorf("second Logout = %v", err)
	}
	if _, err := c.State(ctx, server); kindOf(err) != lb.KindSession {
		t.Errorf("State after logout = %v, want KindSession", err)
	}

	const secret = "Qz!distinctive-A10-secret"
	_, bad := setup(t, a10test.Options{EchoBody: true}, a10.Config{Password: secret})
	err := bad.Login(ctx)
	if kindOf(err) != lb.KindAuth {
		t.Fatalf("Login = %v, want KindAuth", err)
	}
	if strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "Incorrect user name or password") {
		t.Errorf("error = %q: want the device's message with the password redacted", err)
	}
}

func TestPutWouldWipeThePortList(t *testing.T) {
	t.Parallel()
	// The pitfall the adapter avoids by modifying with POST: a partial PUT
	// replaces the object. Checked on the fake, through the adapter's
	// result: after SetState the port still exists.
	srv, c := setup(t, a10test.Options{}, a10.Config{})
	srv.AddServer("app-1", a10test.Real{Ports: []a10test.Port{{Number: 8080}}})
	ctx := login(t, c)
	if err := c.SetState(ctx, server, lb.ForcedOffline); err != nil {
		t.Fatal(err)
	}
	if _, ok := srv.Action("app-1", 8080); !ok {
		t.Fatal("the port is gone after SetState")
	}
	for _, r := range srv.Requests() {
		if r.Method == "POST" && r.Path == "/axapi/v3/slb/server/app-1" {
			var body map[string]map[string]string
			if err := json.Unmarshal([]byte(r.Body), &body); err != nil || body["server"]["action"] != "disable" || len(body["server"]) != 1 {
				t.Errorf("body = %s, want {\"server\":{\"action\":\"disable\"}}", r.Body)
			}
		}
	}
}

func TestAdminState(t *testing.T) {
	t.Parallel()
	for action, want := range map[string]lb.AdminState{
		"enable": lb.Enabled, "disable": lb.ForcedOffline, "disable-with-health-check": lb.Disabled, "": lb.StateUnknown, "x": lb.StateUnknown,
	} {
		if got := a10.AdminState(action); got != want {
			t.Errorf("AdminState(%q) = %v, want %v", action, got, want)
		}
	}
}

func TestServiceGroupMembersRefused(t *testing.T) {
	t.Parallel()
	srv, c := setup(t, a10test.Options{}, a10.Config{})
	ctx := login(t, c)
	n := len(srv.Requests())
	if err := c.SetState(ctx, lb.Member{Pool: "sg", Node: "app-1", Port: 80}, lb.ForcedOffline); !errors.Is(err, lb.ErrInvalidConfig) {
		t.Errorf("SetState = %v, want ErrInvalidConfig", err)
	}
	if len(srv.Requests()) != n {
		t.Error("a request was made for an unsupported member")
	}
}

// kindOf returns the Kind of the *lb.APIError in err, or 0.
func kindOf(err error) lb.Kind {
	if ae, ok := errors.AsType[*lb.APIError](err); ok {
		return ae.Kind
	}
	return 0
}

// retryable reports whether err holds a retryable *lb.APIError.
func retryable(err error) bool {
	ae, ok := errors.AsType[*lb.APIError](err)
	return ok && ae.Retryable()
}

// TestPlainHTTPRefusedUnlessAllowed pins issue 34, problem 8, in the
// adapter: the login body carries the password, so New refuses an
// http:// endpoint unless AllowInsecureHTTP says so; allowed, the fake
// over plain HTTP answers. Before the fix New accepted http:// silently.
func TestPlainHTTPRefusedUnlessAllowed(t *testing.T) {
	t.Parallel()
	srv := a10test.New(a10test.Options{PlainHTTP: true})
	t.Cleanup(srv.Close)
	srv.AddServer("app-1", a10test.Real{})
	cfg := a10.Config{Endpoint: srv.URL(), Username: a10test.DefaultUsername, Password: a10test.DefaultPassword, HTTPClient: srv.Client()}
	_, err := a10.New(cfg)
	if ce, ok := errors.AsType[*lb.ConfigError](err); !ok || ce.Field != "a10.Endpoint" || !strings.Contains(err.Error(), "AllowInsecureHTTP") {
		t.Fatalf("New(http://) = %v, want a *ConfigError on a10.Endpoint", err)
	}
	cfg.AllowInsecureHTTP = true
	c, err := a10.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := login(t, c)
	if _, err := c.State(ctx, server); err != nil {
		t.Errorf("State over allowed http: %v", err)
	}
	if got, want := c.DeviceID(), "a10 "+strings.TrimPrefix(srv.URL(), "http://")+" shared"; got != want {
		t.Errorf("DeviceID = %q, want %q", got, want)
	}
	var _ lb.DeviceIdentifier = (*a10.Client)(nil)
}
