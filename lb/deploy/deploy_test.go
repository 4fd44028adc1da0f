package deploy_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast/lb"
	"github.com/holdfast-db/holdfast/lb/deploy"
	"github.com/holdfast-db/holdfast/lb/f5"
	"github.com/holdfast-db/holdfast/lb/f5/f5test"
	"github.com/holdfast-db/holdfast/lb/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// silencer is a Silencer that fails on demand and records its calls.
type silencer struct {
	mu      sync.Mutex
	fail    error
	made    []string
	expired []string
}

func (s *silencer) Silence(_ context.Context, group, _, _ string, d time.Duration) (string, time.Duration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return "", 0, s.fail
	}
	s.made = append(s.made, group)
	return "sil-" + group, d, nil
}

func (s *silencer) Expire(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expired = append(s.expired, id)
	return nil
}

type fixture struct {
	group string
	f5    *f5test.Server
	ctrl  *lb.Controller
	store *lb.PGStore
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	fx := &fixture{group: "deploy-" + hex.EncodeToString(b), f5: f5test.New(f5test.Options{})}
	t.Cleanup(fx.f5.Close)
	fx.f5.AddPoolMember("web", "web-1:80", f5test.Member{Conns: 3, Decay: []int64{0}})
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if fx.store, err = lb.NewPGStore(ctx, pool); err != nil {
		t.Fatal(err)
	}
	c, err := f5.New(f5.Config{Endpoint: fx.f5.URL(), Username: f5test.DefaultUsername, Password: f5test.DefaultPassword, HTTPClient: fx.f5.Client()})
	if err != nil {
		t.Fatal(err)
	}
	fx.ctrl, err = lb.NewController(lb.ControllerConfig{
		Balancers: map[string]lb.Balancer{"f5": c}, Groups: map[string][]lb.Target{fx.group: {{Balancer: "f5", Member: lb.Member{Pool: "web", Node: "web-1", Port: 80}}}},
		Permissions: lb.Permissions{"alice": {fx.group}}, Locker: fx.store, Audit: fx.store,
		Drain: lb.DrainConfig{Interval: 10 * time.Millisecond, Timeout: 5 * time.Second}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return fx
}

func TestSilenceFailureStopsBeforeTheDrain(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	s := &silencer{fail: errors.New("alertmanager unreachable")}
	var events []lb.Event
	n := lb.NotifierFunc(func(e lb.Event) { events = append(events, e) })
	res, err := deploy.Run(context.Background(), deploy.Config{Controller: fx.ctrl, Silencer: s, Notifier: n},
		deploy.Request{Operator: "alice", Group: fx.group, Command: []string{"true"}})
	var de *deploy.Error
	if !errors.As(err, &de) || de.Step != deploy.StepSilence || res.Drain != nil {
		t.Fatalf("Run = %v, want a silence failure before the drain", err)
	}
	if fx.f5.Count("PATCH", "") != 0 {
		t.Errorf("the group was changed")
	}
	if len(events) != 1 || events[0].Kind != lb.EventDeployFailed || !strings.Contains(events[0].Error, "unreachable") {
		t.Errorf("events = %+v", events)
	}
	// Optional: goes on without it.
	res, err = deploy.Run(context.Background(), deploy.Config{Controller: fx.ctrl, Silencer: s},
		deploy.Request{Operator: "alice", Group: fx.group, Command: []string{"true"}, SilenceOptional: true})
	if err != nil || res.SilenceID != "" || res.Enable == nil || res.ExitCode != 0 {
		t.Errorf("optional silence: %+v, %v", res, err)
	}
}

// Canceled during the command: the command gets SIGTERM, the members
// stay forced offline, the silence is expired, the lock released.
func TestCanceledDuringTheCommand(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	s := &silencer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	res, err := deploy.Run(ctx, deploy.Config{Controller: fx.ctrl, Silencer: s}, deploy.Request{
		Operator: "alice", Group: fx.group, Command: []string{"sh", "-c", "echo started; exec sleep 60"},
		Stdout: cancelOn{"started", cancel},
	})
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("the canceled deploy took %v: the command was not stopped", took)
	}
	if res.ExitCode != -1 {
		t.Errorf("exit code %d, want -1 (killed by a signal)", res.ExitCode)
	}
	var de *deploy.Error
	if !errors.As(err, &de) || de.Step != deploy.StepCommand || !res.LeftOffline || !strings.Contains(de.Note, "canceled during the command") {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if st, _ := fx.f5.MemberState("web", "web-1:80"); st.State != "user-down" {
		t.Errorf("web-1 = %+v, want left forced offline", st)
	}
	if len(s.expired) != 1 || s.expired[0] != "sil-"+fx.group {
		t.Errorf("expired = %v", s.expired)
	}
	if h, _ := fx.store.Holder(context.Background(), fx.group); h != nil {
		t.Errorf("lock still held by %+v", h)
	}
}

// cancelOn cancels when the command writes want.
type cancelOn struct {
	want   string
	cancel context.CancelFunc
}

func (c cancelOn) Write(p []byte) (int, error) {
	if strings.Contains(string(p), c.want) {
		c.cancel()
	}
	return len(p), nil
}

func TestRunValidates(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	for _, tt := range []struct {
		cfg deploy.Config
		req deploy.Request
	}{
		{deploy.Config{}, deploy.Request{Operator: "alice", Group: fx.group, Command: []string{"true"}}},
		{deploy.Config{Controller: fx.ctrl}, deploy.Request{Operator: "alice", Group: fx.group}},
		{deploy.Config{Controller: fx.ctrl}, deploy.Request{Operator: "alice", Group: fx.group, Command: []string{"true"}, LockWait: -1}},
	} {
		if _, err := deploy.Run(context.Background(), tt.cfg, tt.req); !errors.Is(err, lb.ErrInvalidConfig) {
			t.Errorf("Run(%+v) = %v", tt.req, err)
		}
	}
	// Not permitted: refused at the lock step, audited.
	_, err := deploy.Run(context.Background(), deploy.Config{Controller: fx.ctrl}, deploy.Request{Operator: "bob", Group: fx.group, Command: []string{"true"}})
	if !errors.Is(err, lb.ErrNotPermitted) || !errors.Is(err, deploy.ErrDeploy) {
		t.Errorf("bob: %v", err)
	}
}
