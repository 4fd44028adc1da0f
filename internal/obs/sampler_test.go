package obs

import (
	"testing"
	"time"
)

// The sampler writes the first line of a kind, drops the others for a
// second, and then reports how many it dropped; kinds are independent.
func TestSampler(t *testing.T) {
	now := time.Unix(0, 0)
	s := sampler{now: func() time.Time { return now }}
	type want struct {
		ok         bool
		suppressed int
	}
	step := func(key string, w want) {
		t.Helper()
		ok, n := s.allow(key)
		if ok != w.ok || n != w.suppressed {
			t.Fatalf("allow(%q) at %v = %v, %d; want %v, %d", key, now.Sub(time.Unix(0, 0)), ok, n, w.ok, w.suppressed)
		}
	}
	step("a", want{true, 0})
	step("a", want{false, 0})
	step("b", want{true, 0}) // another kind
	now = now.Add(999 * time.Millisecond)
	step("a", want{false, 0})
	now = now.Add(time.Millisecond)
	step("a", want{true, 2}) // two dropped since the last line
	step("a", want{false, 0})
	now = now.Add(time.Hour)
	step("a", want{true, 1})
	step("b", want{true, 0})
}
