package readiness_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/readiness"
)

// A drain flips readiness to 503 at once, waits while a pool connection is
// held, and reports success once it is released.
func TestDrainWaitsForHeldConnection(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOpts{cfg: readiness.Config{DrainInterval: 10 * time.Millisecond}})
	f.start(t)
	p := newPoller(t, f.c)
	conn := f.hold(t)
	out := drainAsync(f.c, "deploy-42")

	// The drain polls and finds the held connection, poll after poll.
	for i := range 3 {
		if u := p.next(t); u.AcquiredConns != 1 || u.InFlight != 0 {
			t.Fatalf("poll %d found %v, want 1 acquired connection", i+1, u)
		}
	}
	// It is blocked in its fourth poll: observe it through the state API.
	if got := f.c.Status().Drain.State; got != readiness.Disabling {
		t.Fatalf("State = %v while draining, want Disabling", got)
	}
	select {
	case o := <-out:
		t.Fatalf("drain returned %+v while a connection was held", o)
	default:
	}
	queries := f.queries.n.Load()
	f.clock.Advance(time.Hour)
	code, h := f.healthz(t)
	d := h.Checks.Drain[0]
	if code != 503 || h.Reason != "draining" || d.State != "Disabling" || d.Owner != "deploy-42" ||
		d.Since == "" || d.LockedAt == "" || d.InUse == nil || d.InUse.AcquiredConns != 1 {
		t.Fatalf("readiness while draining: %d %+v, drain %+v", code, h, d)
	}
	if h.Output != `not ready: draining (Disabling by "deploy-42")` {
		t.Errorf("admin output = %q", h.Output)
	}
	if r := f.do(t, "GET", "/readyz"); r.body != "not ready: draining" { // the probe: no owner
		t.Errorf("plain body = %q", r.body)
	}
	if f.queries.n.Load() != queries {
		t.Errorf("a probe ran a database check while draining")
	}

	conn.Release()
	for p.next(t).AcquiredConns != 0 {
	}
	o := waitOutcome(t, out)
	if o.err != nil {
		t.Fatalf("Drain = %v, want success", o.err)
	}
	if o.res.Owner != "deploy-42" || o.res.Polls < 4 || o.res.Elapsed <= 0 {
		t.Errorf("DrainResult = %+v", o.res)
	}
	if got := f.c.Status().Drain.State; got != readiness.Disabled {
		t.Errorf("State = %v after the drain, want Disabled", got)
	}
	code, h = f.healthz(t)
	if code != 503 || h.Checks.Drain[0].State != "Disabled" {
		t.Errorf("readiness after the drain: %d %+v, want 503 Disabled", code, h.Checks.Drain[0])
	}

	f.c.Enable()
	if r := f.do(t, "GET", "/readyz"); r.code != 200 || f.c.Status().Drain.State != readiness.Enabled {
		t.Errorf("after Enable: %d %q, state %v; want 200 Enabled", r.code, r.body, f.c.Status().Drain.State)
	}
}

// Past its bound, the drain reports what was still in use, and the service
// stays Disabling.
func TestDrainTimesOut(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOpts{cfg: readiness.Config{DrainInterval: 10 * time.Millisecond}})
	f.start(t)
	f.hold(t)
	end := f.c.Begin()
	defer end()

	start := time.Now()
	_, err := f.c.Drain(context.Background(), "deploy-42", readiness.WithDrainTimeout(200*time.Millisecond))
	if elapsed := time.Since(start); elapsed < 200*time.Millisecond {
		t.Errorf("Drain gave up after %v, before its 200ms bound", elapsed)
	}
	var te *readiness.DrainTimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("Drain = %v, want a *DrainTimeoutError", err)
	}
	want := `readiness: drain by "deploy-42" timed out after 200ms: still in use: 1 acquired connection, 1 in-flight request; service stays Disabling`
	if err.Error() != want {
		t.Errorf("error = %q\nwant      %q", err, want)
	}
	if te.Cause != nil || te.InUse != (readiness.InUse{AcquiredConns: 1, InFlight: 1}) || te.State != readiness.Disabling {
		t.Errorf("error fields = %+v", te)
	}
	if got := f.c.Status().Drain.State; got != readiness.Disabling {
		t.Errorf("State = %v after a timed-out drain, want Disabling", got)
	}
	if r := f.do(t, "GET", "/readyz"); r.code != 503 {
		t.Errorf("readiness after a timed-out drain = %d, want 503", r.code)
	}
}

