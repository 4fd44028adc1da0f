package f5_test

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
	"github.com/holdfast-db/holdfast/lb/f5"
	"github.com/holdfast-db/holdfast/lb/f5/f5test"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock is a manual clock for the fake's token expiry.
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

func setup(t *testing.T, opts f5test.Options, cfg f5.Config) (*f5test.Server, *f5.Client) {
	t.Helper()
	srv := f5test.New(opts)
	t.Cleanup(srv.Close)
	cfg.Endpoint = srv.URL()
	if cfg.Username == "" {
		cfg.Username = f5test.DefaultUsername
	}
	if cfg.Password == "" {
		cfg.Password = f5test.DefaultPassword
	}
	cfg.HTTPClient = srv.Client()
	c, err := f5.New(cfg)
	if err != nil {
		t.Fatalf("f5.New: %v", err)
	}
	return srv, c
}

var (
	poolMember = lb.Member{Pool: "web", Node: "web-1", Port: 80}
	node       = lb.Member{Node: "db-1"}
)

func TestSetStateWritesThePairAndReadsItBack(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		member    lb.Member
		monitor   bool
		set       lb.AdminState
		written   f5test.State
		readBack  string // State.Detail
		wantAdmin lb.AdminState
	}{
		{"member forced offline", poolMember, false, lb.ForcedOffline, f5test.State{Session: "user-disabled", State: "user-down"}, "session=user-disabled state=user-down", lb.ForcedOffline},
		{"member disabled", poolMember, false, lb.Disabled, f5test.State{Session: "user-disabled", State: "user-up"}, "session=user-disabled state=unchecked", lb.Disabled},
		{"member enabled without monitor", poolMember, false, lb.Enabled, f5test.State{Session: "user-enabled", State: "user-up"}, "session=user-enabled state=unchecked", lb.Enabled},
		{"member enabled with monitor reads monitor-enabled", poolMember, true, lb.Enabled, f5test.State{Session: "user-enabled", State: "user-up"}, "session=monitor-enabled state=up", lb.Enabled},
		{"member disabled with monitor", poolMember, true, lb.Disabled, f5test.State{Session: "user-disabled", State: "user-up"}, "session=user-disabled state=up", lb.Disabled},
		{"node forced offline", node, true, lb.ForcedOffline, f5test.State{Session: "user-disabled", State: "user-down"}, "session=user-disabled state=user-down", lb.ForcedOffline},
		{"node enabled", node, true, lb.Enabled, f5test.State{Session: "user-enabled", State: "user-up"}, "session=monitor-enabled state=up", lb.Enabled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, c := setup(t, f5test.Options{}, f5.Config{})
			srv.AddPoolMember("web", "web-1:80", f5test.Member{Monitor: tt.monitor})
			srv.AddNode("db-1", f5test.Member{Monitor: tt.monitor})
			ctx := context.Background()
			if err := c.Login(ctx); err != nil {
				t.Fatal(err)
			}
			defer c.Logout(ctx)
			if tt.set == lb.Enabled { // start from elsewhere
				if err := c.SetState(ctx, tt.member, lb.ForcedOffline); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.SetState(ctx, tt.member, tt.set); err != nil {
				t.Fatalf("SetState: %v", err)
			}
			var got f5test.State
			if tt.member.Pool != "" {
				got, _ = srv.MemberState("web", "web-1:80")
			} else {
				got, _ = srv.NodeState("db-1")
			}
			if got != tt.written {
				t.Errorf("written %+v, want %+v", got, tt.written)
			}
			st, err := c.State(ctx, tt.member)
			if err != nil {
				t.Fatalf("State: %v", err)
			}
			if st.Admin != tt.wantAdmin || st.Detail != tt.readBack {
				t.Errorf("State = %+v, want %v from %q", st, tt.wantAdmin, tt.readBack)
			}
		})
	}
}

