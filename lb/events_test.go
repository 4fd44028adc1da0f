package lb_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/holdfast-db/holdfast/lb"
	"github.com/holdfast-db/holdfast/lb/a10/a10test"
	"github.com/holdfast-db/holdfast/lb/f5/f5test"
	"github.com/holdfast-db/holdfast/lb/notify"
)

// recorder is a Notifier that keeps the events.
type recorder struct {
	mu sync.Mutex
	ev []lb.Event
}

func (r *recorder) Notify(e lb.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ev = append(r.ev, e)
}

func (r *recorder) kinds() []lb.EventKind {
	r.mu.Lock()
	defer r.mu.Unlock()
	var k []lb.EventKind
	for _, e := range r.ev {
		k = append(k, e.Kind)
	}
	return k
}

func (r *recorder) last() lb.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ev[len(r.ev)-1]
}

// The controller tells its Notifier what each request came to.
func TestControllerNotifies(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		action lb.Action
		op     string
		setup  func(t *testing.T, e *env, group string)
		want   []lb.EventKind
		check  func(t *testing.T, last lb.Event)
	}{
		{name: "drained", action: lb.ActionDrain, op: "alice", want: []lb.EventKind{lb.EventDrainStarted, lb.EventDrained}},
		{name: "timed out", action: lb.ActionDrain, op: "alice",
			setup: func(t *testing.T, e *env, _ string) { e.f5.SetConns("web", "web-1:80", 9, 4) },
			want:  []lb.EventKind{lb.EventDrainStarted, lb.EventTimedOut},
			check: func(t *testing.T, last lb.Event) {
				if len(last.Busy) != 1 || last.Busy[0].Member != "f5 web/web-1:80" || last.Busy[0].Conns != 4 || !strings.Contains(last.Error, "not drained") {
					t.Errorf("timed-out event = %+v, want web-1 busy with 4 connections", last)
				}
			}},
		{name: "enabled", action: lb.ActionEnable, op: "alice", want: []lb.EventKind{lb.EventEnabled}},
		{name: "disabled", action: lb.ActionDisable, op: "alice", want: []lb.EventKind{lb.EventDisabled}},
		{name: "forced offline", action: lb.ActionForcedOffline, op: "alice", want: []lb.EventKind{lb.EventForcedOffline}},
		{name: "lock refused", action: lb.ActionDrain, op: "alice",
			setup: func(t *testing.T, e *env, group string) {
				lease, err := e.store.Lock(context.Background(), group, "carol")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = lease.Release(context.Background()) })
			},
			want: []lb.EventKind{lb.EventLockRefused},
			check: func(t *testing.T, last lb.Event) {
				if last.Holder == nil || last.Holder.Owner != "carol" || last.AuditID == 0 {
					t.Errorf("lock-refused event = %+v, want carol as the holder", last)
				}
			}},
		{name: "not permitted: audited, not notified", action: lb.ActionDrain, op: "bob"},
		{name: "failed", action: lb.ActionDrain, op: "alice",
			setup: func(t *testing.T, e *env, _ string) {
				e.f5.Inject(f5test.Fault{Kind: f5test.NotFound, Method: http.MethodPatch})
			},
			want: []lb.EventKind{lb.EventDrainStarted, lb.EventFailed},
			check: func(t *testing.T, last lb.Event) {
				if !strings.Contains(last.Error, "not found") {
					t.Errorf("failed event = %+v", last)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			group := uniq("ctl-notify")
			rec := &recorder{}
			e := newEnv(t, envOpts{
				groups:   map[string][]lb.Target{group: {f5Member("web", "web-1", 80), {Balancer: "a10", Member: lb.Member{Node: "app-1", Port: 8080}}}},
				perms:    lb.Permissions{"alice": {group}},
				drain:    lb.DrainConfig{Interval: 10 * time.Millisecond, Timeout: 150 * time.Millisecond},
				notifier: rec,
			})
			e.f5.AddPoolMember("web", "web-1:80", f5test.Member{Conns: 9, Decay: []int64{3, 0}})
			e.a10.AddServer("app-1", a10test.Real{Ports: []a10test.Port{{Number: 8080, Conns: 2}}})
			if tt.setup != nil {
				tt.setup(t, e, group)
			}
			_, _ = e.ctrl.Do(context.Background(), lb.Request{Operator: tt.op, Action: tt.action, Group: group})
			if got := rec.kinds(); !slices.Equal(got, tt.want) {
				t.Fatalf("events = %v, want %v", got, tt.want)
			}
			if len(tt.want) == 0 {
				return
			}
			last := rec.last()
			if last.Group != group || last.Operator != tt.op || last.Host != "test-host" || last.Action != tt.action || last.Time.IsZero() {
				t.Errorf("event = %+v", last)
			}
			if tt.check != nil {
				tt.check(t, last)
			}
		})
	}
}

