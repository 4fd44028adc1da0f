package f5test_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/holdfast-db/holdfast/lb/f5/f5test"
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

// call sends a request and decodes the JSON answer.
func call(t *testing.T, srv *f5test.Server, method, path, token string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, srv.URL()+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("X-F5-Auth-Token", token)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatalf("%s %s: answer is not JSON: %v", method, path, err)
	}
	return resp.StatusCode, m
}

func login(t *testing.T, srv *f5test.Server) string {
	t.Helper()
	code, m := call(t, srv, "POST", "/mgmt/shared/authn/login", "", map[string]string{"username": f5test.DefaultUsername, "password": f5test.DefaultPassword, "loginProviderName": "tmos"})
	if code != 200 {
		t.Fatalf("login: %d %v", code, m)
	}
	return m["token"].(map[string]any)["token"].(string)
}

const member = "/mgmt/tm/ltm/pool/~Common~web/members/~Common~web-1:80"

func TestLoginAnswer(t *testing.T) {
	t.Parallel()
	srv := f5test.New(f5test.Options{})
	defer srv.Close()
	code, m := call(t, srv, "POST", "/mgmt/shared/authn/login", "", map[string]string{"username": f5test.DefaultUsername, "password": f5test.DefaultPassword})
	tok, _ := m["token"].(map[string]any)
	if code != 200 || tok["token"] == "" || tok["timeout"] != float64(1200) || tok["kind"] != "shared:authz:tokens:authtokenitemstate" || m["username"] != f5test.DefaultUsername {
		t.Errorf("login = %d %v", code, m)
	}
	code, m = call(t, srv, "POST", "/mgmt/shared/authn/login", "", map[string]string{"username": "admin", "password": "nope"})
	if code != 401 || m["code"] != float64(401) || m["message"] != "Authentication failed." {
		t.Errorf("bad login = %d %v", code, m)
	}
	if srv.Logins() != 1 {
		t.Errorf("Logins = %d", srv.Logins())
	}
}

func TestTokens(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Unix(1_700_000_000, 0)}
	srv := f5test.New(f5test.Options{Now: clk.Now, MaxTokens: 2})
	defer srv.Close()
	srv.AddPoolMember("web", "web-1:80", f5test.Member{})
	if code, m := call(t, srv, "GET", member, "bogus", nil); code != 401 || m["message"] != "X-F5-Auth-Token does not exist." {
		t.Errorf("unknown token = %d %v", code, m)
	}
	tok := login(t, srv)
	login(t, srv)
	if code, m := call(t, srv, "POST", "/mgmt/shared/authn/login", "", map[string]string{"username": f5test.DefaultUsername, "password": f5test.DefaultPassword}); code != 400 {
		t.Errorf("third login with MaxTokens 2 = %d %v", code, m)
	}
	clk.Add(1100 * time.Second)
	if code, m := call(t, srv, "PATCH", "/mgmt/shared/authz/tokens/"+tok, tok, map[string]int{"timeout": 36000}); code != 406 {
		t.Errorf("extension past the absolute lifetime = %d %v, want 406", code, m)
	}
	if code, m := call(t, srv, "PATCH", "/mgmt/shared/authz/tokens/"+tok, tok, map[string]int{"timeout": 600}); code != 200 || m["timeout"] != float64(600) {
		t.Errorf("extension = %d %v", code, m)
	}
	clk.Add(500 * time.Second) // 1600s after login: alive thanks to the extension
	if code, _ := call(t, srv, "GET", member, tok, nil); code != 200 {
		t.Errorf("extended token = %d", code)
	}
	clk.Add(101 * time.Second)
	if code, _ := call(t, srv, "GET", member, tok, nil); code != 401 {
		t.Errorf("expired token = %d, want 401", code)
	}
	tok = login(t, srv) // the expired one freed its slot
	if code, _ := call(t, srv, "DELETE", "/mgmt/shared/authz/tokens/"+tok, tok, nil); code != 200 {
		t.Errorf("DELETE = %d", code)
	}
	if code, _ := call(t, srv, "GET", member, tok, nil); code != 401 {
		t.Errorf("deleted token = %d, want 401", code)
	}
}

