package outagetest_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/holdfast-db/holdfast/fakes/outagetest"
)

// An Aurora Serverless v2 instance that pauses, against plain pgxpool as
// the control: a pool that holds an idle connection keeps it awake
// however long it idles; once the pool is closed the instance pauses
// after AutoPause; a new pool's first request waits for the resume and
// succeeds, delayed by Resume, not failed.
func TestServerless(t *testing.T) {
	t.Parallel()
	const autoPause, resume = 300 * time.Millisecond, time.Second
	began := time.Now()
	s := outagetest.StartServerlessTest(t, outagetest.ServerlessConfig{AutoPause: autoPause, Resume: resume})
	t.Logf("MEASURED start: %s", ms(time.Since(began)))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if s.Endpoint != "orders.cluster-abcdefghijkl.us-east-1.rds.amazonaws.com" {
		t.Errorf("Endpoint %s", s.Endpoint)
	}
	cfg, err := s.PoolConfig(s.Endpoint, "connect_timeout=10")
	if err != nil {
		t.Fatal(err)
	}
	cfg.MinConns = 0

	// A plain pool's idle connection keeps the instance awake: no pause
	// in 5 times AutoPause.
	held := pool(t, cfg)
	if _, err := held.Exec(ctx, "CREATE TABLE t (id int)"); err != nil {
		t.Fatal(err)
	}
	if held.Stat().IdleConns() != 1 || s.Conns() != 1 {
		t.Fatalf("idle connections %d, instance's %d; want 1", held.Stat().IdleConns(), s.Conns())
	}
	timer := time.NewTimer(5 * autoPause)
	for paused := false; !paused; {
		ch := s.Changed()
		if s.Pauses() > 0 || s.Paused() {
			t.Fatalf("paused with a connection held: %v", s.Events())
		}
		select {
		case <-ch:
		case <-timer.C:
			paused = true // the wait is over, not paused
		}
	}
	held.Close()

	// Without it the instance pauses after AutoPause.
	closed := time.Now()
	waitUntil(t, 10*time.Second, "a pause", s.Changed, func() bool { return s.Pauses() == 1 && s.Paused() })
	ev := s.Events()
	if len(ev) != 1 || ev[0].Name != outagetest.EventPaused {
		t.Fatalf("events %+v; want one pause", ev)
	}
	t.Logf("MEASURED pause: %s after the last connection closed (AutoPause %s)", ms(ev[0].At.Sub(closed)), ms(autoPause))
	if d := ev[0].At.Sub(closed); d < autoPause {
		t.Errorf("paused %v after the last connection closed; want AutoPause (%v) at least", d, autoPause)
	}

	// The first request of a new plain pool waits for the resume: delayed,
	// not failed.
	fresh := pool(t, cfg)
	began = time.Now()
	if _, err := fresh.Exec(ctx, "INSERT INTO t VALUES (1)"); err != nil {
		t.Fatalf("first request after the pause: %v", err)
	}
	took := time.Since(began)
	ev = s.Events()
	t.Logf("MEASURED first request after the pause: %s (Resume %s); events:", ms(took), ms(resume))
	timeline(t, began, ev)
	if took < resume || took > resume+5*time.Second {
		t.Errorf("first request after the pause took %v; want Resume (%v) and little more", took, resume)
	}
	if names := eventNames(ev); !slices.Equal(names, []string{outagetest.EventPaused, outagetest.EventResuming, outagetest.EventResumed}) {
		t.Errorf("events %v", names)
	}
	if s.Resumes() != 1 || s.Paused() || s.Conns() != 1 {
		t.Errorf("resumes %d, paused %v, connections %d; want 1, false, 1", s.Resumes(), s.Paused(), s.Conns())
	}
	// The next ones go through at once.
	began = time.Now()
	if _, err := fresh.Exec(ctx, "INSERT INTO t VALUES (2)"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(began); d > resume/2 {
		t.Errorf("second request took %v", d)
	}
	fresh.Close()
	waitUntil(t, 10*time.Second, "connections closed", s.Changed, func() bool { return s.Conns() == 0 })
}

// With StartingUp, a connection attempt to the paused instance is
// refused with 57P03 at once, and resumes it: an attempt after the
// resume connects.
func TestServerlessStartingUp(t *testing.T) {
	t.Parallel()
	s := outagetest.StartServerlessTest(t, outagetest.ServerlessConfig{AutoPause: 200 * time.Millisecond, Resume: time.Second, StartingUp: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	waitUntil(t, 10*time.Second, "a pause", s.Changed, func() bool { return s.Pauses() == 1 && s.Paused() })
	began := time.Now()
	refused(ctx, t, s.DSN(s.Addr(), "connect_timeout=5"), "57P03")
	t.Logf("MEASURED refusal while paused: %s", ms(time.Since(began)))
	waitUntil(t, 10*time.Second, "the resume", s.Changed, func() bool { return !s.Paused() })
	conn, err := pgx.Connect(ctx, s.DSN(s.Addr(), "connect_timeout=5"))
	if err != nil {
		t.Fatalf("after the resume: %v", err)
	}
	conn.Close(context.Background())
	if names := eventNames(s.Events()); !slices.Equal(names, []string{outagetest.EventPaused, outagetest.EventResuming, outagetest.EventResumed}) {
		t.Errorf("events %v", names)
	}
	timeline(t, began, s.Events())
}

func eventNames(ev []outagetest.Event) []string {
	var out []string
	for _, e := range ev {
		out = append(out, e.Name)
	}
	return out
}
