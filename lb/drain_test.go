package lb_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/lb"
	"github.com/holdfast-db/holdfast/lb/a10"
	"github.com/holdfast-db/holdfast/lb/a10/a10test"
	"github.com/holdfast-db/holdfast/lb/f5"
	"github.com/holdfast-db/holdfast/lb/f5/f5test"
	"github.com/holdfast-db/holdfast/lb/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// fast polls every 10ms. Decays are driven by the number of polls, not by
// time, so the tests do not depend on the machine's speed; the timeouts
// only bound the stuck cases.
var fast = lb.DrainConfig{Interval: 10 * time.Millisecond, Timeout: 5 * time.Second}

func newF5(t *testing.T, opts f5test.Options) (*f5test.Server, *f5.Client) {
	t.Helper()
	srv := f5test.New(opts)
	t.Cleanup(srv.Close)
	c, err := f5.New(f5.Config{Endpoint: srv.URL(), Username: f5test.DefaultUsername, Password: f5test.DefaultPassword, HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return srv, c
}

func newA10(t *testing.T, opts a10test.Options) (*a10test.Server, *a10.Client) {
	t.Helper()
	srv := a10test.New(opts)
	t.Cleanup(srv.Close)
	c, err := a10.New(a10.Config{Endpoint: srv.URL(), Username: a10test.DefaultUsername, Password: a10test.DefaultPassword, HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return srv, c
}

func loggedIn(t *testing.T, b lb.Balancer) context.Context {
	t.Helper()
	ctx := context.Background()
	if err := b.Login(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Logout(context.Background()) })
	return ctx
}

var web1 = lb.Member{Pool: "web", Node: "web-1", Port: 80}

func TestDrainSucceedsWhenConnectionsDecayToZero(t *testing.T) {
	t.Parallel()
	srv, c := newF5(t, f5test.Options{})
	srv.AddPoolMember("web", "web-1:80", f5test.Member{Conns: 9, Decay: []int64{5, 3, 1, 0}, Monitor: true})
	ctx := loggedIn(t, c)
	var seen []int64
	res, err := lb.Drain(ctx, c, web1, fast, func(p lb.Poll) { seen = append(seen, p.Conns) })
	if err != nil {
		t.Fatalf("Drain: %v", err)
	}
	if !res.Drained || res.Polls != 4 || res.BeforeConns != 9 || res.FirstConns != 5 || res.LastConns != 0 {
		t.Errorf("result = %+v, want drained in 4 polls, 9 before, 5 first, 0 last", res)
	}
	if res.Before.Admin != lb.Enabled || res.After.Admin != lb.ForcedOffline {
		t.Errorf("before %v after %v, want enabled then forced-offline", res.Before.Admin, res.After.Admin)
	}
	if fmt.Sprint(seen) != "[5 3 1 0]" {
		t.Errorf("progress saw %v, want [5 3 1 0]", seen)
	}
	if st, _ := srv.MemberState("web", "web-1:80"); st != (f5test.State{Session: "user-disabled", State: "user-down"}) {
		t.Errorf("device state = %+v, want forced offline", st)
	}
}

func TestDrainTimesOutWithConnectionsLeft(t *testing.T) {
	t.Parallel()
	srv, c := newF5(t, f5test.Options{})
	srv.AddPoolMember("web", "web-1:80", f5test.Member{Conns: 9, Decay: []int64{4, 2}})
	ctx := loggedIn(t, c)
	cfg := lb.DrainConfig{Interval: 10 * time.Millisecond, Timeout: 100 * time.Millisecond}
	res, err := lb.Drain(ctx, c, web1, cfg, nil)
	var nd *lb.NotDrainedError
	if !errors.As(err, &nd) || !errors.Is(err, lb.ErrNotDrained) {
		t.Fatalf("Drain = %v, want *NotDrainedError", err)
	}
	if nd.Conns != 2 || nd.Timeout != 100*time.Millisecond || nd.Polls < 2 || nd.Cause != nil {
		t.Errorf("error = %+v, want 2 connections after the 100ms bound", nd)
	}
	if want := "lb: f5 web/web-1:80 not drained: 2 current connections after 100ms"; err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
	if res.Drained || res.LastConns != 2 {
		t.Errorf("result = %+v", res)
	}
	// The member is left forced offline: the caller decides.
	if st, _ := srv.MemberState("web", "web-1:80"); st.State != "user-down" {
		t.Errorf("device state = %+v, want still forced offline", st)
	}
}

func TestDrainReLogsInOnceOn401(t *testing.T) {
	t.Parallel()
	t.Run("f5", func(t *testing.T) {
		t.Parallel()
		srv, c := newF5(t, f5test.Options{})
		srv.AddPoolMember("web", "web-1:80", f5test.Member{Conns: 9, Decay: []int64{5, 3, 1, 0}})
		ctx := loggedIn(t, c)
		// The third stats read of the drain finds the token expired.
		srv.Inject(f5test.Fault{Kind: f5test.ExpireToken, Path: "/stats", Skip: 3})
		res, err := lb.Drain(ctx, c, web1, fast, nil)
		if err != nil || !res.Drained {
			t.Fatalf("Drain = %+v, %v", res, err)
		}
		if got := srv.Logins(); got != 2 {
			t.Errorf("logins = %d, want 2: one re-login mid-drain", got)
		}
		if got := srv.Count("GET", "/stats"); got != 6 {
			t.Errorf("stats reads = %d, want 6 (1 before, 4 polls, 1 retried)", got)
		}
	})
	t.Run("a10", func(t *testing.T) {
		t.Parallel()
		srv, c := newA10(t, a10test.Options{})
		srv.AddServer("app-1", a10test.Real{Conns: 5, Decay: []int64{2, 0}})
		ctx := loggedIn(t, c)
		srv.Inject(a10test.Fault{Kind: a10test.ExpireSession, Path: "/stats", Skip: 2})
		res, err := lb.Drain(ctx, c, lb.Member{Node: "app-1"}, fast, nil)
		if err != nil || !res.Drained {
			t.Fatalf("Drain = %+v, %v", res, err)
		}
		if got := srv.Logins(); got != 2 {
			t.Errorf("logins = %d, want 2", got)
		}
	})
}

func TestDrainRefusesA10WithStatsDisabled(t *testing.T) {
	t.Parallel()
	srv, c := newA10(t, a10test.Options{})
	srv.AddServer("app-1", a10test.Real{Conns: 40, StatsDisabled: true})
	ctx := loggedIn(t, c)
	_, err := lb.Drain(ctx, c, lb.Member{Node: "app-1"}, fast, nil)
	if kindOf(err) != lb.KindStatsDisabled {
		t.Fatalf("Drain = %v, want KindStatsDisabled", err)
	}
	if got, _ := srv.Action("app-1", 0); got != "enable" {
		t.Errorf("action = %q: the member must not be touched", got)
	}
	if got := srv.Count("POST", "/slb/server/"); got != 0 {
		t.Errorf("%d state changes sent, want 0", got)
	}
}

func TestDrainFailsWhenSomeoneReEnablesTheMember(t *testing.T) {
	t.Parallel()
	srv, c := newF5(t, f5test.Options{})
	srv.AddPoolMember("web", "web-1:80", f5test.Member{Conns: 9, Decay: []int64{5}})
	ctx := loggedIn(t, c)
	other, _ := f5.New(f5.Config{Endpoint: srv.URL(), Username: f5test.DefaultUsername, Password: f5test.DefaultPassword, HTTPClient: srv.Client()})
	octx := loggedIn(t, other)
	res, err := lb.Drain(ctx, c, web1, fast, func(p lb.Poll) {
		if p.Polls == 2 {
			if err := other.SetState(octx, web1, lb.Enabled); err != nil {
				t.Error(err)
			}
		}
	})
	var sm *lb.StateMismatchError
	if !errors.As(err, &sm) || !errors.Is(err, lb.ErrStateMismatch) || sm.Want != lb.ForcedOffline || sm.Got.Admin != lb.Enabled {
		t.Fatalf("Drain = %v, want a *StateMismatchError (enabled, want forced-offline)", err)
	}
	if res.Polls != 3 || res.Drained {
		t.Errorf("result = %+v, want to stop at poll 3", res)
	}
}

func TestDrainToleratesTransientErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		max      int
		busy     int     // consecutive busy answers on stats, from the second poll
		wantKind lb.Kind // 0: drained
		wantPoll int
	}{
		{"two busy answers tolerated", 3, 2, 0, 5},
		{"more than tolerated", 1, 2, lb.KindBusy, 3},
		{"none tolerated", -1, 1, lb.KindBusy, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, c := newF5(t, f5test.Options{})
			srv.AddPoolMember("web", "web-1:80", f5test.Member{Conns: 9, Decay: []int64{5, 1, 0}})
			ctx := loggedIn(t, c)
			srv.Inject(f5test.Fault{Kind: f5test.Busy, Path: "/stats", Skip: 2, Times: tt.busy})
			cfg := fast
			cfg.MaxTransient = tt.max
			var errs int
			res, err := lb.Drain(ctx, c, web1, cfg, func(p lb.Poll) {
				if p.Err != nil {
					errs++
					if p.Conns != lb.ConnsUnknown {
						t.Errorf("a failed poll reported %d connections", p.Conns)
					}
				}
			})
			if kindOf(err) != tt.wantKind || (tt.wantKind == 0 && err != nil) {
				t.Fatalf("Drain = %v, want Kind %v", err, tt.wantKind)
			}
			if res.Polls != tt.wantPoll {
				t.Errorf("polls = %d, want %d", res.Polls, tt.wantPoll)
			}
			if tt.wantKind == 0 && (!res.Drained || errs != tt.busy) {
				t.Errorf("drained %v with %d tolerated errors, want %d", res.Drained, errs, tt.busy)
			}
		})
	}
}

