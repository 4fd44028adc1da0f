package console_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/lb"
	"github.com/holdfast-db/holdfast/lb/console"
)

type page struct {
	Operator string `json:"operator"`
	ReadOnly string `json:"read_only"`
	Totals   struct {
		Enabled, Disabling, Disabled, Unknown int
	} `json:"totals"`
	Groups []struct {
		Name       string `json:"name"`
		Phase      string `json:"phase"`
		MayControl bool   `json:"may_control"`
		Holder     *struct {
			Owner string    `json:"owner"`
			Since time.Time `json:"since"`
		} `json:"holder"`
		Members []struct {
			Member      string `json:"member"`
			Phase       string `json:"phase"`
			Admin       string `json:"admin"`
			Connections *int64 `json:"connections"`
		} `json:"members"`
		Audit []struct {
			ID       int64  `json:"id"`
			Operator string `json:"operator"`
			Action   string `json:"action"`
			Result   string `json:"result"`
		} `json:"audit"`
	} `json:"groups"`
}

type answer struct {
	AuditID  int64  `json:"audit_id"`
	Result   string `json:"result"`
	Error    string `json:"error"`
	Location string `json:"location"`
	Holder   *struct {
		Owner string `json:"owner"`
	} `json:"holder"`
}

func get(t *testing.T, e *env, path, user string, v any) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+path, nil)
	req.Header.Set("Accept", "application/json")
	if user != "" {
		req.Header.Set(userHeader, user)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("GET %s: %v\n%s", path, err, b)
		}
	}
	return resp.StatusCode
}

func post(t *testing.T, e *env, path, user, body string, v any) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Content-Type", "application/json")
	if user != "" {
		req.Header.Set(userHeader, user)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("POST %s: %v\n%s", path, err, b)
		}
	}
	return resp.StatusCode
}

func (p *page) group(name string) int {
	for i, g := range p.Groups {
		if g.Name == name {
			return i
		}
	}
	return -1
}

// The JSON API: what the page shows, and the controls with their HTTP
// status, for scripts.
func TestJSONAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{identity: console.Identity{Header: userHeader}})
	e.f5.SetConns("web", "web-1:443", 12, 4)

	var p page
	if code := get(t, e, "/", "alice", &p); code != 200 {
		t.Fatalf("GET / = %d", code)
	}
	pi, si := p.group(e.pay), p.group(e.search)
	if p.Operator != "alice" || pi < 0 || si < 0 || !p.Groups[pi].MayControl || p.Groups[si].MayControl {
		t.Fatalf("page = %+v", p)
	}
	if g := p.Groups[pi]; g.Phase != "Enabled" || len(g.Members) != 3 || *g.Members[0].Connections != 12 || g.Holder != nil {
		t.Errorf("pay = %+v", g)
	}

	tests := []struct {
		name, user, path, body string
		code                   int
		result                 string
	}{
		{"drain waits for the result", "alice", "/groups/" + e.pay + "/drain", `{"nodes": ["web-2", "app-1"], "wait": true}`, 200, "ok"},
		{"not permitted", "alice", "/groups/" + e.search + "/disable", ``, 403, "refused"},
		{"unknown node", "alice", "/groups/" + e.pay + "/enable", `{"nodes": ["nope"]}`, 400, "invalid"},
		{"not drained", "alice", "/groups/" + e.pay + "/drain", `{"nodes": ["web-1"], "wait": true}`, 412, "not-drained"},
		{"enable", "alice", "/groups/" + e.pay + "/enable", ``, 200, "ok"},
	}
	e.drainTimeout(t, 300*time.Millisecond)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var a answer
			code := post(t, e, tt.path, tt.user, tt.body, &a)
			if code != tt.code || a.Result != tt.result || a.AuditID == 0 {
				t.Fatalf("POST %s = %d %+v, want %d %s with an audit id", tt.path, code, a, tt.code, tt.result)
			}
			if a.Location == "" {
				t.Errorf("no location: %+v", a)
			}
		})
	}

	for _, tt := range []struct {
		name, user, path, body string
		code                   int
	}{
		{"no operator", "", "/groups/" + e.pay + "/drain", ``, 403},
		{"unknown action", "alice", "/groups/" + e.pay + "/reboot", ``, 404},
		{"unknown group", "alice", "/groups/nope/drain", ``, 404},
		{"bad body", "alice", "/groups/" + e.pay + "/drain", `{"node": "web-1"}`, 400},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var a map[string]any
			if code := post(t, e, tt.path, tt.user, tt.body, &a); code != tt.code || a["error"] == "" {
				t.Errorf("POST %s = %d %v, want %d with an error", tt.path, code, a, tt.code)
			}
		})
	}
	// Refusals made no request to the balancers; the audit has them all.
	entries, err := e.store.Entries(context.Background(), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, en := range entries {
		if en.Group == e.pay || en.Group == e.search {
			n++
		}
	}
	if n != 5 {
		t.Errorf("%d audit entries, want the 5 control requests", n)
	}
}

// drainTimeout shortens the drain bound of the controls to come.
func (e *env) drainTimeout(t *testing.T, d time.Duration) {
	t.Helper()
	d2 := *e.drain.Load()
	d2.Timeout = d
	e.drain.Store(&d2)
}