// A webhook that never answers changes nothing about a drain: it ends as
// soon as the connections are gone.
func TestHangingWebhookNeverDelaysADrain(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hang.Close()
	defer close(release)
	d, err := notify.New(notify.Config{Timeout: time.Minute, Webhooks: []notify.Webhook{{Name: "hang", Format: lb.FormatTeams, URL: lb.Secret(hang.URL)}}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	group := uniq("ctl-hang")
	e := newEnv(t, envOpts{groups: map[string][]lb.Target{group: {f5Member("web", "web-1", 80)}}, perms: lb.Permissions{"alice": {group}}, notifier: d})
	e.f5.AddPoolMember("web", "web-1:80", f5test.Member{Conns: 9, Decay: []int64{3, 0}})
	start := time.Now()
	out, err := e.ctrl.Do(context.Background(), lb.Request{Operator: "alice", Action: lb.ActionDrain, Group: group})
	took := time.Since(start)
	if err != nil || out.Entry.Result != lb.ResultOK {
		t.Fatalf("drain = %v", err)
	}
	if took > 5*time.Second {
		t.Errorf("the drain took %v with a hanging webhook", took)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_ = d.Close(ctx)
	if s := d.Stats(); s.Sent != 0 {
		t.Errorf("stats = %+v", s)
	}
}

// A lease held by the caller carries several requests (a deploy's drain
// and enable): the lock stays held between them and after. (Taken with
// Acquire, which locks the group's members too: a store lease of the
// group alone is refused, see TestOverlappingGroups.)
func TestControllerRunsUnderTheCallersLease(t *testing.T) {
	t.Parallel()
	group := uniq("ctl-lease")
	e := newEnv(t, envOpts{groups: map[string][]lb.Target{group: {f5Member("web", "web-1", 80)}}, perms: lb.Permissions{"alice": {group}, "bob": {group}}})
	e.f5.AddPoolMember("web", "web-1:80", f5test.Member{Conns: 3, Decay: []int64{1, 0}})
	ctx := context.Background()
	lease, _, err := e.ctrl.Acquire(ctx, lb.Request{Operator: "alice", Action: lb.ActionDrain, Group: group})
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)
	for _, a := range []lb.Action{lb.ActionDrain, lb.ActionEnable} {
		var started []lb.Entry
		out, err := e.ctrl.Do(ctx, lb.Request{Operator: "alice", Action: a, Group: group, Lease: lease, OnStart: func(en lb.Entry) { started = append(started, en) }})
		if err != nil || out.Entry.Result != lb.ResultOK {
			t.Fatalf("%s under the lease: %v", a, err)
		}
		if len(started) != 1 || started[0].ID != out.Entry.ID || started[0].Result != lb.ResultRunning {
			t.Errorf("OnStart got %+v", started)
		}
		if h, _ := e.store.Holder(ctx, group); h == nil || h.Owner != "alice" {
			t.Errorf("after %s the holder is %+v, want alice still", a, h)
		}
	}
	// Others are refused meanwhile; a lease for another owner is invalid.
	if _, err := e.ctrl.Do(ctx, lb.Request{Operator: "bob", Action: lb.ActionDisable, Group: group}); !errors.Is(err, lb.ErrLocked) {
		t.Errorf("bob's request = %v, want locked", err)
	}
	out, err := e.ctrl.Do(ctx, lb.Request{Operator: "bob", Action: lb.ActionDisable, Group: group, Lease: lease})
	if !errors.Is(err, lb.ErrInvalidConfig) || out.Entry.Result != lb.ResultInvalid {
		t.Errorf("bob with alice's lease = %v", err)
	}
}

// LockWait waits for the holder to let go, within its bound.
func TestControllerWaitsForTheLock(t *testing.T) {
	t.Parallel()
	group := uniq("ctl-wait")
	e := newEnv(t, envOpts{groups: map[string][]lb.Target{group: {f5Member("web", "web-1", 80)}}, perms: lb.Permissions{"alice": {group}}})
	e.f5.AddPoolMember("web", "web-1:80", f5test.Member{Conns: 3})
	ctx := context.Background()
	lease, err := e.store.Lock(ctx, group, "carol")
	if err != nil {
		t.Fatal(err)
	}
	// Bounded: refused after the wait.
	start := time.Now()
	_, err = e.ctrl.Do(ctx, lb.Request{Operator: "alice", Action: lb.ActionDisable, Group: group, LockWait: 300 * time.Millisecond})
	if !errors.Is(err, lb.ErrLocked) || time.Since(start) < 300*time.Millisecond {
		t.Errorf("after %v: %v, want locked after the 300ms wait", time.Since(start), err)
	}
	// carol lets go while alice waits.
	waiting := make(chan struct{}, 10)
	done := make(chan error, 1)
	go func() {
		_, err := e.ctrl.Do(ctx, lb.Request{Operator: "alice", Action: lb.ActionDisable, Group: group, LockWait: time.Minute,
			OnLockWait: func(le *lb.LockedError) {
				if le.Holder.Owner == "carol" {
					waiting <- struct{}{}
				}
			}})
		done <- err
	}()
	select {
	case <-waiting:
	case <-time.After(10 * time.Second):
		t.Fatal("alice did not wait for carol's lock")
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("alice's request after the wait: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("alice's request did not go ahead once the lock was free")
	}
}

// The metrics of a controller and a monitor, read through the SDK.
func TestMetrics(t *testing.T) {
	t.Parallel()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	m, err := lb.NewMetrics(mp)
	if err != nil {
		t.Fatal(err)
	}
	group := uniq("ctl-metrics")
	e := newEnv(t, envOpts{
		groups:  map[string][]lb.Target{group: {f5Member("web", "web-1", 80), {Balancer: "a10", Member: lb.Member{Node: "app-1", Port: 8080}}}},
		perms:   lb.Permissions{"alice": {group}},
		drain:   lb.DrainConfig{Interval: 10 * time.Millisecond, Timeout: 100 * time.Millisecond},
		metrics: m,
	})
	e.f5.AddPoolMember("web", "web-1:80", f5test.Member{Conns: 9, Decay: []int64{0}})
	e.a10.AddServer("app-1", a10test.Real{Ports: []a10test.Port{{Number: 8080, Conns: 2, Decay: []int64{1}}}})
	e.f5.Inject(f5test.Fault{Kind: f5test.Busy, Path: "/stats"}) // one transient error, retried
	ctx := context.Background()
	_, _ = e.ctrl.Do(ctx, lb.Request{Operator: "alice", Action: lb.ActionDrain, Group: group}) // times out on app-1

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != lb.MeterName {
			continue
		}
		for _, mt := range sm.Metrics {
			got[mt.Name] = mt.Data
		}
	}
	sum := func(name string, attrs map[string]string) int64 {
		s, _ := got[name].(metricdata.Sum[int64])
		for _, dp := range s.DataPoints {
			if match(dp.Attributes.ToSlice(), attrs) {
				return dp.Value
			}
		}
		return -1
	}
	if n := sum("holdfast.lb.drain.timeouts", map[string]string{"group": group}); n != 1 {
		t.Errorf("drain timeouts = %d, want 1", n)
	}
	if n := sum("holdfast.lb.requests", map[string]string{"group": group, "action": "drain", "result": "not-drained"}); n != 1 {
		t.Errorf("requests{drain,not-drained} = %d", n)
	}
	if n := sum("holdfast.lb.api.errors", map[string]string{"vendor": "f5", "op": "connections", "kind": "busy"}); n != 1 {
		t.Errorf("api errors{f5,connections,busy} = %d", n)
	}
	h, _ := got["holdfast.lb.drain.duration"].(metricdata.Histogram[float64])
	if len(h.DataPoints) != 1 || h.DataPoints[0].Count != 1 || h.DataPoints[0].Sum < 0.1 {
		t.Errorf("drain duration = %+v", h.DataPoints)
	}
	lw, _ := got["holdfast.lb.lock.wait"].(metricdata.Histogram[float64])
	if len(lw.DataPoints) != 1 || !match(lw.DataPoints[0].Attributes.ToSlice(), map[string]string{"result": "acquired"}) {
		t.Errorf("lock wait = %+v", lw.DataPoints)
	}
	gauge := func(phase string) int64 {
		g, _ := got["holdfast.lb.members"].(metricdata.Gauge[int64])
		for _, dp := range g.DataPoints {
			if match(dp.Attributes.ToSlice(), map[string]string{"group": group, "phase": phase}) {
				return dp.Value
			}
		}
		return -1
	}
	if gauge("disabled") != 1 || gauge("disabling") != 1 || gauge("enabled") != 0 || gauge("unknown") != 0 {
		t.Errorf("members by phase: disabled %d, disabling %d, enabled %d, unknown %d", gauge("disabled"), gauge("disabling"), gauge("enabled"), gauge("unknown"))
	}
	if _, err := lb.NewMetrics(nil); !errors.Is(err, lb.ErrInvalidConfig) {
		t.Errorf("NewMetrics(nil) = %v", err)
	}
}

func match(kv []attribute.KeyValue, want map[string]string) bool {
	n := 0
	for _, a := range kv {
		if v, ok := want[string(a.Key)]; ok {
			if a.Value.AsString() != v {
				return false
			}
			n++
		}
	}
	return n == len(want)
}

// A Monitor keeps its sessions between reads and logs out at Close.
func TestMonitorKeepsItsSessions(t *testing.T) {
	t.Parallel()
	group := uniq("monitor")
	f5s, f5c := newF5(t, f5test.Options{})
	a10s, a10c := newA10(t, a10test.Options{})
	f5s.AddPoolMember("web", "web-1:80", f5test.Member{Conns: 4})
	a10s.AddServer("app-1", a10test.Real{Ports: []a10test.Port{{Number: 8080, Conns: 2}}})
	store, _ := newStore(t)
	mon, err := lb.NewMonitor(lb.MonitorConfig{
		Balancers: map[string]lb.Balancer{"f5": f5c, "a10": a10c},
		Groups:    map[string][]lb.Target{group: {f5Member("web", "web-1", 80), {Balancer: "a10", Member: lb.Member{Node: "app-1", Port: 8080}}}},
		Locker:    store,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 5 {
		if i == 3 {
			f5s.ExpireTokens() // the device forgets the session: one login again
		}
		st, err := mon.Status(ctx, group)
		if err != nil || len(st.Members) != 2 || st.Members[0].Conns != 4 || st.Members[1].Phase != lb.PhaseEnabled {
			t.Fatalf("read %d: %+v, %v", i, st, err)
		}
	}
	if f5s.Logins() != 2 || a10s.Logins() != 1 {
		t.Errorf("logins: f5 %d (want 2: once, once after the expiry), a10 %d (want 1)", f5s.Logins(), a10s.Logins())
	}
	if _, err := mon.Status(ctx, "nope"); !errors.Is(err, lb.ErrInvalidConfig) {
		t.Errorf("unknown group: %v", err)
	}
	if err := mon.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if f5s.ActiveTokens()+a10s.ActiveSessions() != 0 {
		t.Errorf("sessions left open after Close")
	}
	if _, err := mon.Status(ctx, group); !errors.Is(err, lb.ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}

func TestPGStoreHoldersAndEntry(t *testing.T) {
	t.Parallel()
	store, _ := newStore(t)
	ctx := context.Background()
	g1, g2 := uniq("holders-a"), uniq("holders-b")
	l1, err := store.WithHost("ci-1").Lock(ctx, g1, "alice")
	if err != nil {
		t.Fatal(err)
	}
	l2, err := store.Lock(ctx, g2, "bob")
	if err != nil {
		t.Fatal(err)
	}
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	hs, err := store.Holders(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h, ok := hs[g1]; !ok || h.Owner != "alice" || h.Host != "ci-1" {
		t.Errorf("holders[%s] = %+v", g1, h)
	}
	if _, ok := hs[g2]; ok {
		t.Errorf("a released lock is listed: %+v", hs[g2])
	}
	_ = l1.Release(ctx)
	e := &lb.Entry{Started: time.Now(), Operator: "alice", Host: "h", Action: lb.ActionEnable, Group: g1, Result: lb.ResultOK}
	if err := store.Record(ctx, e); err != nil {
		t.Fatal(err)
	}
	got, err := store.Entry(ctx, e.ID)
	if err != nil || got == nil || got.Operator != "alice" || got.Group != g1 {
		t.Errorf("Entry = %+v, %v", got, err)
	}
	if got, err := store.Entry(ctx, 1<<60); err != nil || got != nil {
		t.Errorf("Entry(missing) = %+v, %v", got, err)
	}
}