func TestDrainKeepsTheSessionAlive(t *testing.T) {
	t.Parallel()
	srv, c := newF5(t, f5test.Options{})
	srv.AddPoolMember("web", "web-1:80", f5test.Member{Conns: 9, Decay: []int64{5, 3, 1, 0}})
	ctx := loggedIn(t, c)
	cfg := fast
	cfg.KeepAliveEvery = time.Nanosecond // every poll
	if _, err := lb.Drain(ctx, c, web1, cfg, nil); err != nil {
		t.Fatal(err)
	}
	if got := srv.Count("PATCH", "/mgmt/shared/authz/tokens/"); got != 4 {
		t.Errorf("token extensions = %d, want 4 (one per poll)", got)
	}
}

func TestDrainContextCanceled(t *testing.T) {
	t.Parallel()
	srv, c := newF5(t, f5test.Options{})
	srv.AddPoolMember("web", "web-1:80", f5test.Member{Conns: 9, Decay: []int64{3}})
	ctx, cancel := context.WithCancelCause(loggedIn(t, c))
	stop := errors.New("pipeline aborted")
	_, err := lb.Drain(ctx, c, web1, lb.DrainConfig{Interval: time.Hour, Timeout: 2 * time.Hour}, func(lb.Poll) { cancel(stop) })
	var nd *lb.NotDrainedError
	if !errors.As(err, &nd) || !errors.Is(err, stop) || nd.Conns != 3 {
		t.Fatalf("Drain = %v, want NotDrained with the cause and 3 connections", err)
	}
}

func TestDrainInvalidConfig(t *testing.T) {
	t.Parallel()
	_, c := newF5(t, f5test.Options{})
	_, err := lb.Drain(context.Background(), c, web1, lb.DrainConfig{Interval: -1}, nil)
	var ce *lb.ConfigError
	if !errors.As(err, &ce) || ce.Field != "drain.Interval" {
		t.Fatalf("Drain = %v, want a ConfigError on drain.Interval", err)
	}
}
