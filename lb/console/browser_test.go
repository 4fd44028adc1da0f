package console_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/holdfast-db/holdfast/lb"
	"github.com/holdfast-db/holdfast/lb/console"
	"github.com/holdfast-db/holdfast/lb/internal/browsertest"
)

// What a person sees in a real browser (headless Chromium, through
// chromedp), with the console against the F5 and A10 fakes and a real
// PostgreSQL. Every wait is a condition on the page with a deadline.

const (
	userHeader = "X-Forwarded-User"
	pageWait   = 15 * time.Second
)

// shotDir is where the screenshots go: $HOLDFAST_LB_SCREENSHOTS (the
// Makefile's lb-screenshots target sets it to docs/), else a temporary
// directory, so that a test run does not change the repository.
func shotDir(t *testing.T) string {
	if d := os.Getenv("HOLDFAST_LB_SCREENSHOTS"); d != "" {
		return d
	}
	return t.TempDir()
}

func screenshot(t *testing.T, tab context.Context, name string) {
	t.Helper()
	// Times and random group names differ from run to run; the layout
	// does not.
	png, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	p := filepath.Join(shotDir(t), name)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s (%d bytes)", p, len(png))
}

// waitFor waits until the JavaScript expression is true on the page,
// reading it every 25 ms (through navigations, which interrupt a read).
func waitFor(t *testing.T, tab context.Context, what, expr string) {
	t.Helper()
	deadline := time.Now().Add(pageWait)
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		ctx, cancel := context.WithTimeout(tab, time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("!!("+expr+")"))
		cancel()
		if err == nil && ok {
			return
		}
		last = err
		if time.Now().After(deadline) {
			text, _ := chromedp.Run(tab, chromedp.Evaluate[string](`document.getElementById("content") ? document.getElementById("content").innerText : document.body.innerText`))
			t.Fatalf("waiting %s until %s (last error: %v)\npage text:\n%s", pageWait, what, last, text)
		}
		select {
		case <-tick.C:
		case <-tab.Done():
			t.Fatalf("waiting until %s: the tab closed", what)
		}
	}
}

func eval[T any](t *testing.T, tab context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(tab, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

func navigate(t *testing.T, tab context.Context, url string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, pageWait)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("navigate %s: %v", url, err)
	}
}

// click clicks the element with the mouse, as a person would. The page
// reloads its content every few hundred milliseconds, so the element found
// may be replaced before the click reaches it: that attempt fails before
// any mouse event is sent, and the click is tried again on the new one.
func click(t *testing.T, tab context.Context, css string) {
	t.Helper()
	deadline := time.Now().Add(pageWait)
	for {
		ctx, cancel := context.WithTimeout(tab, 5*time.Second)
		err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(css)))
		cancel()
		if err == nil {
			return
		}
		stale := strings.Contains(err.Error(), "Could not find node") || strings.Contains(err.Error(), "No node with given id") || strings.Contains(err.Error(), "not attached")
		if !stale || time.Now().After(deadline) {
			t.Fatalf("click %s: %v", css, err)
		}
	}
}

// js quotes s as a JavaScript string.
func js(s string) string { b, _ := json.Marshal(s); return string(b) }

// Page queries, in JavaScript.
func groupSel(g string) string { return `[data-group=` + js(g) + `]` }

func textOf(sel string) string {
	return `((document.querySelector(` + js(sel) + `) || {}).textContent || "").trim()`
}

func connsOf(g, member string) string {
	return textOf(groupSel(g) + ` tr[data-member="` + member + `"] [data-role=conns]`)
}

