package lb_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/lb"
	"github.com/holdfast-db/holdfast/lb/a10/a10test"
	"github.com/holdfast-db/holdfast/lb/f5/f5test"
)

// env is a controller over one fake F5 ("f5") and one fake A10 ("a10"),
// with its lock and audit trail in PostgreSQL.
type env struct {
	f5    *f5test.Server
	a10   *a10test.Server
	store *lb.PGStore
	logs  *syncBuffer
	ctrl  *lb.Controller
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// lines returns the JSON log lines.
func (s *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

type envOpts struct {
	groups      map[string][]lb.Target
	perms       lb.Permissions
	drain       lb.DrainConfig
	concurrency int
	locker      lb.Locker
	audit       lb.AuditLog
	notifier    lb.Notifier
	metrics     *lb.Metrics
}

func newEnv(t *testing.T, o envOpts) *env {
	t.Helper()
	e := &env{logs: &syncBuffer{}}
	var f5c, a10c lb.Balancer
	e.f5, f5c = newF5(t, f5test.Options{})
	e.a10, a10c = newA10(t, a10test.Options{})
	e.store, _ = newStore(t)
	if o.drain == (lb.DrainConfig{}) {
		o.drain = fast
	}
	var locker lb.Locker = e.store
	if o.locker != nil {
		locker = o.locker
	}
	var audit lb.AuditLog = e.store
	if o.audit != nil {
		audit = o.audit
	}
	ctrl, err := lb.NewController(lb.ControllerConfig{
		Balancers:   map[string]lb.Balancer{"f5": f5c, "a10": a10c},
		Groups:      o.groups,
		Permissions: o.perms,
		Locker:      locker,
		Audit:       audit,
		Logger:      slog.New(slog.NewJSONHandler(e.logs, nil)),
		Drain:       o.drain,
		Concurrency: o.concurrency,
		Host:        "test-host",
		Notifier:    o.notifier,
		Metrics:     o.metrics,
	})
	if err != nil {
		t.Fatalf("NewController: %v", err)
	}
	e.ctrl = ctrl
	t.Cleanup(func() {
		// Logout on every exit path: no session is left open.
		if n := e.f5.ActiveTokens(); n != 0 {
			t.Errorf("%d F5 tokens left open", n)
		}
		if n := e.a10.ActiveSessions(); n != 0 {
			t.Errorf("%d A10 sessions left open", n)
		}
	})
	return e
}

func (e *env) entries(t *testing.T, group string) []lb.Entry {
	t.Helper()
	got, err := e.store.Entries(context.Background(), group, 0)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func (e *env) requests() int { return len(e.f5.Requests()) + len(e.a10.Requests()) }

// uniq returns a group name of its own, so that reruns (-count) and a
// shared PGTEST_DSN database do not see each other's locks and audit rows.
func uniq(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

func f5Member(pool, node string, port int) lb.Target {
	return lb.Target{Balancer: "f5", Member: lb.Member{Pool: pool, Node: node, Port: port}}
}

func TestControllerDrainsAGroupAndAuditsIt(t *testing.T) {
	t.Parallel()
	group := uniq("ctl-drain-ok")
	e := newEnv(t, envOpts{
		groups: map[string][]lb.Target{group: {
			f5Member("web", "web-1", 80), f5Member("web", "web-2", 80),
			{Balancer: "a10", Member: lb.Member{Node: "app-1", Port: 8080}},
		}},
		perms: lb.Permissions{"alice": {group}},
	})
	e.f5.AddPoolMember("web", "web-1:80", f5test.Member{Conns: 9, Decay: []int64{5, 3, 0}, Monitor: true})
	e.f5.AddPoolMember("web", "web-2:80", f5test.Member{Conns: 2, Decay: []int64{1, 0}})
	e.a10.AddServer("app-1", a10test.Real{Ports: []a10test.Port{{Number: 8080, Conns: 6, Decay: []int64{4, 1, 0}}}})

	var progress []lb.Progress
	out, err := e.ctrl.Do(context.Background(), lb.Request{Operator: "alice", Action: lb.ActionDrain, Group: group, Progress: func(p lb.Progress) { progress = append(progress, p) }})
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if out.Entry.Result != lb.ResultOK || out.Entry.ID == 0 {
		t.Fatalf("entry = %+v", out.Entry)
	}
	last := progress[len(progress)-1]
	if last.Remaining != 0 || last.InUse != 0 || last.Total != 3 {
		t.Errorf("last progress = %+v, want nothing left", last)
	}
	if first := progress[0]; first.Remaining != 3 || first.InUse < 1 {
		t.Errorf("first progress = %+v, want 3 members in use", first)
	}

	// The audit row matches what happened, member by member.
	entries := e.entries(t, group)
	if len(entries) != 1 {
		t.Fatalf("%d audit rows, want 1 (started, then updated)", len(entries))
	}
	got := entries[0]
	if got.ID != out.Entry.ID || got.Operator != "alice" || got.Host != "test-host" || got.Action != lb.ActionDrain || got.Result != lb.ResultOK || got.Error != "" {
		t.Errorf("audit entry = %+v", got)
	}
	if fmt.Sprint(got.Nodes) != "[f5 web/web-1:80 f5 web/web-2:80 a10 app-1:8080]" {
		t.Errorf("nodes = %q", got.Nodes)
	}
	want := []lb.MemberRecord{
		{Balancer: "f5", Member: "web/web-1:80", Before: "enabled", After: "forced-offline", ConnsBefore: 9, FirstConns: 5, ConnsAfter: 0, Polls: 3, Drained: true, Changed: true},
		{Balancer: "f5", Member: "web/web-2:80", Before: "enabled", After: "forced-offline", ConnsBefore: 2, FirstConns: 1, ConnsAfter: 0, Polls: 2, Drained: true, Changed: true},
		{Balancer: "a10", Member: "app-1:8080", Before: "enabled", After: "forced-offline", ConnsBefore: 6, FirstConns: 4, ConnsAfter: 0, Polls: 3, Drained: true, Changed: true},
	}
	for i, w := range want {
		g := got.Members[i]
		g.DurationMS = 0
		if g != w {
			t.Errorf("member %d = %+v\nwant       %+v", i, g, w)
		}
	}
	// The log lines: start and result, with the same audit id.
	lines := e.logs.lines(t)
	if len(lines) != 2 || lines[0]["msg"] != "lb control started" || lines[1]["msg"] != "lb control" {
		t.Fatalf("log lines = %v", lines)
	}
	if lines[1]["result"] != "ok" || lines[1]["operator"] != "alice" || lines[1]["group"] != group || lines[1]["audit_id"] != float64(out.Entry.ID) {
		t.Errorf("result line = %v", lines[1])
	}
	if ms, _ := lines[1]["members"].([]any); len(ms) != 3 {
		t.Errorf("members in the log line = %v", lines[1]["members"])
	}
	// The lock was released.
	if h, err := e.store.Holder(context.Background(), group); err != nil || h != nil {
		t.Errorf("holder after the drain = %+v, %v", h, err)
	}

	// After the deploy: enable.
	out, err = e.ctrl.Do(context.Background(), lb.Request{Operator: "alice", Action: lb.ActionEnable, Group: group})
	if err != nil || out.Entry.Result != lb.ResultOK {
		t.Fatalf("enable: %v (%s)", err, out.Entry.Result)
	}
	if st, _ := e.f5.MemberState("web", "web-1:80"); st != (f5test.State{Session: "user-enabled", State: "user-up"}) {
		t.Errorf("web-1 after enable = %+v", st)
	}
	if a, _ := e.a10.Action("app-1", 8080); a != "enable" {
		t.Errorf("app-1:8080 after enable = %q", a)
	}
	entries = e.entries(t, group)
	if len(entries) != 2 || entries[0].Action != lb.ActionEnable || entries[0].Members[0].Before != "forced-offline" || entries[0].Members[0].After != "enabled" {
		t.Errorf("enable audit = %+v", entries[0])
	}
}

func TestControllerDrainTimeout(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		restore   bool
		wantState f5test.State
		wantAfter string
	}{
		{"left forced offline", false, f5test.State{Session: "user-disabled", State: "user-down"}, "forced-offline"},
		{"restored on failure", true, f5test.State{Session: "user-enabled", State: "user-up"}, "enabled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			group := uniq("ctl-timeout-" + fmt.Sprint(tt.restore))
			e := newEnv(t, envOpts{
				groups: map[string][]lb.Target{group: {f5Member("web", "web-1", 80), f5Member("web", "web-2", 80)}},
				perms:  lb.Permissions{"alice": {group}},
				drain:  lb.DrainConfig{Interval: 10 * time.Millisecond, Timeout: 150 * time.Millisecond},
			})
			e.f5.AddPoolMember("web", "web-1:80", f5test.Member{Conns: 9, Decay: []int64{5, 3}}) // stuck at 3
			e.f5.AddPoolMember("web", "web-2:80", f5test.Member{Conns: 1, Decay: []int64{0}})
			out, err := e.ctrl.Do(context.Background(), lb.Request{Operator: "alice", Action: lb.ActionDrain, Group: group, RestoreOnFailure: tt.restore})
			var nd *lb.NotDrainedError
			if !errors.As(err, &nd) || nd.Conns != 3 || nd.Member != "f5 web/web-1:80" {
				t.Fatalf("Do = %v, want web-1 not drained with 3 connections", err)
			}
			if out.Entry.Result != lb.ResultNotDrained {
				t.Errorf("result = %q", out.Entry.Result)
			}
			if st, _ := e.f5.MemberState("web", "web-1:80"); st != tt.wantState {
				t.Errorf("web-1 = %+v, want %+v", st, tt.wantState)
			}
			got := e.entries(t, group)[0]
			m := got.Members[0]
			if got.Result != lb.ResultNotDrained || !strings.Contains(got.Error, "3 current connections") ||
				m.Drained || m.ConnsAfter != 3 || m.After != tt.wantAfter || !strings.Contains(m.Error, "not drained") {
				t.Errorf("audit = %+v / %+v", got, m)
			}
			if !got.Members[1].Drained || got.Members[1].Error != "" {
				t.Errorf("web-2 audit = %+v, want drained", got.Members[1])
			}
			lines := e.logs.lines(t)
			if l := lines[len(lines)-1]; l["level"] != "WARN" || l["result"] != "not-drained" {
				t.Errorf("log line = %v", l)
			}
			if h, _ := e.store.Holder(context.Background(), group); h != nil {
				t.Errorf("lock still held by %+v", h)
			}
		})
	}
}

func TestControllerSkipsTheRestAfterAFailure(t *testing.T) {
	t.Parallel()
	group := uniq("ctl-skip")
	e := newEnv(t, envOpts{
		groups:      map[string][]lb.Target{group: {f5Member("web", "web-1", 80), f5Member("web", "web-2", 80), f5Member("web", "web-3", 80)}},
		perms:       lb.Permissions{"alice": {group}},
		drain:       lb.DrainConfig{Interval: 10 * time.Millisecond, Timeout: 100 * time.Millisecond},
		concurrency: 1,
	})
	e.f5.AddPoolMember("web", "web-1:80", f5test.Member{Conns: 4, Decay: []int64{4}})
	e.f5.AddPoolMember("web", "web-2:80", f5test.Member{Conns: 4})
	e.f5.AddPoolMember("web", "web-3:80", f5test.Member{Conns: 4})
	out, err := e.ctrl.Do(context.Background(), lb.Request{Operator: "alice", Action: lb.ActionDrain, Group: group})
	if !errors.Is(err, lb.ErrNotDrained) || errors.Is(err, lb.ErrSkipped) {
		t.Fatalf("Do = %v, want ErrNotDrained only", err)
	}
	for i, m := range out.Members[1:] {
		if !errors.Is(m.Err, lb.ErrSkipped) || m.Changed {
			t.Errorf("member %d = %+v, want skipped and unchanged", i+1, m)
		}
	}
	for _, n := range []string{"web-2:80", "web-3:80"} {
		if st, _ := e.f5.MemberState("web", n); st.Session != "user-enabled" {
			t.Errorf("%s = %+v, want untouched", n, st)
		}
	}
	if got := e.entries(t, group)[0].Members[2]; got.Changed || !strings.Contains(got.Error, "skipped") {
		t.Errorf("audit of a skipped member = %+v", got)
	}
}

func TestControllerRefusesAnUnlistedGroupBeforeAnyCall(t *testing.T) {
	t.Parallel()
	group, other := uniq("ctl-perm"), uniq("ctl-perm-other")
	e := newEnv(t, envOpts{
		groups: map[string][]lb.Target{group: {f5Member("web", "web-1", 80)}, other: {{Balancer: "a10", Member: lb.Member{Node: "app-1"}}}},
		perms:  lb.Permissions{"bob": {other}},
	})
	e.f5.AddPoolMember("web", "web-1:80", f5test.Member{})
	for _, op := range []string{"bob", "mallory", ""} {
		out, err := e.ctrl.Do(context.Background(), lb.Request{Operator: op, Action: lb.ActionDrain, Group: group})
		var pe *lb.NotPermittedError
		if !errors.As(err, &pe) || pe.Operator != op || pe.Group != group {
			t.Fatalf("Do by %q = %v, want *NotPermittedError", op, err)
		}
		if out.Entry.Result != lb.ResultRefused {
			t.Errorf("result = %q", out.Entry.Result)
		}
	}
	if n := e.requests(); n != 0 {
		t.Errorf("the balancers saw %d requests, want 0", n)
	}
	entries := e.entries(t, group)
	if len(entries) != 3 {
		t.Fatalf("%d audit rows, want 3 refusals", len(entries))
	}
	for _, en := range entries {
		if en.Result != lb.ResultRefused || !strings.Contains(en.Error, "may not control group") {
			t.Errorf("audit = %+v", en)
		}
	}
	if h, _ := e.store.Holder(context.Background(), group); h != nil {
		t.Errorf("a refused request took the lock: %+v", h)
	}
}

func TestControllerRefusesWhileAnotherOwnerHoldsTheGroup(t *testing.T) {
	t.Parallel()
	group := uniq("ctl-locked")
	e := newEnv(t, envOpts{
		groups: map[string][]lb.Target{group: {f5Member("web", "web-1", 80)}},
		perms:  lb.Permissions{"alice": {group}, "bob": {group}},
	})
	e.f5.AddPoolMember("web", "web-1:80", f5test.Member{Conns: 1})
	ctx := context.Background()
	lease, err := e.store.Lock(ctx, group, "bob")
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.ctrl.Do(ctx, lb.Request{Operator: "alice", Action: lb.ActionDisable, Group: group})
	var le *lb.LockedError
	if !errors.As(err, &le) || le.Holder.Owner != "bob" || !strings.Contains(err.Error(), "locked by bob@") {
		t.Fatalf("Do = %v, want *LockedError naming bob", err)
	}
	if out.Entry.Result != lb.ResultLocked || e.requests() != 0 {
		t.Errorf("result %q with %d balancer requests, want locked and 0", out.Entry.Result, e.requests())
	}
	st, err := e.ctrl.Status(ctx, group)
	if err != nil || st.Holder == nil || st.Holder.Owner != "bob" {
		t.Errorf("Status holder = %+v, %v; want bob", st.Holder, err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ctrl.Do(ctx, lb.Request{Operator: "alice", Action: lb.ActionDisable, Group: group}); err != nil {
		t.Fatalf("Do after release: %v", err)
	}
	entries := e.entries(t, group)
	if len(entries) != 2 || entries[1].Result != lb.ResultLocked || !strings.Contains(entries[1].Error, "bob") || entries[0].Result != lb.ResultOK {
		t.Errorf("audit = %+v", entries)
	}
}

func TestControllerBoundsConcurrency(t *testing.T) {
	t.Parallel()
	for _, limit := range []int{2, 3} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			t.Parallel()
			group := uniq(fmt.Sprintf("ctl-conc-%d", limit))
			var targets []lb.Target
			for i := range 6 {
				targets = append(targets, f5Member("web", fmt.Sprintf("web-%d", i), 80))
			}
			e := newEnv(t, envOpts{groups: map[string][]lb.Target{group: targets}, perms: lb.Permissions{"alice": {group}}, concurrency: limit})
			for i := range 6 {
				e.f5.AddPoolMember("web", fmt.Sprintf("web-%d:80", i), f5test.Member{Conns: 3, Decay: []int64{2, 1, 0}})
			}
			// Hold stats reads until limit+1 of them wait at once, which never
			// happens when at most limit members are driven at once: after
			// 1.5s they are released, having proved that exactly limit ran
			// together.
			e.f5.Hold("/stats", limit+1, 1500*time.Millisecond)
			if _, err := e.ctrl.Do(context.Background(), lb.Request{Operator: "alice", Action: lb.ActionDrain, Group: group}); err != nil {
				t.Fatal(err)
			}
			if got := e.f5.MaxInFlight(); got != limit {
				t.Errorf("at most %d requests at once, want exactly %d", got, limit)
			}
		})
	}
}

func TestControllerSetActions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		action lb.Action
		want   f5test.State
		a10    string
		after  string
	}{
		{lb.ActionDisable, f5test.State{Session: "user-disabled", State: "user-up"}, "disable-with-health-check", "disabled"},
		{lb.ActionForcedOffline, f5test.State{Session: "user-disabled", State: "user-down"}, "disable", "forced-offline"},
		{lb.ActionEnable, f5test.State{Session: "user-enabled", State: "user-up"}, "enable", "enabled"},
	}
	for _, tt := range tests {
		t.Run(string(tt.action), func(t *testing.T) {
			t.Parallel()
			group := uniq("ctl-set-" + string(tt.action))
			e := newEnv(t, envOpts{
				groups: map[string][]lb.Target{group: {f5Member("", "db-1", 0), {Balancer: "a10", Member: lb.Member{Node: "app-1"}}}},
				perms:  lb.Permissions{"alice": {"*"}},
			})
			e.f5.AddNode("db-1", f5test.Member{Conns: 3, Decay: []int64{1}})
			e.a10.AddServer("app-1", a10test.Real{Conns: 2, StatsDisabled: true}) // fine unless draining
			out, err := e.ctrl.Do(context.Background(), lb.Request{Operator: "alice", Action: tt.action, Group: group})
			if err != nil {
				t.Fatal(err)
			}
			if st, _ := e.f5.NodeState("db-1"); st != tt.want {
				t.Errorf("db-1 = %+v, want %+v", st, tt.want)
			}
			if a, _ := e.a10.Action("app-1", 0); a != tt.a10 {
				t.Errorf("app-1 = %q, want %q", a, tt.a10)
			}
			if out.Members[1].Result.BeforeConns != lb.ConnsUnknown {
				t.Errorf("connections of a member without stats = %d, want unknown", out.Members[1].Result.BeforeConns)
			}
			got := e.entries(t, group)[0]
			if got.Action != tt.action || got.Members[0].After != tt.after || got.Members[1].After != tt.after || got.Members[0].ConnsBefore != 3 {
				t.Errorf("audit = %+v", got)
			}
		})
	}
}

