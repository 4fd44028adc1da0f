package drain

import (
	"context"
	"errors"
	"testing"
	"time"
)

// stepClock is a fake clock that moves forward by exactly the duration of
// every timer it is asked for, and fires the timer at once.
type stepClock struct {
	now   time.Time
	waits []time.Duration
}

func (c *stepClock) Now() time.Time { return c.now }

func (c *stepClock) After(d time.Duration) (<-chan time.Time, func()) {
	c.waits = append(c.waits, d)
	c.now = c.now.Add(d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch, func() {}
}

// script returns a probe that reports counts[i] on poll i (the last count
// repeats) and records the clock reading of each poll.
func script(clk *stepClock, at *[]time.Duration, counts ...int64) Probe {
	start := clk.now
	i := 0
	return func(context.Context) (Usage, error) {
		*at = append(*at, clk.now.Sub(start))
		n := counts[min(i, len(counts)-1)]
		i++
		return Usage{{What: "acquired connection", N: n}}, nil
	}
}

func TestWaitSchedule(t *testing.T) {
	t.Parallel()
	s := time.Second
	tests := []struct {
		name      string
		cfg       Config
		counts    []int64
		wantAt    []time.Duration // clock reading of each poll
		wantErr   bool
		wantInUse int64
	}{
		{name: "drained at once", cfg: Config{}, counts: []int64{0}, wantAt: []time.Duration{0}},
		{name: "drained on the fourth poll, one per interval", cfg: Config{}, counts: []int64{3, 2, 1, 0}, wantAt: []time.Duration{0, s, 2 * s, 3 * s}},
		{
			name: "last poll exactly at the bound", cfg: Config{Interval: s, Timeout: 3500 * time.Millisecond},
			counts: []int64{1, 1, 1, 1, 0}, wantAt: []time.Duration{0, s, 2 * s, 3 * s, 3500 * time.Millisecond},
		},
		{
			name: "bound passes with work in use", cfg: Config{Interval: s, Timeout: 3500 * time.Millisecond},
			counts: []int64{2}, wantAt: []time.Duration{0, s, 2 * s, 3 * s, 3500 * time.Millisecond}, wantErr: true, wantInUse: 2,
		},
		{
			name: "defaults: every second for two minutes", cfg: Config{},
			counts: []int64{1}, wantAt: everySecond(121), wantErr: true, wantInUse: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clk := &stepClock{now: time.Unix(1000, 0)}
			var at []time.Duration
			res, err := wait(context.Background(), tt.cfg, script(clk, &at, tt.counts...), clk)
			if !equal(at, tt.wantAt) {
				t.Errorf("polls at %v, want %v", at, tt.wantAt)
			}
			if !tt.wantErr {
				if err != nil {
					t.Fatalf("wait = %v, want success", err)
				}
				if res.Polls != len(tt.wantAt) || res.Elapsed != tt.wantAt[len(tt.wantAt)-1] {
					t.Errorf("result = %+v, want %d polls in %v", res, len(tt.wantAt), tt.wantAt[len(tt.wantAt)-1])
				}
				return
			}
			var te *TimeoutError
			if !errors.As(err, &te) {
				t.Fatalf("wait = %v, want *TimeoutError", err)
			}
			if te.Cause != nil || te.Polls != len(tt.wantAt) || te.InUse[0].N != tt.wantInUse {
				t.Errorf("error = %+v, want %d polls, %d in use, no cause", te, len(tt.wantAt), tt.wantInUse)
			}
			if te.Elapsed != tt.wantAt[len(tt.wantAt)-1] {
				t.Errorf("Elapsed = %v, want %v", te.Elapsed, tt.wantAt[len(tt.wantAt)-1])
			}
		})
	}
}

func everySecond(n int) []time.Duration {
	d := make([]time.Duration, n)
	for i := range d {
		d[i] = time.Duration(i) * time.Second
	}
	return d
}

func equal(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