func TestReadBackDiffersFromWritten(t *testing.T) {
	t.Parallel()
	tests := []struct {
		monitor          bool
		session, state   string
		rSession, rState string
	}{
		{true, "user-enabled", "user-up", "monitor-enabled", "up"},
		{false, "user-enabled", "user-up", "user-enabled", "unchecked"},
		{true, "user-disabled", "user-up", "user-disabled", "up"},
		{true, "user-disabled", "user-down", "user-disabled", "user-down"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v/%s/%s", tt.monitor, tt.session, tt.state), func(t *testing.T) {
			t.Parallel()
			srv := f5test.New(f5test.Options{})
			defer srv.Close()
			srv.AddPoolMember("web", "web-1:80", f5test.Member{Monitor: tt.monitor})
			tok := login(t, srv)
			code, m := call(t, srv, "PATCH", member, tok, map[string]string{"session": tt.session, "state": tt.state})
			if code != 200 || m["session"] != tt.rSession || m["state"] != tt.rState {
				t.Errorf("PATCH = %d %v", code, m)
			}
			_, m = call(t, srv, "GET", member, tok, nil)
			if m["session"] != tt.rSession || m["state"] != tt.rState || m["kind"] != "tm:ltm:pool:members:membersstate" || m["fullPath"] != "/Common/web-1:80" {
				t.Errorf("GET = %v, want session %s state %s", m, tt.rSession, tt.rState)
			}
			if st, _ := srv.MemberState("web", "web-1:80"); st.Session != tt.session || st.State != tt.state {
				t.Errorf("MemberState = %+v", st)
			}
		})
	}
}

func TestRejectsInvalidValuesAndUnknownObjects(t *testing.T) {
	t.Parallel()
	srv := f5test.New(f5test.Options{})
	defer srv.Close()
	srv.AddPoolMember("web", "web-1:80", f5test.Member{})
	tok := login(t, srv)
	if code, _ := call(t, srv, "PATCH", member, tok, map[string]string{"session": "user-down"}); code != 400 {
		t.Errorf("invalid session = %d, want 400", code)
	}
	for _, p := range []string{
		"/mgmt/tm/ltm/pool/~Common~web/members/~Common~web-9:80",
		"/mgmt/tm/ltm/pool/~Other~web/members/~Other~web-1:80",
		"/mgmt/tm/ltm/node/~Common~web-1",
	} {
		if code, m := call(t, srv, "GET", p, tok, nil); code != 404 || m["code"] != float64(404) {
			t.Errorf("GET %s = %d %v, want 404", p, code, m)
		}
	}
}

func TestStatsEnvelopeAndDecay(t *testing.T) {
	t.Parallel()
	srv := f5test.New(f5test.Options{})
	defer srv.Close()
	srv.AddPoolMember("web", "web-1:80", f5test.Member{Conns: 7, Decay: []int64{3, 0}})
	srv.AddNode("db-1", f5test.Member{Conns: 5_000_000_000, SplitCounters: true})
	tok := login(t, srv)
	read := func(path string) map[string]any {
		t.Helper()
		code, m := call(t, srv, "GET", path+"/stats", tok, nil)
		entries, _ := m["entries"].(map[string]any)
		if code != 200 || len(entries) != 1 {
			t.Fatalf("stats = %d %v", code, m)
		}
		for _, e := range entries {
			return e.(map[string]any)["nestedStats"].(map[string]any)["entries"].(map[string]any)
		}
		return nil
	}
	cur := func(e map[string]any) any { return e["serverside.curConns"].(map[string]any)["value"] }
	var got []any
	got = append(got, cur(read(member)))
	call(t, srv, "PATCH", member, tok, map[string]string{"session": "user-disabled", "state": "user-down"})
	for range 3 {
		got = append(got, cur(read(member)))
	}
	call(t, srv, "PATCH", member, tok, map[string]string{"session": "user-enabled", "state": "user-up"})
	got = append(got, cur(read(member)))
	call(t, srv, "PATCH", member, tok, map[string]string{"session": "user-disabled", "state": "user-down"})
	got = append(got, cur(read(member)))
	if fmt.Sprint(got) != "[7 3 0 0 7 3]" {
		t.Errorf("curConns = %v, want [7 3 0 0 7 3] (the decay starts over after enable)", got)
	}
	split := read("/mgmt/tm/ltm/node/~Common~db-1")["serverside.curConns"].(map[string]any)
	if split["high"] != float64(1) || split["low"] != float64(5_000_000_000-(1<<32)) {
		t.Errorf("split counter = %v", split)
	}
}