// A drain that another operator started (carol, from the command line or
// a pipeline) shows up in alice's browser as Disabling, locked by carol,
// with the connections falling poll after poll, then as Disabled.
func TestBrowserShowsAnotherOperatorsDrain(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{identity: console.Identity{Header: userHeader}})
	// Forced offline, web-1 keeps 9 connections, web-2 4, until the test
	// lets them go; app-1 (A10) has none left at once.
	e.f5.SetConns("web", "web-1:443", 12, 9)
	e.f5.SetConns("web", "web-2:443", 7, 4)

	browser := browsertest.New(t, 1360, 820)
	tab := browsertest.Tab(t, browser, map[string]string{userHeader: "alice"})
	navigate(t, tab, e.srv.URL+"/")
	pay := groupSel(e.pay)
	waitFor(t, tab, "the group shows Enabled with 12 connections on web-1",
		textOf(pay+` [data-role=group-phase]`)+` === "Enabled" && `+connsOf(e.pay, "web/web-1:443")+` === "12"`)
	if got := eval[string](t, tab, `document.getElementById("operator").textContent`); got != "alice" {
		t.Errorf("signed in as %q, want alice", got)
	}

	// carol drains the group with a controller of her own.
	ctrl, err := e.controller()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := ctrl.Do(ctx, lb.Request{Operator: "carol", Action: lb.ActionDrain, Group: e.pay})
		done <- err
	}()

	waitFor(t, tab, "the group shows Disabling, locked by carol, web-1 at 9 connections",
		textOf(pay+` [data-role=group-phase]`)+` === "Disabling" && `+
			textOf(pay+` [data-role=holder]`)+` === "carol" && `+
			connsOf(e.pay, "web/web-1:443")+` === "9" && `+
			textOf(pay+` tr[data-member="web/web-1:443"] [data-role=phase]`)+` === "Disabling"`)
	if got := eval[string](t, tab, textOf(pay+` [data-role=running]`)); !strings.Contains(got, "drain by carol") {
		t.Errorf("running line = %q, want the drain by carol", got)
	}
	if got := eval[string](t, tab, textOf(pay+` [data-role=lock]`)); !strings.Contains(got, "locked by carol@ci-7 since") {
		t.Errorf("lock line = %q", got)
	}
	screenshot(t, tab, "lb-console-draining.png")

	// The connections fall, and the page follows.
	seen := []int{9}
	for _, n := range []int64{5, 1} {
		e.f5.SetConns("web", "web-1:443", 12, n)
		waitFor(t, tab, "web-1 shows "+strconv.FormatInt(n, 10)+" connections", connsOf(e.pay, "web/web-1:443")+` === "`+strconv.FormatInt(n, 10)+`"`)
		got, _ := strconv.Atoi(eval[string](t, tab, connsOf(e.pay, "web/web-1:443")))
		seen = append(seen, got)
		if phase := eval[string](t, tab, textOf(pay+` [data-role=group-phase]`)); phase != "Disabling" {
			t.Errorf("at %d connections the group shows %q, want Disabling", n, phase)
		}
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] >= seen[i-1] {
			t.Errorf("connections seen %v, want them falling", seen)
		}
	}

	// Gone: the drain ends, the lock is released, the request is audited.
	e.f5.SetConns("web", "web-1:443", 12, 0)
	e.f5.SetConns("web", "web-2:443", 7, 0)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("carol's drain: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("carol's drain did not end")
	}
	waitFor(t, tab, "the group shows Disabled, not locked, and carol's drain ok",
		textOf(pay+` [data-role=group-phase]`)+` === "Disabled" && `+
			textOf(pay+` [data-role=lock]`)+` === "not locked" && `+
			`(function(){ var r = document.querySelector(`+js(pay+` table.audit tbody tr`)+`); return !!r && r.textContent.indexOf("carol") >= 0 && r.textContent.indexOf("drain") >= 0 && r.querySelector(".result").textContent === "ok"; })()`)
}

// Controls are shown only for the groups the operator may control; the
// console refuses (and audits) a forged post for the others; a request
// without an operator sees no control at all.
func TestBrowserShowsControlsOnlyWherePermitted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{identity: console.Identity{Header: userHeader}})
	browser := browsertest.New(t, 1360, 760)
	tab := browsertest.Tab(t, browser, map[string]string{userHeader: "alice"})
	navigate(t, tab, e.srv.URL+"/")
	pay, search := groupSel(e.pay), groupSel(e.search)
	waitFor(t, tab, "both groups read", textOf(pay+` [data-role=group-phase]`)+` === "Enabled" && `+textOf(search+` [data-role=group-phase]`)+` === "Enabled"`)

	buttons := func(sel string) []string {
		return eval[[]string](t, tab, `Array.from(document.querySelectorAll(`+js(sel+` button`)+`)).map(function(b){ return b.getAttribute("data-action"); })`)
	}
	if got := buttons(pay); strings.Join(got, ",") != "disable,forced-offline,drain,enable" {
		t.Errorf("alice's buttons on %s = %v, want the four controls", e.pay, got)
	}
	if got := buttons(search); len(got) != 0 {
		t.Errorf("alice sees buttons %v on %s, which she may not control", got, e.search)
	}
	if got := eval[string](t, tab, textOf(search+` [data-role=no-controls]`)); got != "alice may not control this group" {
		t.Errorf("search says %q", got)
	}
	screenshot(t, tab, "lb-console-overview.png")

	// A forged post from alice's page is refused, audited, and changes
	// nothing.
	status := eval[int](t, tab, `fetch("/groups/`+e.search+`/drain", {method: "POST", headers: {"Accept": "application/json"}}).then(function(r){ return r.status; })`)
	if status != 403 {
		t.Errorf("forged drain of %s answered %d, want 403", e.search, status)
	}
	entries, err := e.store.Entries(context.Background(), e.search, 0)
	if err != nil || len(entries) != 1 || entries[0].Result != lb.ResultRefused || entries[0].Operator != "alice" {
		t.Errorf("audit of %s = %+v, %v; want one refused request by alice", e.search, entries, err)
	}
	if st, _ := e.f5.NodeState("idx-1"); st.Session != "user-enabled" {
		t.Errorf("idx-1 = %+v, want untouched", st)
	}

	// The group's own page: per-node controls for alice on pay only.
	navigate(t, tab, e.srv.URL+"/groups/"+e.pay)
	waitFor(t, tab, "per-node controls", `document.querySelectorAll(`+js(pay+` td.nodectl button`)+`).length === 12`)
	navigate(t, tab, e.srv.URL+"/groups/"+e.search)
	waitFor(t, tab, "the search page", textOf(search+` [data-role=group-phase]`)+` === "Enabled"`)
	if n := eval[int](t, tab, `document.querySelectorAll("button").length`); n != 0 {
		t.Errorf("alice sees %d buttons on the page of %s", n, e.search)
	}

	// No operator header: read-only.
	anon := browsertest.Tab(t, browser, nil)
	navigate(t, anon, e.srv.URL+"/")
	waitFor(t, anon, "the read-only page", textOf(pay+` [data-role=group-phase]`)+` === "Enabled"`)
	if n := eval[int](t, anon, `document.querySelectorAll("button").length`); n != 0 {
		t.Errorf("a request without an operator sees %d buttons", n)
	}
	if got := eval[string](t, anon, textOf("#readonly-reason")); !strings.Contains(got, "not signed in (no "+userHeader+" header") {
		t.Errorf("read-only reason = %q", got)
	}
}