// The drain lock: another owner is refused with the holder's name until the
// holder enables the service; the holder may re-enter; TakeOver overrides.
func TestDrainLock(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOpts{cfg: readiness.Config{DrainInterval: 10 * time.Millisecond}})
	f.start(t)
	p := newPoller(t, f.c)
	conn := f.hold(t)
	alice := drainAsync(f.c, "alice")
	p.next(t) // alice holds the lock and waits

	_, err := drainNow(t, f.c, "bob")
	var le *readiness.LockedError
	if !errors.As(err, &le) || le.Holder != "alice" || le.Requester != "bob" || le.State != readiness.Disabling {
		t.Fatalf("Drain by bob = %v, want a *LockedError held by alice", err)
	}
	if !strings.HasPrefix(err.Error(), `readiness: drain refused to "bob": held by "alice" since `) {
		t.Errorf("error = %q", err)
	}
	r := f.do(t, "POST", "/drain", "X-Drain-Owner", "bob")
	var body struct{ Error, Holder, State string }
	if err := json.Unmarshal([]byte(r.body), &body); err != nil || r.code != http.StatusConflict || body.Holder != "alice" || body.State != "Disabling" {
		t.Errorf("POST /drain by bob: %d %s, want 409 naming alice", r.code, r.body)
	}

	// Alice re-enters while her first drain waits: both complete.
	again := drainAsync(f.c, "alice")
	p.next(t)
	conn.Release()
	p.release()
	for _, ch := range []<-chan drainOutcome{alice, again} {
		if o := waitOutcome(t, ch); o.err != nil {
			t.Fatalf("alice's drain = %v", o.err)
		}
	}
	if got := f.c.Status().Drain.State; got != readiness.Disabled {
		t.Fatalf("State = %v, want Disabled", got)
	}

	// The lock outlives the drain: it is held until Enable.
	if _, err := drainNow(t, f.c, "bob"); !errors.As(err, new(*readiness.LockedError)) {
		t.Errorf("Drain by bob after alice's drain = %v, want a *LockedError", err)
	}
	if r := f.do(t, "DELETE", "/drain?owner=bob"); r.code != http.StatusConflict {
		t.Errorf("DELETE /drain by bob = %d %s, want 409", r.code, r.body)
	}
	if r := f.do(t, "DELETE", "/drain?owner=alice"); r.code != 200 || !strings.Contains(r.body, `"state":"Enabled"`) {
		t.Errorf("DELETE /drain by alice = %d %s, want 200 Enabled", r.code, r.body)
	}
	if res, err := drainNow(t, f.c, "bob"); err != nil || res.Polls != 1 {
		t.Errorf("Drain by bob after Enable = %+v, %v; want success at the first poll", res, err)
	}

	// TakeOver overrides the lock.
	res, err := drainNow(t, f.c, "shutdown", readiness.TakeOver())
	if err != nil || res.Owner != "shutdown" || f.c.Status().Drain.Owner != "shutdown" {
		t.Errorf("TakeOver drain = %+v, %v; owner %q", res, err, f.c.Status().Drain.Owner)
	}
}