func TestFaults(t *testing.T) {
	t.Parallel()
	srv := f5test.New(f5test.Options{})
	defer srv.Close()
	srv.AddPoolMember("web", "web-1:80", f5test.Member{})
	tok := login(t, srv)
	srv.Inject(f5test.Fault{Kind: f5test.Busy, Path: "/members/", Skip: 1, Times: 2})
	var codes []int
	for range 4 {
		code, _ := call(t, srv, "GET", member, tok, nil)
		codes = append(codes, code)
	}
	if fmt.Sprint(codes) != "[200 503 503 200]" {
		t.Errorf("codes = %v, want [200 503 503 200]", codes)
	}
	srv.Inject(f5test.Fault{Kind: f5test.ExpireToken, Method: "GET"})
	if code, _ := call(t, srv, "GET", member, tok, nil); code != 401 {
		t.Errorf("ExpireToken = %d", code)
	}
	if srv.ActiveTokens() != 0 {
		t.Error("the token outlived ExpireToken")
	}
	tok = login(t, srv)
	srv.Inject(f5test.Fault{Kind: f5test.Denied, Method: "PATCH", Times: -1})
	for range 2 {
		if code, m := call(t, srv, "PATCH", member, tok, map[string]string{"session": "user-enabled"}); code != 401 || m["message"] == "X-F5-Auth-Token does not exist." {
			t.Errorf("Denied = %d %v", code, m)
		}
	}
	srv.Clear()
	if code, _ := call(t, srv, "PATCH", member, tok, map[string]string{"session": "user-enabled"}); code != 200 {
		t.Errorf("after Clear = %d", code)
	}
	if n := srv.Count("PATCH", "/members/"); n != 3 {
		t.Errorf("Count = %d", n)
	}
}

func TestHold(t *testing.T) {
	t.Parallel()
	srv := f5test.New(f5test.Options{})
	defer srv.Close()
	srv.AddPoolMember("web", "web-1:80", f5test.Member{})
	tok := login(t, srv)
	srv.Hold("/members/", 3, time.Minute)
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("GET", srv.URL()+member, nil)
			req.Header.Set("X-F5-Auth-Token", tok)
			resp, err := srv.Client().Do(req)
			if err == nil {
				resp.Body.Close()
			}
		}()
	}
	wg.Wait() // returns only because the third request released the others
	if got := srv.MaxInFlight(); got != 3 {
		t.Errorf("MaxInFlight = %d, want 3", got)
	}
	// The hold is over: a single request is not held.
	if code, _ := call(t, srv, "GET", member, tok, nil); code != 200 {
		t.Errorf("after the hold = %d", code)
	}
	// A hold that never fills up is released after its wait.
	srv.Hold("/members/", 2, 20*time.Millisecond)
	if code, _ := call(t, srv, "GET", member, tok, nil); code != 200 {
		t.Errorf("held alone = %d", code)
	}
}
