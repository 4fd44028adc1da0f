package outage_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/internal/outage"
)

// leadRig is a rig whose layer gives the prober's steps to a held
// connect (Config.Lead), down already: its checks are refused.
func leadRig(t *testing.T, holdFor time.Duration) (*rig, *atomic.Bool) {
	t.Helper()
	r := newRig(t, holdFor, steadyPace, func(c *outage.Config) { c.Lead = true })
	up := &atomic.Bool{}
	r.probe = func(context.Context, []string) (*pgconn.PgConn, []string, error) {
		if up.Load() {
			return nil, nil, nil // the server answers: the check connects
		}
		return nil, []string{"10.0.0.1:5432"}, refusedErr("10.0.0.1:5432")
	}
	r.arm(t)
	r.hooks.Failed("10.0.0.1:5432", false)
	r.rep.await(t, 1, 5*time.Second)
	return r, up
}

// held is a Hold's outcome.
type held struct {
	waited bool
	err    error
}

// holdOn runs Hold for h on a goroutine of its own.
func holdOn(ctx context.Context, r *rig, h *handle) <-chan held {
	done := make(chan held, 1)
	go func() {
		w, err := r.hooks.Hold(ctx, h)
		done <- held{w, err}
	}()
	return done
}

// await returns a Hold's outcome within d, or fails the test.
func awaitHeld(t *testing.T, ch <-chan held, d time.Duration, what string) held {
	t.Helper()
	select {
	case h := <-ch:
		return h
	case <-time.After(d):
		t.Fatalf("%s: Hold did not return within %v", what, d)
	}
	return held{}
}

// realConn is a connection to the shared server: what a held connect's
// handshake made.
func realConn(t *testing.T) *pgconn.PgConn {
	t.Helper()
	pc, err := pgconn.Connect(context.Background(), pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close(context.Background()) })
	return pc
}