// Enable and Close interrupt a waiting drain; the drain says why.
func TestDrainInterrupted(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		interrupt func(c *readiness.Checker)
		cause     error
		state     readiness.State
		readyz    string
	}{
		{"enable", (*readiness.Checker).Enable, readiness.ErrEnabled, readiness.Enabled, "ok"},
		{"close", (*readiness.Checker).Close, readiness.ErrClosed, readiness.Disabling, "not ready: closed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, fixtureOpts{cfg: readiness.Config{DrainInterval: time.Hour, DrainTimeout: 2 * time.Hour}})
			f.start(t)
			p := newPoller(t, f.c)
			f.hold(t)
			out := drainAsync(f.c, "alice")
			p.next(t) // first poll done; the drain now waits an hour
			tt.interrupt(f.c)
			o := waitOutcome(t, out)
			var te *readiness.DrainTimeoutError
			if !errors.As(o.err, &te) || !errors.Is(o.err, tt.cause) || te.InUse.AcquiredConns != 1 {
				t.Fatalf("Drain = %v, want a *DrainTimeoutError caused by %v with 1 acquired connection", o.err, tt.cause)
			}
			if te.State != tt.state {
				t.Errorf("error state = %v, want %v", te.State, tt.state)
			}
			if r := f.do(t, "GET", "/readyz"); r.body != tt.readyz {
				t.Errorf("readiness = %q, want %q", r.body, tt.readyz)
			}
		})
	}
}

// The caller's context bounds a drain too.
func TestDrainHonoursContext(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOpts{cfg: readiness.Config{DrainInterval: time.Hour, DrainTimeout: 2 * time.Hour}})
	f.start(t)
	end := f.c.Begin()
	defer end()
	ctx, cancel := context.WithCancel(context.Background())
	p := newPoller(t, f.c)
	out := make(chan error, 1)
	go func() { _, err := f.c.Drain(ctx, "alice"); out <- err }()
	p.next(t)
	cancel()
	err := <-out
	if !errors.As(err, new(*readiness.DrainTimeoutError)) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Drain = %v, want a *DrainTimeoutError caused by context.Canceled", err)
	}
	if !strings.Contains(err.Error(), "1 in-flight request; service stays Disabling") {
		t.Errorf("error = %q", err)
	}

	// A context that ended before the first poll: what is in use now.
	f.c.Enable()
	_, err = f.c.Drain(ctx, "alice")
	var te *readiness.DrainTimeoutError
	if !errors.As(err, &te) || te.InUse != (readiness.InUse{InFlight: 1}) || te.Elapsed > time.Minute {
		t.Errorf("Drain with a canceled context = %v, want a *DrainTimeoutError naming the in-flight request", err)
	}
}

func TestDrainArguments(t *testing.T) {
	t.Parallel()
	c, err := readiness.New(readiness.Config{}, readiness.Pool(lazyPool(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tests := []struct {
		name  string
		owner string
		opts  []readiness.DrainOption
		want  string
	}{
		{"empty owner", "", nil, "readiness: invalid owner: must not be empty: say who asks for the drain"},
		{"long owner", strings.Repeat("x", 129), nil, "readiness: invalid owner: longer than 128 bytes"},
		{"control character", "alice\n", nil, "readiness: invalid owner: contains an unprintable character"},
		{"invalid UTF-8", "al\xffice", nil, "readiness: invalid owner: not valid UTF-8"},
		{"zero timeout", "alice", []readiness.DrainOption{readiness.WithDrainTimeout(0)}, "readiness: invalid WithDrainTimeout: must be positive (got 0s)"},
		{"nil option", "alice", []readiness.DrainOption{nil}, "readiness: invalid DrainOption: an option is nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.Drain(context.Background(), tt.owner, tt.opts...)
			if !errors.As(err, new(*readiness.ConfigError)) || err.Error() != tt.want {
				t.Fatalf("Drain = %v, want %q", err, tt.want)
			}
			if c.Status().Drain.State != readiness.Enabled {
				t.Fatalf("a refused drain changed the state to %v", c.Status().Drain.State)
			}
		})
	}
	c.Close()
	if _, err := c.Drain(context.Background(), "alice"); !errors.Is(err, readiness.ErrClosed) {
		t.Errorf("Drain after Close = %v, want ErrClosed", err)
	}
	if err := c.Start(context.Background()); !errors.Is(err, readiness.ErrClosed) {
		t.Errorf("Start after Close = %v, want ErrClosed", err)
	}
}
