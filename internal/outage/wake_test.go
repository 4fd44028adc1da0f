package outage_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/holdfast-db/holdfast/internal/compose"
	"github.com/holdfast-db/holdfast/internal/outage"
)

// wakeRig is a rig whose pool is cold (WakeFor: the database may have
// paused), whose checks count how many are in flight at once.
func wakeRig(t *testing.T, wakeFor time.Duration, probe func(n int32) (*pgconn.PgConn, []string, error)) (r *rig, most func() int32) {
	t.Helper()
	r = newRigWith(t, 10*time.Second, func(c *outage.Config) {
		c.WakeFor = wakeFor
		c.Cold = func() bool { return true }
	})
	var in, high atomic.Int32
	var n atomic.Int32
	r.probe = func(ctx context.Context, _ []string) (*pgconn.PgConn, []string, error) {
		cur := in.Add(1)
		defer in.Add(-1)
		for {
			h := high.Load()
			if cur <= h || high.CompareAndSwap(h, cur) {
				break
			}
		}
		return probe(n.Add(1))
	}
	return r, high.Load
}

// connects runs k connects through the layer's BeforeConnect at once and
// returns their errors; next counts those let through.
func connects(t *testing.T, r *rig, k int, next *atomic.Int32) []error {
	t.Helper()
	cc, err := pgx.ParseConfig("postgres://app@" + host + ":5432/orders")
	if err != nil {
		t.Fatal(err)
	}
	errs := make([]error, k)
	var wg sync.WaitGroup
	for i := range k {
		wg.Go(func() {
			errs[i] = r.hooks.BeforeConnect(context.Background(), &handle{}, cc, func(context.Context, compose.Conn, *pgx.ConnConfig) error {
				next.Add(1)
				return nil
			})
		})
	}
	wg.Wait()
	return errs
}

// A connect into a cold pool wakes the database: one check at a time
// while it refuses (57P03, as a resuming instance may), the connects held
// meanwhile and let through together once a check connects; no outage
// reported.
func TestWake(t *testing.T) {
	t.Parallel()
	r, most := wakeRig(t, 10*time.Second, func(n int32) (*pgconn.PgConn, []string, error) {
		if n <= 3 {
			return nil, []string{"10.0.0.1:5432"}, &pgconn.PgError{Severity: "FATAL", Code: "57P03", Message: "the database system is starting up"}
		}
		return nil, nil, nil // the real server
	})
	r.arm(t)
	var next atomic.Int32
	done := make(chan []error, 1)
	go func() { done <- connects(t, r, 5, &next) }()
	st := waitState(t, r.l, 5*time.Second, func(st outage.State) bool { return st.Waking })
	if st.Down || st.Since.IsZero() {
		t.Errorf("state %+v; want waking, not down, with since", st)
	}
	errs := <-done
	if err := errors.Join(errs...); err != nil || next.Load() != 5 {
		t.Fatalf("connects: %v, %d let through; want 5, no error", err, next.Load())
	}
	if got := r.probes.Load(); got != 4 || most() != 1 {
		t.Errorf("%d checks, at most %d at once; want 4 (three 57P03), one at a time", got, most())
	}
	if rep := r.rep.all(); len(rep) != 0 {
		t.Errorf("reports %v; want none (a wake is no outage)", rep)
	}
	if st := r.l.State(); st.Waking || st.Down {
		t.Errorf("state %+v after the wake", st)
	}
}

// A wake that does not answer within WakeFor: the connects fail with the
// face's error (ErrDown, Down.Waking), and the database is down.
func TestWakeBound(t *testing.T) {
	t.Parallel()
	const wakeFor = 500 * time.Millisecond
	r, most := wakeRig(t, wakeFor, func(int32) (*pgconn.PgConn, []string, error) {
		return nil, []string{"10.0.0.1:5432"}, refusedErr("10.0.0.1:5432")
	})
	r.arm(t)
	var next atomic.Int32
	began := time.Now()
	errs := connects(t, r, 3, &next)
	took := time.Since(began)
	for _, err := range errs {
		var de *downError
		if !errors.Is(err, outage.ErrDown) || !errors.As(err, &de) || !de.d.Waking || de.d.Bound != wakeFor {
			t.Errorf("connect: %v; want ErrDown, waking, bound WakeFor", err)
		}
	}
	if next.Load() != 0 || took < wakeFor || took > wakeFor+2*time.Second {
		t.Errorf("%d let through, took %v; want none, WakeFor (%v)", next.Load(), took, wakeFor)
	}
	if got := r.rep.await(t, 1, 5*time.Second); got[0] != "down conn-refused 10.0.0.1:5432" {
		t.Errorf("reports %v; want down after WakeFor", got)
	}
	if st := r.l.State(); !st.Down {
		t.Errorf("state %+v after WakeFor; want down", st)
	}
	if most() != 1 {
		t.Errorf("%d checks at once; want 1", most())
	}
}

// A wake that takes a second or more (a paused instance resuming) is
// reported once it ends: the person on call reads why the requests held
// meanwhile waited. It is no outage: nothing else is reported.
func TestWakeReportedWhenLong(t *testing.T) {
	t.Parallel()
	var began time.Time                    // the first check: the wake's start
	const resume = 1100 * time.Millisecond // the instance refuses this long from then
	r, _ := wakeRig(t, 10*time.Second, func(n int32) (*pgconn.PgConn, []string, error) {
		if n == 1 {
			began = time.Now() // checks are one at a time: no race
		}
		if time.Since(began) < resume {
			return nil, []string{"10.0.0.1:5432"}, &pgconn.PgError{Severity: "FATAL", Code: "57P03", Message: "the database system is starting up"}
		}
		return nil, nil, nil // the real server
	})
	r.arm(t)
	var next atomic.Int32
	if err := errors.Join(connects(t, r, 3, &next)...); err != nil || next.Load() != 3 {
		t.Fatalf("connects: %v, %d let through; want 3, no error", err, next.Load())
	}
	rep := r.rep.await(t, 1, 5*time.Second)
	if len(rep) != 1 || !strings.HasPrefix(rep[0], "woke ") {
		t.Errorf("reports %v; want one woke", rep)
	}
}