// A second request on a locked group is refused at once with the holder,
// and the page of the request (303 to ?audit=N) shows the refusal.
func TestLockedAnswer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{identity: console.Identity{Header: userHeader}})
	lease, err := e.store.WithHost("ci-9").Lock(context.Background(), e.pay, "carol")
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(context.Background())
	var a answer
	if code := post(t, e, "/groups/"+e.pay+"/enable", "alice", ``, &a); code != 409 || a.Result != "locked" || a.Holder == nil || a.Holder.Owner != "carol" || !strings.Contains(a.Error, "locked by carol@ci-9") {
		t.Fatalf("POST = %d %+v", code, a)
	}
	// A browser form: post, redirect, get.
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/groups/"+e.pay+"/enable", strings.NewReader(url.Values{}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set(userHeader, "alice")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/groups/"+e.pay+"?audit=") {
		t.Fatalf("form post = %d, Location %q", resp.StatusCode, loc)
	}
	req, _ = http.NewRequest(http.MethodGet, e.srv.URL+loc, nil)
	req.Header.Set(userHeader, "alice")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `data-result="locked"`) || !strings.Contains(string(b), "is locked by carol@ci-9 since") {
		t.Errorf("the request's page does not show the refusal:\n%s", b)
	}
}

// The operator header counts only from trusted proxies; a cross-site form
// post is refused; pages cannot be framed.
func TestIdentityAndCrossSite(t *testing.T) {
	t.Parallel()
	// 192.0.2.1 is no address of this machine: the loopback client is untrusted.
	e := newEnv(t, envOpts{identity: console.Identity{Header: userHeader, TrustedProxies: []netip.Prefix{netip.MustParsePrefix("192.0.2.1/32")}}})
	var p page
	get(t, e, "/", "alice", &p)
	if p.Operator != "" || !strings.Contains(p.ReadOnly, "not a trusted proxy") {
		t.Errorf("untrusted header: operator %q, read-only %q", p.Operator, p.ReadOnly)
	}

	e2 := newEnv(t, envOpts{identity: console.Identity{Fixed: "alice"}})
	req, _ := http.NewRequest(http.MethodPost, e2.srv.URL+"/groups/"+e2.pay+"/drain", strings.NewReader(""))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.Header.Set("Origin", "https://evil.example")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site post = %d, want 403", resp.StatusCode)
	}
	if n := len(e2.f5.Requests()) + len(e2.a10.Requests()); n > 0 {
		// Only the monitor's reads.
		for _, r := range e2.f5.Requests() {
			if r.Method == http.MethodPatch {
				t.Errorf("the cross-site post changed a member: %s %s", r.Method, r.Path)
			}
		}
	}
	resp, err = http.Get(e2.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("X-Frame-Options") != "DENY" || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Errorf("headers = %v", resp.Header)
	}
	var p2 page
	get(t, e2, "/", "", &p2)
	if p2.Operator != "alice" {
		t.Errorf("fixed operator = %q", p2.Operator)
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	ok := console.Config{Groups: e.groups, Status: e.monitor, Store: e.store, NewController: e.controller}
	tests := []struct {
		name string
		edit func(*console.Config)
	}{
		{"no groups", func(c *console.Config) { c.Groups = nil }},
		{"no status", func(c *console.Config) { c.Status = nil }},
		{"no store", func(c *console.Config) { c.Store = nil }},
		{"no controller", func(c *console.Config) { c.NewController = nil }},
		{"negative poll", func(c *console.Config) { c.Poll = -1 }},
		{"header and fixed", func(c *console.Config) { c.Identity = console.Identity{Header: userHeader, Fixed: "alice"} }},
		{"bad header", func(c *console.Config) { c.Identity = console.Identity{Header: "X User"} }},
		{"bad operator", func(c *console.Config) { c.Identity = console.Identity{Fixed: "al\nice"} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.edit(&c)
			if _, err := console.New(c); !errors.Is(err, lb.ErrInvalidConfig) {
				t.Errorf("New = %v, want a *lb.ConfigError", err)
			}
		})
	}
}

// Close waits for a drain in progress, up to its context, then cancels
// it; the drain is audited as canceled and its goroutine is gone.
func TestCloseCancelsControlsInProgress(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{identity: console.Identity{Fixed: "alice"}})
	e.f5.SetConns("web", "web-1:443", 12, 5) // never drains
	var a answer
	if code := post(t, e, "/groups/"+e.pay+"/drain", "", ``, &a); code != 202 || a.Result != "running" {
		t.Fatalf("POST = %d %+v", code, a)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := e.con.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close = %v, want the deadline (the drain was still running)", err)
	}
	en, err := e.store.Entry(context.Background(), a.AuditID)
	if err != nil || en == nil || en.Result != lb.ResultCanceled {
		t.Errorf("audit entry = %+v, %v; want canceled", en, err)
	}
	if code := post(t, e, "/groups/"+e.pay+"/enable", "", ``, &a); code != 503 {
		t.Errorf("a control after Close = %d, want 503", code)
	}
}
