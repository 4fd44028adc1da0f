package storm_test

import (
	"bytes"
	"image/png"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/internal/storm"
)

// The goals for holdfast's defaults.
const (
	goalPeakAfter  = 1.2             // ×steady, after the dependency returns
	goalRetryShare = 0.10            // retries ÷ first attempts
	goalRecovery   = 2 * time.Second // from the dependency's return
)

// runAll runs the four strategies against dependency d with pods pods.
func runAll(t *testing.T, d storm.Dependency, pods int) map[string]*storm.Result {
	t.Helper()
	rs := map[string]*storm.Result{}
	for _, s := range storm.Strategies() {
		c := storm.Default(d, s)
		c.Pods = pods
		r, err := storm.Run(c)
		if err != nil {
			t.Fatal(err)
		}
		rs[s.Name] = r
	}
	return rs
}

func logTable(t *testing.T, rs ...*storm.Result) {
	t.Helper()
	var b strings.Builder
	if err := storm.Table(&b, rs); err != nil {
		t.Fatal(err)
	}
	t.Logf("steady state %.0f attempts/s\n%s", rs[0].Steady, b.String())
}

// TestStrategiesOrder checks, on a fleet of 500 pods (pods are
// independent: a small fleet shows the same ratios, with more noise), what
// each strategy does to the failing dependency relative to the others.
func TestStrategiesOrder(t *testing.T) {
	t.Parallel()
	for _, d := range []storm.Dependency{storm.Database, storm.TokenAPI} {
		t.Run(d.String(), func(t *testing.T) {
			t.Parallel()
			rs := runAll(t, d, 500)
			none, naive, backoff, hf := rs["no retry"], rs["naive 3× retry"], rs["backoff only"], rs["holdfast defaults"]
			logTable(t, none, naive, backoff, hf)
			if none.RetryShare != 0 || naive.RetryShare < 1.9 || backoff.RetryShare < 1.9 {
				t.Errorf("retry shares %.2f, %.2f, %.2f: want 0 without retry and about 2 (two retries per connect) without a budget",
					none.RetryShare, naive.RetryShare, backoff.RetryShare)
			}
			if hf.RetryShare > 0.12 {
				t.Errorf("holdfast retries %.1f%% of first attempts, want about 10%% at most", 100*hf.RetryShare)
			}
			if !(none.Total <= hf.Total && hf.Total <= 1.2*none.Total && hf.Total < backoff.Total/2 && hf.Total < naive.Total/2) {
				t.Errorf("total load ×steady: none %.1f, holdfast %.1f, backoff %.1f, naive %.1f: want holdfast within 1.2× of none and under half of the others",
					none.Total, hf.Total, backoff.Total, naive.Total)
			}
			if !(none.PeakOutage <= hf.PeakOutage && hf.PeakOutage < backoff.PeakOutage && hf.PeakOutage < naive.PeakOutage) {
				t.Errorf("peak during the outage ×steady: none %.1f, holdfast %.1f, backoff %.1f, naive %.1f: want holdfast between none and the others",
					none.PeakOutage, hf.PeakOutage, backoff.PeakOutage, naive.PeakOutage)
			}
			if !(hf.PeakAfter <= 1.1*none.PeakAfter && hf.PeakAfter < backoff.PeakAfter) {
				t.Errorf("peak after recovery ×steady: none %.1f, holdfast %.1f, backoff %.1f: want holdfast no higher than none and under backoff",
					none.PeakAfter, hf.PeakAfter, backoff.PeakAfter)
			}
			if hf.Recovery > goalRecovery || hf.Recovery > backoff.Recovery {
				t.Errorf("recovery: holdfast %v, backoff %v: want holdfast within %v and no later than backoff", hf.Recovery, backoff.Recovery, goalRecovery)
			}
		})
	}
}

