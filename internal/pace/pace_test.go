package pace

import (
	"math"
	"testing"
	"time"
)

// run drives a Pacer of c through span of virtual time while the database
// is down and a connect waits: an Acquire every 1/rate s (none at 0), the
// sleeps from the Pacer, each asked again at every Acquire (the prober's
// kick), at jitter draw u. It returns the checks' times.
func run(c Config, rate float64, span time.Duration, u float64) []time.Duration {
	p := Pacer{Config: c}
	var asked Asked
	now := time.Duration(0)
	p.Start(now, asked)
	next := time.Duration(math.MaxInt64) // the next Acquire
	if rate > 0 {
		next = time.Duration(float64(time.Second) / rate)
	}
	var checks []time.Duration
	for now < span {
		began := now
		due := began + p.Jittered(p.Next(now, asked, 1, true), u)
		for next < due {
			asked.Acquires++
			if d := began + p.Jittered(p.Again(next, asked, 1, true), u); d < due {
				due = max(d, next)
			}
			next += time.Duration(float64(time.Second) / rate)
		}
		now = due
		checks = append(checks, now)
	}
	return checks
}

// perSecond is the checks' rate within [from, to).
func perSecond(checks []time.Duration, from, to time.Duration) float64 {
	n := 0
	for _, c := range checks {
		if c >= from && c < to {
			n++
		}
	}
	return float64(n) / (to - from).Seconds()
}

// Issue 30, item 5 (polite by default): with Engine, while requests wait
// the prober checks at most Demand (1.1) times per connect the pool was
// asked for — what no retry would have dialed, one attempt per connect —
// and never more often than every Fast: at 2 Acquires a second about
// every 455 ms, at 20 every 100 ms. It fails if the pace stops following
// the demand (a fixed 100 ms makes 10 checks a second at any rate, as
// Steady, the engine's pace before, does: checked too). Virtual time, no
// sleep.
func TestPaceFollowsDemand(t *testing.T) {
	t.Parallel()
	const from, to = 2 * time.Second, FastFor // the demand's window filled; before the doubling
	c := Engine()
	for _, rate := range []float64{1, 2, 4, 5, 10, 20, 50} {
		mid := perSecond(run(c, rate, to, 0.5), from, to)
		most := perSecond(run(c, rate, to, 0), from, to) // every pace at its shortest
		want := max(min(c.Demand*rate, float64(time.Second/Fast)), 1/Waited.Seconds())
		t.Logf("%g Acquires/s: %.2f checks/s (%.2f at the shortest jitter), want about %.2f", rate, mid, most, want)
		if mid > want*1.05 || mid < want*0.85 {
			t.Errorf("%g Acquires/s: %.2f checks a second, want about %.2f (%.1f per Acquire, at most one per %v)", rate, mid, want, c.Demand, Fast)
		}
		if most > want/(1-Jitter)*1.05 {
			t.Errorf("%g Acquires/s: %.2f checks a second at the shortest jitter, want at most %.2f", rate, most, want/(1-Jitter))
		}
		if st := perSecond(run(Steady(), rate, to, 0.5), from, to); math.Abs(st-10) > 0.5 {
			t.Errorf("%g Acquires/s: the steady pace makes %.2f checks a second, want 10 (every 100 ms, whatever the demand)", rate, st)
		}
	}
	// After FastFor the pace doubles at each check, up to LateMost.
	checks := run(c, 20, FastFor+30*time.Second, 0.5)
	if got := perSecond(checks, FastFor+10*time.Second, FastFor+30*time.Second); math.Abs(got-1/c.LateMost.Seconds()) > 0.05 {
		t.Errorf("20 Acquires/s, after %v: %.2f checks a second, want one per %v", FastFor+10*time.Second, got, c.LateMost)
	}
}

// The pace's table. Steady: nothing waiting, doubling from Fast to Idle;
// while suspect, Fast; while down, Fast for FastFor, then doubling to
// Waited — the engine's pace before it followed the demand. Engine: the
// demand's, within Fast and Waited, then doubling after FastFor to
// LateMost; from a second while nothing waits.
func TestPaceOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		c          Config
		step, late int
		waiting    int
		down       bool
		downFor    time.Duration
		asked      int
		span       time.Duration
		want       time.Duration
	}{
		{"steady, idle, first", Steady(), 0, 0, 0, true, 0, 0, 0, 100 * time.Millisecond},
		{"steady, idle, third", Steady(), 2, 0, 0, true, 0, 0, 0, 400 * time.Millisecond},
		{"steady, idle, late", Steady(), 20, 0, 0, true, time.Minute, 0, 0, 5 * time.Second},
		{"steady, suspect", Steady(), 3, 0, 1, false, 0, 0, 0, 100 * time.Millisecond},
		{"steady, down", Steady(), 30, 0, 1, true, 9 * time.Second, 0, 0, 100 * time.Millisecond},
		{"steady, down, after FastFor", Steady(), 90, 0, 1, true, 10 * time.Second, 0, 0, 2 * time.Second},
		{"steady, down, after FastFor, third step", Steady(), 2, 0, 1, true, 10 * time.Second, 0, 0, 400 * time.Millisecond},
		{"engine, idle, first", Engine(), 0, 0, 0, true, 0, 0, 0, time.Second},
		{"engine, down, one blocked, nothing asked", Engine(), 3, 0, 1, true, time.Second, 0, 2 * time.Second, 1818181818},
		{"engine, down, 2/s", Engine(), 3, 0, 1, true, 3 * time.Second, 4, 2 * time.Second, 454545454},
		{"engine, down, 20/s", Engine(), 3, 0, 1, true, 3 * time.Second, 40, 2 * time.Second, 100 * time.Millisecond},
		{"engine, down, 1 in the first 100 ms", Engine(), 0, 0, 1, true, 100 * time.Millisecond, 1, 100 * time.Millisecond, 909090909},
		{"engine, down, 8 blocked, nothing asked", Engine(), 3, 0, 8, true, 5 * time.Second, 0, 2 * time.Second, 227272727},
		{"engine, down, 20/s, after FastFor", Engine(), 90, 0, 1, true, 10 * time.Second, 40, 2 * time.Second, 200 * time.Millisecond},
		{"engine, down, 20/s, after FastFor, third", Engine(), 92, 2, 1, true, 11 * time.Second, 40, 2 * time.Second, 800 * time.Millisecond},
		{"engine, down, 2/s, after FastFor, fourth", Engine(), 30, 3, 1, true, 12 * time.Second, 4, 2 * time.Second, 3 * time.Second},
	} {
		if got := tc.c.Of(tc.step, tc.late, tc.waiting, tc.down, tc.downFor, tc.asked, tc.span); got != tc.want {
			t.Errorf("%s: Of = %v, want %v", tc.name, got, tc.want)
		}
	}
}
