package a10test_test

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

func call(t *testing.T, srv *a10test.Server, method, path, sig string, body any) (int, map[string]any) {
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
	if sig != "" {
		req.Header.Set("Authorization", "A10 "+sig)
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

func auth(t *testing.T, srv *a10test.Server) string {
	t.Helper()
	code, m := call(t, srv, "POST", "/axapi/v3/auth", "", map[string]any{"credentials": map[string]string{"username": a10test.DefaultUsername, "password": a10test.DefaultPassword}})
	ar, _ := m["authresponse"].(map[string]any)
	if code != 200 || ar["signature"] == "" {
		t.Fatalf("auth = %d %v", code, m)
	}
	return ar["signature"].(string)
}

// dig follows keys through nested maps.
func dig(m map[string]any, keys ...string) any {
	var v any = m
	for _, k := range keys {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[k]
	}
	return v
}

func TestAuthAnswers(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Unix(1_700_000_000, 0)}
	srv := a10test.New(a10test.Options{Now: clk.Now, IdleTimeout: time.Minute})
	defer srv.Close()
	srv.AddServer("app-1", a10test.Real{})
	code, m := call(t, srv, "POST", "/axapi/v3/auth", "", map[string]any{"credentials": map[string]string{"username": "admin", "password": "x"}})
	if code != 403 || dig(m, "authorizationschema", "error") != "Incorrect user name or password" || dig(m, "authorizationschema", "code") != float64(403) {
		t.Errorf("bad credentials = %d %v", code, m)
	}
	sig := auth(t, srv)
	if code, _ := call(t, srv, "GET", "/axapi/v3/slb/server/app-1", sig, nil); code != 200 {
		t.Errorf("GET = %d", code)
	}
	clk.Add(59 * time.Second) // within the idle timeout, and the call resets it
	if code, _ := call(t, srv, "GET", "/axapi/v3/version/oper", sig, nil); code != 200 {
		t.Errorf("keep-alive = %d", code)
	}
	clk.Add(61 * time.Second)
	code, m = call(t, srv, "GET", "/axapi/v3/slb/server/app-1", sig, nil)
	if code != 401 || dig(m, "authorizationschema", "error") != "Invalid admin session." {
		t.Errorf("idle session = %d %v", code, m)
	}
	sig = auth(t, srv)
	if code, m := call(t, srv, "POST", "/axapi/v3/logoff", sig, nil); code != 200 || dig(m, "response", "status") != "OK" {
		t.Errorf("logoff = %d %v", code, m)
	}
	if code, _ := call(t, srv, "GET", "/axapi/v3/slb/server/app-1", sig, nil); code != 401 {
		t.Errorf("after logoff = %d", code)
	}
	if srv.Logins() != 2 || srv.ActiveSessions() != 0 {
		t.Errorf("Logins %d, ActiveSessions %d", srv.Logins(), srv.ActiveSessions())
	}
}

func TestServerActionOperAndStats(t *testing.T) {
	t.Parallel()
	srv := a10test.New(a10test.Options{})
	defer srv.Close()
	srv.AddServer("app-1", a10test.Real{Conns: 9, Decay: []int64{2, 0}, Ports: []a10test.Port{{Number: 80, Conns: 4, Decay: []int64{1}}}})
	sig := auth(t, srv)
	const base = "/axapi/v3/slb/server/app-1"
	code, m := call(t, srv, "POST", base, sig, map[string]any{"server": map[string]string{"action": "disable"}})
	if code != 200 || dig(m, "server", "action") != "disable" || dig(m, "server", "stats-data-action") != "stats-data-enable" {
		t.Errorf("POST = %d %v", code, m)
	}
	if _, m := call(t, srv, "GET", base+"/oper", sig, nil); dig(m, "server", "oper", "state") != "Disabled" {
		t.Errorf("oper = %v", m)
	}
	var got []any
	for range 3 {
		_, m := call(t, srv, "GET", base+"/stats", sig, nil)
		got = append(got, dig(m, "server", "stats", "curr-conn"))
	}
	code, m = call(t, srv, "POST", base+"/port/80+tcp", sig, map[string]any{"port": map[string]any{"port-number": 80, "protocol": "tcp", "action": "disable"}})
	if code != 200 || dig(m, "port", "action") != "disable" {
		t.Errorf("port POST = %d %v", code, m)
	}
	_, m = call(t, srv, "GET", base+"/port/80+tcp/stats", sig, nil)
	got = append(got, dig(m, "port", "stats", "curr_conn"))
	if fmt.Sprint(got) != "[2 0 0 1]" {
		t.Errorf("connections = %v, want [2 0 0 1] (curr-conn on the server, curr_conn on the port)", got)
	}
	if code, m := call(t, srv, "POST", base, sig, map[string]any{"server": map[string]string{"action": "sideways"}}); code != 400 || dig(m, "response", "status") != "fail" {
		t.Errorf("invalid action = %d %v", code, m)
	}
	code, m = call(t, srv, "GET", "/axapi/v3/slb/server/nope", sig, nil)
	if code != 404 || dig(m, "response", "err", "code") != float64(a10test.CodeNotFound) {
		t.Errorf("unknown server = %d %v", code, m)
	}
}

func TestStatsDisabledReadsZero(t *testing.T) {
	t.Parallel()
	srv := a10test.New(a10test.Options{})
	defer srv.Close()
	srv.AddServer("app-1", a10test.Real{Conns: 9, StatsDisabled: true})
	sig := auth(t, srv)
	_, m := call(t, srv, "GET", "/axapi/v3/slb/server/app-1/stats", sig, nil)
	if dig(m, "server", "stats", "curr-conn") != float64(0) {
		t.Errorf("stats = %v, want 0 with 9 real connections", m)
	}
	_, m = call(t, srv, "GET", "/axapi/v3/slb/server/app-1", sig, nil)
	if dig(m, "server", "stats-data-action") != "stats-data-disable" {
		t.Errorf("object = %v", m)
	}
	srv.SetStatsDisabled("app-1", false)
	_, m = call(t, srv, "GET", "/axapi/v3/slb/server/app-1/stats", sig, nil)
	if dig(m, "server", "stats", "curr-conn") != float64(9) {
		t.Errorf("stats = %v, want 9", m)
	}
}

func TestPutReplacesTheObject(t *testing.T) {
	t.Parallel()
	srv := a10test.New(a10test.Options{})
	defer srv.Close()
	srv.AddServer("app-1", a10test.Real{Ports: []a10test.Port{{Number: 80}}})
	sig := auth(t, srv)
	call(t, srv, "PUT", "/axapi/v3/slb/server/app-1", sig, map[string]any{"server": map[string]string{"action": "disable"}})
	if _, ok := srv.Action("app-1", 80); ok {
		t.Error("a partial PUT kept the port list; ACOS replaces the object")
	}
}

func TestPartitions(t *testing.T) {
	t.Parallel()
	srv := a10test.New(a10test.Options{Partitions: []string{"p1"}})
	defer srv.Close()
	srv.AddServer("app-1", a10test.Real{Partition: "p1"})
	sig := auth(t, srv)
	if code, _ := call(t, srv, "GET", "/axapi/v3/slb/server/app-1", sig, nil); code != 404 {
		t.Errorf("in shared = %d, want 404", code)
	}
	if code, _ := call(t, srv, "POST", "/axapi/v3/active-partition/nope", sig, nil); code != 404 {
		t.Errorf("unknown partition = %d", code)
	}
	if code, _ := call(t, srv, "POST", "/axapi/v3/active-partition/p1", sig, nil); code != 200 {
		t.Errorf("activate p1 = %d", code)
	}
	if code, _ := call(t, srv, "GET", "/axapi/v3/slb/server/app-1", sig, nil); code != 200 {
		t.Errorf("in p1 = %d", code)
	}
	if a, ok := srv.Action("app-1", 0, "p1"); !ok || a != "enable" {
		t.Errorf("Action = %q, %v", a, ok)
	}
}

func TestFaults(t *testing.T) {
	t.Parallel()
	srv := a10test.New(a10test.Options{})
	defer srv.Close()
	srv.AddServer("app-1", a10test.Real{})
	sig := auth(t, srv)
	tests := []struct {
		kind   a10test.FaultKind
		status int
		code   float64
	}{
		{a10test.Busy, 400, a10test.CodeSystemBusy},
		{a10test.Denied, 400, a10test.CodeNoPrivilege},
		{a10test.NotFound, 404, a10test.CodeNotFound},
		{a10test.ServerError, 500, 0},
	}
	for _, tt := range tests {
		srv.Inject(a10test.Fault{Kind: tt.kind, Path: "/slb/"})
		code, m := call(t, srv, "GET", "/axapi/v3/slb/server/app-1", sig, nil)
		if code != tt.status || dig(m, "response", "err", "code") != tt.code {
			t.Errorf("fault %d = %d %v", tt.kind, code, m)
		}
	}
	srv.Inject(a10test.Fault{Kind: a10test.ExpireSession})
	if code, _ := call(t, srv, "GET", "/axapi/v3/slb/server/app-1", sig, nil); code != 401 {
		t.Errorf("ExpireSession = %d", code)
	}
	if code, _ := call(t, srv, "GET", "/axapi/v3/slb/server/app-1", sig, nil); code != 401 {
		t.Errorf("the session came back after ExpireSession")
	}
}