// TestHoldfastGoals10000Pods runs holdfast's defaults on the full fleet of
// RESULTS.md (a tenth of it under the race detector) and checks the
// issue's goals: the retry share and the recovery time are met; the peak
// after recovery is not (see RESULTS.md), and is logged.
func TestHoldfastGoals10000Pods(t *testing.T) {
	t.Parallel()
	for _, d := range []storm.Dependency{storm.Database, storm.TokenAPI} {
		t.Run(d.String(), func(t *testing.T) {
			t.Parallel()
			c := storm.Default(d, storm.Strategies()[3])
			if raceEnabled {
				c.Pods /= 10
			}
			r, err := storm.Run(c)
			if err != nil {
				t.Fatal(err)
			}
			logTable(t, r)
			if r.Disconnected != c.Pods {
				t.Errorf("%d pods had no connection when the outage ended, want all %d", r.Disconnected, c.Pods)
			}
			if r.RetryShare > goalRetryShare {
				t.Errorf("retries are %.1f%% of first attempts, goal %.0f%%", 100*r.RetryShare, 100*goalRetryShare)
			}
			if r.Recovery > goalRecovery {
				t.Errorf("recovery took %v, goal %v", r.Recovery, goalRecovery)
			}
			if r.PeakAfter > goalPeakAfter {
				t.Logf("goal not met: peak after recovery %.1f× steady, goal %.1f× (every pod reconnects within a second)", r.PeakAfter, goalPeakAfter)
			}
		})
	}
}

func TestRunIsDeterministic(t *testing.T) {
	t.Parallel()
	c := storm.Default(storm.Database, storm.Strategies()[3])
	c.Pods = 500
	a, err := storm.Run(c)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := storm.Run(c)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("two runs of one config differ:\n%+v\n%+v", a, b)
	}
	c.Seed++
	if other, _ := storm.Run(c); reflect.DeepEqual(a.First, other.First) {
		t.Error("another seed gave the same load")
	}
}

func TestRunRejectsInvalidConfig(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		change func(*storm.Config)
	}{
		{"no pods", func(c *storm.Config) { c.Pods = 0 }},
		{"bin not dividing a second", func(c *storm.Config) { c.Bin = 300 * time.Millisecond }},
		{"outage too early", func(c *storm.Config) { c.OutageStart = 5 * time.Second }},
		{"invalid policy", func(c *storm.Config) { c.Strategy.Policy.MaxAttempts = 0 }},
	} {
		c := storm.Default(storm.Database, storm.Strategies()[3])
		tt.change(&c)
		if _, err := storm.Run(c); err == nil {
			t.Errorf("%s: Run returned no error", tt.name)
		}
	}
}

func TestPlotAndTable(t *testing.T) {
	t.Parallel()
	var rs []*storm.Result
	for _, d := range []storm.Dependency{storm.Database, storm.TokenAPI} {
		for _, s := range storm.Strategies() {
			c := storm.Default(d, s)
			c.Pods = 20
			r, err := storm.Run(c)
			if err != nil {
				t.Fatal(err)
			}
			rs = append(rs, r)
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, storm.Plot(rs)); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() < 800 || b.Dy() < 600 {
		t.Errorf("plot is %v, want a legible size", b)
	}
	var tb strings.Builder
	if err := storm.Table(&tb, rs); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(tb.String(), "\n"); lines != 2+len(rs) {
		t.Errorf("table has %d lines, want a header, a rule and %d rows:\n%s", lines, len(rs), tb.String())
	}
}

// TestTokenRefundVoidsTheBudget: a token function during a database
// outage. When each fetched token refunded the budget (the factory before
// it refunded only completed handshakes), the budget no longer bounded the
// retries: more than four times as many as with the refund on completed
// handshakes only, which is what holdfast's defaults do now.
func TestTokenRefundVoidsTheBudget(t *testing.T) {
	t.Parallel()
	hf := storm.Strategies()[3]
	before := hf
	before.Name, before.TokenRefund = "token refunds", true
	var rs []*storm.Result
	for _, s := range []storm.Strategy{hf, before} {
		c := storm.Default(storm.Database, s)
		c.Pods = 500
		r, err := storm.Run(c)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	logTable(t, rs...)
	if rs[0].RetryShare > goalRetryShare || rs[1].RetryShare < 4*rs[0].RetryShare {
		t.Errorf("retry shares: %.3f now, %.3f with token refunds; want the first within %.2f and the second over four times it",
			rs[0].RetryShare, rs[1].RetryShare, goalRetryShare)
	}
}