// Issue 30 (resume ≤ 200 ms after the database accepts again): while the
// database is down, a held connect takes the prober's step (Hold returns
// waited, no error) and its connect is the check: the prober makes none
// meanwhile, a second held connect waits on (one connect in flight), and
// when the step's connect completes its handshake the database is back —
// with no check of the prober's after it: the one handshake of the first
// resumed connect is its own — and the other connect goes on.
func TestLeadIsTheCheck(t *testing.T) {
	t.Parallel()
	r, _ := leadRig(t, 10*time.Second)
	lead, other := &handle{}, &handle{}
	first := holdOn(context.Background(), r, lead)
	if h := awaitHeld(t, first, 5*time.Second, "the first held connect"); !h.waited || h.err != nil {
		t.Fatalf("Hold = %+v, want the step (waited, no error)", h)
	}
	checks := r.probes.Load()
	second := holdOn(context.Background(), r, other)
	// The step's connect dials; the prober waits for it: three steps of
	// its pace pass with no check of its own, and the other waits.
	addr := serverAddr(t)
	if _, err := r.hooks.Route(context.Background(), lead, host, addr, false); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(400 * time.Millisecond)
	for time.Now().Before(deadline) {
		select {
		case h := <-second:
			t.Fatalf("a second held connect returned %+v while the step's connect was in flight", h)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if n := r.probes.Load(); n != checks {
		t.Fatalf("%d checks of the prober's while the step's connect was in flight, want 0", n-checks)
	}
	lead.addr = addr
	r.hooks.Dialed(lead, addr, time.Now())
	if err := r.hooks.Validate(context.Background(), lead, host, realConn(t)); err != nil {
		t.Fatal(err)
	}
	if h := awaitHeld(t, second, 5*time.Second, "the second held connect at back"); !h.waited || h.err != nil {
		t.Fatalf("the second Hold = %+v, want waited, no error", h)
	}
	if got := r.rep.await(t, 2, 5*time.Second); got[1] != "back "+addr+" moved []" {
		t.Fatalf("reports %v, want back at %s", got, addr)
	}
	if n := r.probes.Load(); n != checks {
		t.Errorf("%d checks of the prober's after the step's connect: the first resumed connect was not the only handshake", n-checks)
	}
	if st := r.l.State(); st.Down || st.Back.IsZero() {
		t.Errorf("state %+v after back", st)
	}
}

// A step's connect whose dial fails waits again (the connector's Hold
// before its retry) and takes the next step: one dial per step of the
// pace, none of the prober's meanwhile, and its wait still ends at
// HoldFor counted from its first wait, not from each.
func TestLeadFailsAndWaitsWithinHoldFor(t *testing.T) {
	t.Parallel()
	const holdFor = 700 * time.Millisecond
	r, _ := leadRig(t, holdFor)
	h := &handle{}
	began := time.Now()
	checks := int32(-1)
	var dials []time.Time
	for {
		got := awaitHeld(t, holdOn(context.Background(), r, h), 5*time.Second, "a held connect")
		if got.err != nil {
			if !errors.Is(got.err, outage.ErrDown) {
				t.Fatalf("Hold = %+v, want the down error at HoldFor", got)
			}
			break
		}
		if checks < 0 {
			checks = r.probes.Load()
		}
		dials = append(dials, time.Now())
		if _, err := r.hooks.Route(context.Background(), h, host, "10.0.0.1:5432", true); err != nil {
			t.Fatal(err)
		}
		r.hooks.Failed("10.0.0.1:5432", false) // refused; the connector asks Hold again
	}
	took := time.Since(began)
	t.Logf("MEASURED %d steps taken in %v: %v", len(dials), took.Round(time.Millisecond), gaps(dials))
	if took < holdFor || took > holdFor+time.Second {
		t.Errorf("the wait ended after %v, want HoldFor %v from the first wait", took, holdFor)
	}
	if len(dials) < 2 {
		t.Fatalf("%d steps taken, want the connect to take each step while it waits", len(dials))
	}
	if g := gaps(dials); len(g) > 0 && minGapOf(g) < 75*time.Millisecond {
		t.Errorf("steps %v apart: more than one dial per step of the pace (100 ms ± 20 %%)", g)
	}
	if n := r.probes.Load(); n > checks+1 {
		t.Errorf("%d checks of the prober's while a connect took the steps, want at most one (a step no connect was waiting at)", n-checks)
	}
}

// A step's connect that ends without a retry to tell — its socket closed
// before its handshake completed with no sign of the database down (a
// server that answered with a refusal), or its connector gave up on it (a
// failure it does not retry: Ended) — ends the step with no verdict, and
// the next check is the prober's own, which counts a server that answers.
func TestLeadEndedSilentlyProberChecks(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"socket closed", "connect ended"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			testLeadEndedSilently(t, how)
		})
	}
}

func testLeadEndedSilently(t *testing.T, how string) {
	r, up := leadRig(t, 10*time.Second)
	lead, other := &handle{}, &handle{}
	if h := awaitHeld(t, holdOn(context.Background(), r, lead), 5*time.Second, "the first held connect"); !h.waited || h.err != nil {
		t.Fatalf("Hold = %+v, want the step", h)
	}
	second := holdOn(context.Background(), r, other)
	checks := r.probes.Load()
	if _, err := r.hooks.Route(context.Background(), lead, host, "10.0.0.1:5432", false); err != nil {
		t.Fatal(err)
	}
	up.Store(true) // the server answers, with a refusal to the step's connect
	if how == "socket closed" {
		r.hooks.Closed(lead)
	} else {
		r.hooks.Ended(lead, errors.New("a failure not retried"))
	}
	if h := awaitHeld(t, second, 5*time.Second, "the other held connect at back"); !h.waited || h.err != nil {
		t.Fatalf("the other Hold = %+v, want released at back", h)
	}
	if n := r.probes.Load(); n != checks+1 {
		t.Errorf("%d checks of the prober's after a step's connect ended silently, want 1 (its own, which found the server answering)", n-checks)
	}
	if st := r.l.State(); st.Down {
		t.Errorf("state %+v: still down", st)
	}
}

func minGapOf(g []time.Duration) time.Duration {
	least := g[0]
	for _, d := range g[1:] {
		least = min(least, d)
	}
	return least
}