func TestControllerDrainRefusesStatsDisabledBeforeAnyChange(t *testing.T) {
	t.Parallel()
	group := uniq("ctl-stats-off")
	e := newEnv(t, envOpts{
		groups: map[string][]lb.Target{group: {f5Member("web", "web-1", 80), {Balancer: "a10", Member: lb.Member{Node: "app-1"}}}},
		perms:  lb.Permissions{"alice": {group}},
	})
	e.f5.AddPoolMember("web", "web-1:80", f5test.Member{Conns: 3})
	e.a10.AddServer("app-1", a10test.Real{Conns: 25, StatsDisabled: true})
	out, err := e.ctrl.Do(context.Background(), lb.Request{Operator: "alice", Action: lb.ActionDrain, Group: group})
	if kindOf(err) != lb.KindStatsDisabled || out.Entry.Result != lb.ResultFailed {
		t.Fatalf("Do = %v (%s), want KindStatsDisabled", err, out.Entry.Result)
	}
	if n := e.f5.Count("PATCH", "/ltm/") + e.a10.Count("POST", "/slb/"); n != 0 {
		t.Errorf("%d state changes, want 0: the group is refused before any change", n)
	}
}

func TestControllerCanceled(t *testing.T) {
	t.Parallel()
	group := uniq("ctl-cancel")
	e := newEnv(t, envOpts{
		groups: map[string][]lb.Target{group: {f5Member("web", "web-1", 80)}},
		perms:  lb.Permissions{"alice": {group}},
		drain:  lb.DrainConfig{Interval: time.Hour, Timeout: 2 * time.Hour},
	})
	e.f5.AddPoolMember("web", "web-1:80", f5test.Member{Conns: 3, Decay: []int64{3}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, err := e.ctrl.Do(ctx, lb.Request{Operator: "alice", Action: lb.ActionDrain, Group: group, Progress: func(lb.Progress) { cancel() }})
	if !errors.Is(err, context.Canceled) || out.Entry.Result != lb.ResultCanceled {
		t.Fatalf("Do = %v (%s), want canceled", err, out.Entry.Result)
	}
	if got := e.entries(t, group)[0]; got.Result != lb.ResultCanceled {
		t.Errorf("audit result = %q: the final row is written even when the context has ended", got.Result)
	}
	if h, _ := e.store.Holder(context.Background(), group); h != nil {
		t.Errorf("lock still held: %+v", h)
	}
}

// memLocker is a Locker whose leases lose their lock on demand.
type memLocker struct{ lost bool }

type memLease struct{ l *memLocker }

func (l *memLocker) Lock(_ context.Context, group, owner string, _ ...lb.LockMember) (lb.Lease, error) {
	return &memLease{l}, nil
}
func (l *memLocker) Holder(context.Context, string) (*lb.Holder, error) { return nil, nil }
func (m *memLease) Holder() lb.Holder                                   { return lb.Holder{Owner: "x"} }
func (m *memLease) Release(context.Context) error                       { return nil }
func (m *memLease) Check(context.Context) error {
	if m.l.lost {
		return &lb.LockLostError{Group: "g"}
	}
	return nil
}

func TestControllerStopsWhenTheLockIsLost(t *testing.T) {
	t.Parallel()
	group := uniq("ctl-fence")
	e := newEnv(t, envOpts{
		groups: map[string][]lb.Target{group: {f5Member("web", "web-1", 80)}},
		perms:  lb.Permissions{"alice": {group}},
		locker: &memLocker{lost: true},
	})
	e.f5.AddPoolMember("web", "web-1:80", f5test.Member{Conns: 3})
	_, err := e.ctrl.Do(context.Background(), lb.Request{Operator: "alice", Action: lb.ActionForcedOffline, Group: group})
	if !errors.Is(err, lb.ErrLockLost) {
		t.Fatalf("Do = %v, want ErrLockLost", err)
	}
	if n := e.f5.Count("PATCH", "/ltm/"); n != 0 {
		t.Errorf("%d changes made without the lock, want 0", n)
	}
}

type failingAudit struct{}

func (failingAudit) Record(context.Context, *lb.Entry) error {
	return &lb.StoreError{Op: "audit", Err: errors.New("disk full")}
}

func TestControllerDoesNothingItCannotAudit(t *testing.T) {
	t.Parallel()
	group := uniq("ctl-noaudit")
	e := newEnv(t, envOpts{
		groups: map[string][]lb.Target{group: {f5Member("web", "web-1", 80)}},
		perms:  lb.Permissions{"alice": {group}},
		audit:  failingAudit{},
	})
	e.f5.AddPoolMember("web", "web-1:80", f5test.Member{Conns: 3})
	out, err := e.ctrl.Do(context.Background(), lb.Request{Operator: "alice", Action: lb.ActionForcedOffline, Group: group})
	if !errors.Is(err, lb.ErrStore) || out.Entry.Result != lb.ResultFailed {
		t.Fatalf("Do = %v (%s), want ErrStore", err, out.Entry.Result)
	}
	if n := e.requests(); n != 0 {
		t.Errorf("%d balancer requests without an audit row, want 0", n)
	}
	if !strings.Contains(e.logs.String(), `"result":"failed"`) {
		t.Errorf("the log line is written even when the row is not: %s", e.logs.String())
	}
}

func TestControllerStatus(t *testing.T) {
	t.Parallel()
	group := uniq("ctl-status")
	e := newEnv(t, envOpts{
		groups: map[string][]lb.Target{group: {
			f5Member("web", "web-1", 80), f5Member("web", "web-2", 80), f5Member("web", "web-3", 80),
			{Balancer: "a10", Member: lb.Member{Node: "app-1"}},
		}},
		perms: lb.Permissions{"alice": {group}},
	})
	e.f5.AddPoolMember("web", "web-1:80", f5test.Member{Conns: 7})
	e.f5.AddPoolMember("web", "web-2:80", f5test.Member{Conns: 7, Decay: []int64{4}})
	e.f5.AddPoolMember("web", "web-3:80", f5test.Member{Conns: 7, Decay: []int64{0}})
	e.a10.AddServer("app-1", a10test.Real{Conns: 3, StatsDisabled: true})
	ctx := context.Background()
	if _, err := e.ctrl.Do(ctx, lb.Request{Operator: "alice", Action: lb.ActionForcedOffline, Group: group, Nodes: []string{"web-2", "web-3"}}); err != nil {
		t.Fatal(err)
	}
	lease, err := e.store.Lock(ctx, group, "carol")
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)
	before := len(e.entries(t, group))
	st, err := e.ctrl.Status(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if st.Holder == nil || st.Holder.Owner != "carol" {
		t.Errorf("holder = %+v", st.Holder)
	}
	want := []struct {
		phase lb.Phase
		conns int64
		off   bool
	}{{lb.PhaseEnabled, 7, false}, {lb.PhaseDisabling, 4, false}, {lb.PhaseDisabled, 0, false}, {lb.PhaseEnabled, lb.ConnsUnknown, true}}
	for i, w := range want {
		m := st.Members[i]
		if m.Phase != w.phase || m.Conns != w.conns || m.StatsDisabled != w.off || m.Err != nil {
			t.Errorf("member %s = %+v, want %v with %d connections (stats off %v)", m.Target, m, w.phase, w.conns, w.off)
		}
	}
	if after := len(e.entries(t, group)); after != before {
		t.Errorf("status wrote %d audit rows, want none", after-before)
	}
	if _, err := e.ctrl.Status(ctx, "nope"); !errors.Is(err, lb.ErrInvalidConfig) {
		t.Errorf("Status of an unknown group = %v", err)
	}
}

func TestPhaseOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s     lb.AdminState
		conns int64
		want  lb.Phase
	}{
		{lb.Enabled, 5, lb.PhaseEnabled},
		{lb.ForcedOffline, 5, lb.PhaseDisabling},
		{lb.Disabled, 1, lb.PhaseDisabling},
		{lb.ForcedOffline, 0, lb.PhaseDisabled},
		{lb.ForcedOffline, lb.ConnsUnknown, lb.PhaseUnknown},
		{lb.StateUnknown, 0, lb.PhaseUnknown},
	}
	for _, tt := range tests {
		if got := lb.PhaseOf(tt.s, tt.conns); got != tt.want {
			t.Errorf("PhaseOf(%v, %d) = %v, want %v", tt.s, tt.conns, got, tt.want)
		}
	}
}