// A lock taken in one tab (alice's drain, which holds the group's lock
// while connections remain) is refused in another (dave's enable), and
// the refusal names the holder. Once the drain is done, dave can enable.
func TestBrowserLockRefusedInAnotherTab(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{identity: console.Identity{Header: userHeader}})
	e.f5.SetConns("web", "web-1:443", 12, 6)
	browser := browsertest.New(t, 1360, 900)
	alice := browsertest.Tab(t, browser, map[string]string{userHeader: "alice"})
	dave := browsertest.Tab(t, browser, map[string]string{userHeader: "dave"})
	dialogs := browsertest.AcceptDialogs(t, alice)
	pay := groupSel(e.pay)
	controls := pay + ` [data-role=controls] `

	navigate(t, alice, e.srv.URL+"/groups/"+e.pay)
	waitFor(t, alice, "alice's page", textOf(pay+` [data-role=group-phase]`)+` === "Enabled"`)
	click(t, alice, controls+`button[data-action=drain]`)
	waitFor(t, alice, "alice's drain runs, holding the lock",
		`location.search.indexOf("audit=") >= 0 && !!document.querySelector("#request[data-state=running]") && `+
			textOf(pay+` [data-role=holder]`)+` === "alice"`)
	if msgs := dialogs.Messages(); len(msgs) != 1 || !strings.Contains(msgs[0], "Drain every member of "+e.pay) {
		t.Errorf("confirm dialogs = %q, want one asking to drain %s", msgs, e.pay)
	}

	navigate(t, dave, e.srv.URL+"/groups/"+e.pay)
	waitFor(t, dave, "dave sees alice's lock", textOf(pay+` [data-role=holder]`)+` === "alice"`)
	click(t, dave, controls+`button[data-action=enable]`)
	waitFor(t, dave, "dave's enable refused, naming alice",
		`!!document.querySelector("#request[data-result=locked]") && `+textOf("#request-error")+`.indexOf("is locked by alice@ci-7 since") >= 0`)
	screenshot(t, dave, "lb-console-lock-refused.png")
	if st, _ := e.f5.MemberState("web", "web-1:443"); st.State != "user-down" {
		t.Errorf("web-1 = %+v after the refused enable, want still forced offline", st)
	}

	// alice's drain ends; dave may enable now.
	e.f5.SetConns("web", "web-1:443", 12, 0)
	waitFor(t, alice, "alice's drain ok", `!!document.querySelector("#request[data-result=ok]") && `+textOf(pay+` [data-role=lock]`)+` === "not locked"`)
	waitFor(t, dave, "dave sees the lock free", textOf(pay+` [data-role=lock]`)+` === "not locked"`)
	click(t, dave, controls+`button[data-action=enable]`)
	waitFor(t, dave, "dave's enable ok, every member Enabled",
		`!!document.querySelector("#request[data-result=ok]") && `+textOf(pay+` [data-role=group-phase]`)+` === "Enabled"`)
	entries, err := e.store.Entries(context.Background(), e.pay, 0)
	if err != nil || len(entries) != 3 {
		t.Fatalf("audit = %+v, %v", entries, err)
	}
	want := []string{"dave enable ok", "dave enable locked", "alice drain ok"}
	for i, en := range entries {
		if got := en.Operator + " " + string(en.Action) + " " + string(en.Result); got != want[i] {
			t.Errorf("audit entry %d = %q, want %q", i, got, want[i])
		}
	}
}