func TestPatchGoesToTheRightURL(t *testing.T) {
	t.Parallel()
	srv, c := setup(t, f5test.Options{Partition: "Prod"}, f5.Config{Partition: "Prod"})
	srv.AddPoolMember("web", "10.0.0.1:443", f5test.Member{})
	ctx := context.Background()
	if err := c.Login(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Logout(ctx)
	if err := c.SetState(ctx, lb.Member{Pool: "web", Node: "10.0.0.1", Port: 443}, lb.ForcedOffline); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	last := reqs[len(reqs)-1]
	if last.Method != "PATCH" || last.Path != "/mgmt/tm/ltm/pool/~Prod~web/members/~Prod~10.0.0.1:443" {
		t.Errorf("request = %s %s", last.Method, last.Path)
	}
	var body map[string]string
	if err := json.Unmarshal([]byte(last.Body), &body); err != nil || body["session"] != "user-disabled" || body["state"] != "user-down" || len(body) != 2 {
		t.Errorf("body = %s, want exactly the session/state pair", last.Body)
	}
	if last.Header.Get("X-F5-Auth-Token") == "" {
		t.Error("no X-F5-Auth-Token header")
	}
}

func TestAdminState(t *testing.T) {
	t.Parallel()
	tests := []struct {
		session, state string
		want           lb.AdminState
	}{
		{"user-disabled", "user-down", lb.ForcedOffline},
		{"user-disabled", "up", lb.Disabled},
		{"user-disabled", "unchecked", lb.Disabled},
		{"user-disabled", "down", lb.Disabled},
		{"user-enabled", "unchecked", lb.Enabled},
		{"monitor-enabled", "up", lb.Enabled},
		{"monitor-enabled", "down", lb.Enabled},
		{"monitor-enabled", "checking", lb.Enabled},
		{"user-enabled", "fqdn-up", lb.Enabled},
		{"user-enabled", "user-down", lb.Disabled},
		{"", "up", lb.StateUnknown},
		{"weird", "up", lb.StateUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.session+"/"+tt.state, func(t *testing.T) {
			if got := f5.AdminState(tt.session, tt.state); got != tt.want {
				t.Errorf("AdminState(%q, %q) = %v, want %v", tt.session, tt.state, got, tt.want)
			}
		})
	}
}

func stats(inner string) []byte {
	return []byte(`{"kind":"tm:ltm:pool:members:membersstats","entries":{"https://localhost/mgmt/tm/ltm/pool/~Common~p/members/~Common~n:80/stats":{"nestedStats":{"entries":{` + inner + `}}}}}`)
}

func TestParseCurConns(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		body    []byte
		want    int64
		wantErr string
	}{
		{"value", stats(`"serverside.curConns":{"value":7},"serverside.totConns":{"value":42}`), 7, ""},
		{"zero", stats(`"serverside.curConns":{"value":0}`), 0, ""},
		{"split in one entry", stats(`"serverside.curConns":{"high":1,"low":5}`), 1<<32 | 5, ""},
		{"split as sibling entries", stats(`"serverside.curConns.high":{"value":0},"serverside.curConns.low":{"value":12}`), 12, ""},
		{"large value", stats(`"serverside.curConns":{"value":4294967301}`), 4294967301, ""},
		{"any inner key", []byte(`{"entries":{"whatever-key/v17":{"nestedStats":{"entries":{"serverside.curConns":{"value":3}}}}}}`), 3, ""},
		{"missing field", stats(`"serverside.totConns":{"value":42}`), 0, "no serverside.curConns"},
		{"two entries", []byte(`{"entries":{"a":{"nestedStats":{"entries":{}}},"b":{"nestedStats":{"entries":{}}}}}`), 0, "2 entries"},
		{"negative", stats(`"serverside.curConns":{"value":-1}`), 0, "non-negative"},
		{"half too big", stats(`"serverside.curConns":{"high":4294967296,"low":0}`), 0, "32 bits"},
		{"not JSON", []byte(`<html>`), 0, "not JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := f5.ParseCurConns(tt.body)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseCurConns = %d, %v; want error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseCurConns = %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

func TestConnectionsFromTheFake(t *testing.T) {
	t.Parallel()
	for _, split := range []bool{false, true} {
		t.Run(fmt.Sprintf("split=%v", split), func(t *testing.T) {
			t.Parallel()
			srv, c := setup(t, f5test.Options{}, f5.Config{})
			srv.AddPoolMember("web", "web-1:80", f5test.Member{Conns: 9, Decay: []int64{4, 0}, SplitCounters: split})
			ctx := context.Background()
			if err := c.Login(ctx); err != nil {
				t.Fatal(err)
			}
			defer c.Logout(ctx)
			var got []int64
			read := func() {
				n, err := c.Connections(ctx, poolMember)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, n)
			}
			read()
			if err := c.SetState(ctx, poolMember, lb.ForcedOffline); err != nil {
				t.Fatal(err)
			}
			read()
			read()
			read()
			if fmt.Sprint(got) != "[9 4 0 0]" {
				t.Errorf("connections = %v, want [9 4 0 0]", got)
			}
		})
	}
}

func TestExpiredTokenReLogsInOnce(t *testing.T) {
	t.Parallel()
	srv, c := setup(t, f5test.Options{}, f5.Config{})
	srv.AddPoolMember("web", "web-1:80", f5test.Member{Conns: 3})
	ctx := context.Background()
	if err := c.Login(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Logout(ctx)
	srv.Inject(f5test.Fault{Kind: f5test.ExpireToken, Path: "/stats"})
	n, err := c.Connections(ctx, poolMember)
	if err != nil || n != 3 {
		t.Fatalf("Connections = %d, %v; want 3 after a re-login", n, err)
	}
	if got := srv.Logins(); got != 2 {
		t.Errorf("logins = %d, want 2 (one re-login)", got)
	}
	if got := srv.Count("GET", "/stats"); got != 2 {
		t.Errorf("stats requests = %d, want 2 (the 401 and the retry)", got)
	}
}

func TestDeniedAfterReLoginIsNoPrivilege(t *testing.T) {
	t.Parallel()
	srv, c := setup(t, f5test.Options{}, f5.Config{})
	srv.AddPoolMember("web", "web-1:80", f5test.Member{})
	ctx := context.Background()
	if err := c.Login(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Logout(ctx)
	srv.Inject(f5test.Fault{Kind: f5test.Denied, Method: "PATCH", Path: "/ltm/", Times: -1})
	err := c.SetState(ctx, poolMember, lb.ForcedOffline)
	if kindOf(err) != lb.KindNoPrivilege || retryable(err) {
		t.Fatalf("SetState = %v, want KindNoPrivilege, not retryable", err)
	}
	if got := srv.Logins(); got != 2 {
		t.Errorf("logins = %d, want 2: exactly one re-login", got)
	}
}

func TestErrorsAreClassified(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		fault     *f5test.Fault
		member    lb.Member
		want      lb.Kind
		retryable bool
	}{
		{"busy", &f5test.Fault{Kind: f5test.Busy, Path: "/ltm/"}, poolMember, lb.KindBusy, true},
		{"server error", &f5test.Fault{Kind: f5test.ServerError, Path: "/ltm/"}, poolMember, lb.KindUnavailable, true},
		{"unknown member", nil, lb.Member{Pool: "web", Node: "nope", Port: 80}, lb.KindNotFound, false},
		{"unknown pool", nil, lb.Member{Pool: "nope", Node: "web-1", Port: 80}, lb.KindNotFound, false},
		{"404 answer", &f5test.Fault{Kind: f5test.NotFound, Path: "/ltm/"}, poolMember, lb.KindNotFound, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, c := setup(t, f5test.Options{}, f5.Config{})
			srv.AddPoolMember("web", "web-1:80", f5test.Member{})
			ctx := context.Background()
			if err := c.Login(ctx); err != nil {
				t.Fatal(err)
			}
			defer c.Logout(ctx)
			if tt.fault != nil {
				srv.Inject(*tt.fault)
			}
			_, err := c.State(ctx, tt.member)
			if kindOf(err) != tt.want || retryable(err) != tt.retryable {
				t.Fatalf("State = %v, want Kind %v (retryable %v)", err, tt.want, tt.retryable)
			}
			var ae *lb.APIError
			if !errors.As(err, &ae) || ae.Vendor != "f5" || ae.Op != "state" || !strings.HasPrefix(err.Error(), "lb: f5 state ") {
				t.Errorf("error = %#v", err)
			}
		})
	}
}

func TestLoginFailures(t *testing.T) {
	t.Parallel()
	t.Run("wrong password", func(t *testing.T) {
		t.Parallel()
		_, c := setup(t, f5test.Options{}, f5.Config{Password: "wrong"})
		err := c.Login(context.Background())
		if kindOf(err) != lb.KindAuth || retryable(err) {
			t.Fatalf("Login = %v, want KindAuth", err)
		}
	})
	t.Run("token limit", func(t *testing.T) {
		t.Parallel()
		srv, c := setup(t, f5test.Options{MaxTokens: 1}, f5.Config{})
		other, _ := f5.New(f5.Config{Endpoint: srv.URL(), Username: f5test.DefaultUsername, Password: f5test.DefaultPassword, HTTPClient: srv.Client()})
		if err := other.Login(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer other.Logout(context.Background())
		err := c.Login(context.Background())
		if kindOf(err) != lb.KindAuth || !strings.Contains(err.Error(), "maximum active login tokens") {
			t.Fatalf("Login = %v, want KindAuth about the token limit", err)
		}
	})
	t.Run("busy while restarting", func(t *testing.T) {
		t.Parallel()
		srv, c := setup(t, f5test.Options{}, f5.Config{})
		srv.Inject(f5test.Fault{Kind: f5test.Busy, Path: "/authn/login"})
		err := c.Login(context.Background())
		if kindOf(err) != lb.KindBusy || !retryable(err) {
			t.Fatalf("Login = %v, want retryable KindBusy", err)
		}
	})
	t.Run("not logged in", func(t *testing.T) {
		t.Parallel()
		srv, c := setup(t, f5test.Options{}, f5.Config{})
		_, err := c.State(context.Background(), poolMember)
		if kindOf(err) != lb.KindSession || len(srv.Requests()) != 0 {
			t.Fatalf("State = %v with %d requests, want KindSession and none", err, len(srv.Requests()))
		}
	})
}

func TestKeepAliveExtendsTheToken(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Unix(1_700_000_000, 0)}
	srv, c := setup(t, f5test.Options{Now: clk.Now}, f5.Config{TokenTimeout: 3 * time.Hour})
	srv.AddPoolMember("web", "web-1:80", f5test.Member{})
	ctx := context.Background()
	if err := c.Login(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Logout(ctx)
	// Login set the lifetime to 3h: 1h later the token still works.
	clk.Add(time.Hour)
	if _, err := c.State(ctx, poolMember); err != nil {
		t.Fatal(err)
	}
	// Keep it alive every 2h40m: still the first token at 8h.
	for range 3 {
		clk.Add(100 * time.Minute)
		if err := c.KeepAlive(ctx); err != nil {
			t.Fatalf("KeepAlive: %v", err)
		}
	}
	if _, err := c.State(ctx, poolMember); err != nil {
		t.Fatal(err)
	}
	if got := srv.Logins(); got != 1 {
		t.Fatalf("logins = %d, want 1: the token was extended", got)
	}
	var patches []string
	for _, r := range srv.Requests() {
		if r.Method == "PATCH" && strings.HasPrefix(r.Path, "/mgmt/shared/authz/tokens/") {
			patches = append(patches, r.Body)
		}
	}
	if len(patches) != 4 || patches[0] != `{"timeout":10800}` {
		t.Errorf("token PATCH bodies = %q, want 4 of {\"timeout\":10800}", patches)
	}
	// Past BIG-IP's absolute limit (10h) the extension is refused with 406:
	// KeepAlive logs in again and frees the old token's slot.
	clk.Add(100 * time.Minute)
	if err := c.KeepAlive(ctx); err != nil {
		t.Fatalf("KeepAlive at the absolute limit: %v", err)
	}
	if got := srv.Logins(); got != 2 {
		t.Errorf("logins = %d, want 2 after the 406", got)
	}
	if got := srv.ActiveTokens(); got != 1 {
		t.Errorf("active tokens = %d, want 1: the old one deleted", got)
	}
}

func TestExpiredTokenWithoutKeepAlive(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Unix(1_700_000_000, 0)}
	srv, c := setup(t, f5test.Options{Now: clk.Now}, f5.Config{})
	srv.AddPoolMember("web", "web-1:80", f5test.Member{})
	ctx := context.Background()
	if err := c.Login(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Logout(ctx)
	clk.Add(f5.DeviceTokenTimeout + time.Second)
	if _, err := c.State(ctx, poolMember); err != nil {
		t.Fatalf("State after expiry: %v", err)
	}
	if got := srv.Logins(); got != 2 {
		t.Errorf("logins = %d, want 2", got)
	}
}

func TestLogoutDeletesTheToken(t *testing.T) {
	t.Parallel()
	srv, c := setup(t, f5test.Options{}, f5.Config{})
	ctx := context.Background()
	if err := c.Login(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Login(ctx); err != nil { // a second login frees the first token
		t.Fatal(err)
	}
	if got := srv.ActiveTokens(); got != 1 {
		t.Errorf("active tokens = %d, want 1", got)
	}
	if err := c.Logout(ctx); err != nil {
		t.Fatal(err)
	}
	if got := srv.ActiveTokens(); got != 0 {
		t.Errorf("active tokens after logout = %d, want 0", got)
	}
	if err := c.Logout(ctx); err != nil {
		t.Errorf("second Logout = %v, want nil", err)
	}
	if err := c.Login(ctx); err != nil {
		t.Fatal(err)
	}
	srv.ExpireTokens()
	if err := c.Logout(ctx); err != nil {
		t.Errorf("Logout of an expired token = %v, want nil", err)
	}
}

func TestPasswordNeverInErrors(t *testing.T) {
	t.Parallel()
	const secret = "Zq7-very-distinctive-Pa55"
	// The fake echoes the login body (which holds the password) in its
	// error message.
	_, c := setup(t, f5test.Options{EchoBody: true}, f5.Config{Password: secret})
	err := c.Login(context.Background())
	if kindOf(err) != lb.KindAuth {
		t.Fatalf("Login = %v, want KindAuth", err)
	}
	if strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), lb.Redacted) {
		t.Errorf("error = %q: the password must be redacted", err)
	}
	cfg := f5.Config{Endpoint: "https://x", Username: "u", Password: secret}
	for _, s := range []string{fmt.Sprintf("%v %+v %#v %s %x", cfg, cfg, cfg, cfg.Password, cfg.Password)} {
		if strings.Contains(s, secret) {
			t.Errorf("formatted config shows the password: %s", s)
		}
	}
}

func TestInvalidMembersMakeNoRequest(t *testing.T) {
	t.Parallel()
	srv, c := setup(t, f5test.Options{}, f5.Config{})
	ctx := context.Background()
	if err := c.Login(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Logout(ctx)
	before := len(srv.Requests())
	for _, m := range []lb.Member{{Pool: "web", Node: "n"}, {Node: "n", Port: 80}, {Pool: "web", Port: 80}, {Node: "a/b"}} {
		if err := c.SetState(ctx, m, lb.Enabled); !errors.Is(err, lb.ErrInvalidConfig) {
			t.Errorf("SetState(%+v) = %v, want ErrInvalidConfig", m, err)
		}
	}
	if err := c.SetState(ctx, poolMember, lb.StateUnknown); !errors.Is(err, lb.ErrInvalidConfig) {
		t.Errorf("SetState(unknown) = %v, want ErrInvalidConfig", err)
	}
	if got := len(srv.Requests()) - before; got != 0 {
		t.Errorf("%d requests for invalid members, want 0", got)
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  f5.Config
		want string
	}{
		{"no endpoint", f5.Config{Username: "u", Password: "p"}, "scheme"},
		{"user info", f5.Config{Endpoint: "https://u:p@x", Username: "u", Password: "p"}, "user info"},
		{"path", f5.Config{Endpoint: "https://x/mgmt", Username: "u", Password: "p"}, "path"},
		{"no user", f5.Config{Endpoint: "https://x", Password: "p"}, "Username"},
		{"no password", f5.Config{Endpoint: "https://x", Username: "u"}, "Password"},
		{"token too long", f5.Config{Endpoint: "https://x", Username: "u", Password: "p", TokenTimeout: 11 * time.Hour}, "TokenTimeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := f5.New(tt.cfg)
			if !errors.Is(err, lb.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New = %v, want ErrInvalidConfig about %q", err, tt.want)
			}
		})
	}
}

func TestSlowDeviceIsUnavailableAndRetryable(t *testing.T) {
	t.Parallel()
	srv := f5test.New(f5test.Options{})
	t.Cleanup(srv.Close)
	srv.AddPoolMember("web", "web-1:80", f5test.Member{})
	hc := srv.Client()
	// Well under the fault's minute, and over a login's TLS handshake
	// under the race detector on a loaded machine (50 ms was not, in CI).
	hc.Timeout = 2 * time.Second
	c, err := f5.New(f5.Config{Endpoint: srv.URL(), Username: f5test.DefaultUsername, Password: f5test.DefaultPassword, HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Login(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Logout(ctx)
	srv.Inject(f5test.Fault{Kind: f5test.Slow, Path: "/stats", Delay: time.Minute})
	start := time.Now()
	_, err = c.Connections(ctx, poolMember)
	if kindOf(err) != lb.KindUnavailable || !retryable(err) {
		t.Fatalf("Connections = %v, want a retryable KindUnavailable", err)
	}
	if time.Since(start) > 30*time.Second {
		t.Errorf("the client waited for the slow answer instead of its own timeout")
	}
	if n, err := c.Connections(ctx, poolMember); err != nil || n != 0 {
		t.Errorf("next call = %d, %v; the fault applies once", n, err)
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
// http:// endpoint unless AllowInsecureHTTP says so, and the device is
// never called; allowed, the fake over plain HTTP answers. Before the
// fix New accepted http:// silently.
func TestPlainHTTPRefusedUnlessAllowed(t *testing.T) {
	t.Parallel()
	srv := f5test.New(f5test.Options{PlainHTTP: true})
	t.Cleanup(srv.Close)
	srv.AddNode("db-1", f5test.Member{})
	cfg := f5.Config{Endpoint: srv.URL(), Username: f5test.DefaultUsername, Password: f5test.DefaultPassword, HTTPClient: srv.Client()}
	_, err := f5.New(cfg)
	if ce, ok := errors.AsType[*lb.ConfigError](err); !ok || ce.Field != "f5.Endpoint" || !strings.Contains(err.Error(), "AllowInsecureHTTP") {
		t.Fatalf("New(http://) = %v, want a *ConfigError on f5.Endpoint", err)
	}
	cfg.AllowInsecureHTTP = true
	c, err := f5.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Login(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Logout(ctx)
	if _, err := c.State(ctx, node); err != nil {
		t.Errorf("State over allowed http: %v", err)
	}
}

// DeviceID names the device whatever the configuration calls it: member
// locks are keyed by it (issue 34, problem 4).
func TestDeviceID(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ endpoint, partition, want string }{
		{"https://BigIP.example.net", "", "f5 bigip.example.net:443 Common"},
		{"https://bigip.example.net:443/", "Common", "f5 bigip.example.net:443 Common"},
		{"https://bigip.example.net:8443", "pay", "f5 bigip.example.net:8443 pay"},
		{"https://[2001:db8::1]", "", "f5 [2001:db8::1]:443 Common"},
	} {
		c, err := f5.New(f5.Config{Endpoint: tt.endpoint, Username: "u", Password: "p", Partition: tt.partition})
		if err != nil {
			t.Fatal(err)
		}
		if got := c.DeviceID(); got != tt.want {
			t.Errorf("DeviceID(%s, %q) = %q, want %q", tt.endpoint, tt.partition, got, tt.want)
		}
	}
	var _ lb.DeviceIdentifier = (*f5.Client)(nil)
}