func TestControllerInvalidRequests(t *testing.T) {
	t.Parallel()
	group := uniq("ctl-invalid")
	e := newEnv(t, envOpts{groups: map[string][]lb.Target{group: {f5Member("web", "web-1", 80)}}, perms: lb.Permissions{"alice": {"*"}}})
	tests := []struct {
		name string
		req  lb.Request
	}{
		{"unknown action", lb.Request{Operator: "alice", Action: "reboot", Group: group}},
		{"unknown group", lb.Request{Operator: "alice", Action: lb.ActionDrain, Group: "nope"}},
		{"unknown node", lb.Request{Operator: "alice", Action: lb.ActionDrain, Group: group, Nodes: []string{"web-9"}}},
	}
	for _, tt := range tests {
		out, err := e.ctrl.Do(context.Background(), tt.req)
		if !errors.Is(err, lb.ErrInvalidConfig) || out.Entry.Result != lb.ResultInvalid {
			t.Errorf("%s: Do = %v (%s), want invalid", tt.name, err, out.Entry.Result)
		}
	}
	if e.requests() != 0 {
		t.Error("invalid requests reached a balancer")
	}
}

func TestNewControllerValidates(t *testing.T) {
	t.Parallel()
	_, c := newF5(t, f5test.Options{})
	bal := map[string]lb.Balancer{"f5": c}
	groups := map[string][]lb.Target{"g": {f5Member("web", "web-1", 80)}}
	tests := []struct {
		name string
		cfg  lb.ControllerConfig
		want string
	}{
		{"no balancers", lb.ControllerConfig{Groups: groups, Locker: &memLocker{}}, "Balancers"},
		{"no groups", lb.ControllerConfig{Balancers: bal, Locker: &memLocker{}}, "Groups"},
		{"no locker", lb.ControllerConfig{Balancers: bal, Groups: groups}, "Locker"},
		{"unknown balancer", lb.ControllerConfig{Balancers: bal, Groups: map[string][]lb.Target{"g": {{Balancer: "x", Member: lb.Member{Node: "n"}}}}, Locker: &memLocker{}}, `"x"`},
		{"bad member", lb.ControllerConfig{Balancers: bal, Groups: map[string][]lb.Target{"g": {{Balancer: "f5"}}}, Locker: &memLocker{}}, "Groups.g.0.node"},
		{"negative concurrency", lb.ControllerConfig{Balancers: bal, Groups: groups, Locker: &memLocker{}, Concurrency: -1}, "Concurrency"},
		{"negative timeout", lb.ControllerConfig{Balancers: bal, Groups: groups, Locker: &memLocker{}, Drain: lb.DrainConfig{Timeout: -1}}, "drain.Timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := lb.NewController(tt.cfg)
			if !errors.Is(err, lb.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NewController = %v, want an error about %s", err, tt.want)
			}
		})
	}
}
