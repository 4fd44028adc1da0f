package storm_test

import (
	"testing"

	"github.com/holdfast-db/holdfast/internal/storm"
)

// The admission limit on 500 pods, over the plain budget (holdfast's
// defaults before the hold): one connect in flight per pod never raises
// the peaks over the budget's alone, and a rate per pod lowers both the
// peak during the outage and the peak after it.
func TestAdmissionLowersThePeaks(t *testing.T) {
	t.Parallel()
	run := func(s storm.Strategy) *storm.Result {
		c := storm.Default(storm.Database, s)
		c.Pods = 500
		r, err := storm.Run(c)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	hf := run(storm.Named(storm.PlainBudget))
	rs := []*storm.Result{hf}
	for _, s := range storm.AdmissionStrategies() {
		rs = append(rs, run(s))
	}
	logTable(t, rs...)
	one, rated := rs[2], rs[4] // 1 in flight; 1 in flight at 0.5/s
	if one.PeakOutage > hf.PeakOutage || one.PeakAfter > hf.PeakAfter*1.1 {
		t.Errorf("1 in flight: peaks %.1f×, %.1f× over the plain budget's %.1f×, %.1f×", one.PeakOutage, one.PeakAfter, hf.PeakOutage, hf.PeakAfter)
	}
	if rated.PeakOutage > hf.PeakOutage/2 || rated.PeakAfter > hf.PeakAfter/2 {
		t.Errorf("0.5/s: peaks %.1f×, %.1f×; want under half of the plain budget's %.1f×, %.1f×", rated.PeakOutage, rated.PeakAfter, hf.PeakOutage, hf.PeakAfter)
	}
	if rated.Reconnected > 3*hf.Reconnected+2e9 {
		t.Errorf("0.5/s: every pod connected after %v", rated.Reconnected)
	}
}
