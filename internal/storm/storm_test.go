package storm_test

import (
	"bytes"
	"encoding/json"
	"image/png"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/internal/storm"
)

// The goals of an earlier issue for holdfast's defaults of then, the
// plain budget.
const (
	goalPeakAfter  = 1.2             // ×steady, after the dependency returns
	goalRetryShare = 0.10            // retries ÷ first attempts
	goalRecovery   = 2 * time.Second // from the dependency's return
)

// The goals of the budget relative to demand (retry.DemandBudget), at
// every request rate of demandRates.
const (
	goalDemandRetryShare = 0.05 // retries ÷ first attempts
	goalDemandPeak       = 1.3  // peak during the outage ÷ no retry's
	// demandBurst is the retries per pod that DemandBudget allows at the
	// start of an outage, two (a lone connect keeps its three attempts):
	// at low rates they alone exceed goalDemandPeak, so there the check
	// is that the busiest second holds no more than them.
	demandBurst = 2.2
)

var demandRates = []float64{2, 5, 10, 20}

// runAll runs every strategy against dependency d with pods pods.
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
			none, naive, backoff, hf, demand := rs[storm.NoRetry], rs[storm.Naive], rs[storm.BackoffOnly], rs[storm.PlainBudget], rs[storm.Demand]
			logTable(t, none, naive, backoff, hf, demand, rs[storm.Holdfast])
			if !(demand.RetryShare < hf.RetryShare && demand.Total <= hf.Total && demand.PeakOutage <= goalDemandPeak*none.PeakOutage && demand.PeakOutage < hf.PeakOutage) {
				t.Errorf("demand budget: retries %.1f%%, total %.1f×, peak during %.1f×; holdfast defaults %.1f%%, %.1f×, %.1f×; no retry's peak %.1f×: want fewer retries, no more load and a peak under the defaults' and within 1.3× no retry's",
					100*demand.RetryShare, demand.Total, demand.PeakOutage, 100*hf.RetryShare, hf.Total, hf.PeakOutage, none.PeakOutage)
			}
			if demand.Recovery > goalRecovery || demand.PeakAfter > 1.1*none.PeakAfter {
				t.Errorf("demand budget: recovery %v, peak after %.1f×; want within %v and no higher than no retry's %.1f×", demand.Recovery, demand.PeakAfter, goalRecovery, none.PeakAfter)
			}
			if none.RetryShare != 0 || naive.RetryShare < 1.9 || backoff.RetryShare < 1.9 {
				t.Errorf("retry shares %.2f, %.2f, %.2f: want 0 without retry and about 2 (two retries per connect) without a budget",
					none.RetryShare, naive.RetryShare, backoff.RetryShare)
			}
			if hf.RetryShare > 0.12 {
				t.Errorf("plain budget retries %.1f%% of first attempts, want about 10%% at most", 100*hf.RetryShare)
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

// TestPlainBudgetGoals10000Pods runs the plain budget (holdfast's
// defaults before the outage hold) on the full fleet of RESULTS.md (a
// tenth of it under the race detector or -short) and checks the goals an earlier
// issue set for it: the retry share and the recovery time are met; the
// peak after recovery is not (see RESULTS.md), and is logged.
// TestHoldfastDefaultsGoals checks today's defaults.
func TestPlainBudgetGoals10000Pods(t *testing.T) {
	t.Parallel()
	for _, d := range []storm.Dependency{storm.Database, storm.TokenAPI} {
		t.Run(d.String(), func(t *testing.T) {
			t.Parallel()
			c := storm.Default(d, storm.Named(storm.PlainBudget))
			if raceEnabled || testing.Short() {
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
	c := storm.Default(storm.Database, storm.Named(storm.Holdfast))
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
		{"invalid hold", func(c *storm.Config) { h := *c.Strategy.Hold; h.DownAfter = 0; c.Strategy.Hold = &h }},
	} {
		c := storm.Default(storm.Database, storm.Named(storm.Holdfast))
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
// outage, under the plain budget. When each fetched token refunded the
// budget (the factory before it refunded only completed handshakes), the
// budget no longer bounded the retries: more than four times as many as
// with the refund on completed handshakes only, which is what the factory
// does now, whatever its budget.
func TestTokenRefundVoidsTheBudget(t *testing.T) {
	t.Parallel()
	hf := storm.Named(storm.PlainBudget)
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

// TestDemandBudgetGoals runs no retry, the plain budget (holdfast's old
// defaults) and the budget relative to demand (retry.DemandBudget), alone,
// at every rate of demandRates,
// on 1,000 pods (250 under the race detector), and checks the goals: the
// demand budget's retries stay within 5 % of first attempts at every
// rate, and its peak during the outage within 1.3× no retry's, or, where
// the two retries a pod's lone connect keeps exceed that (the database
// outage below 10 requests/s per pod), its busiest second holds no more
// than them. The plain budget's share at 2 requests/s shows that the check
// tells the budgets apart.
func TestDemandBudgetGoals(t *testing.T) {
	t.Parallel()
	pods := 1000
	if raceEnabled || testing.Short() {
		pods = 250
	}
	for _, d := range []storm.Dependency{storm.Database, storm.TokenAPI} {
		t.Run(d.String(), func(t *testing.T) {
			t.Parallel()
			for _, rate := range demandRates {
				rs := map[string]*storm.Result{}
				for _, name := range []string{storm.NoRetry, storm.PlainBudget, storm.Demand} {
					c := storm.Default(d, storm.Named(name))
					c.Pods, c.RequestRate = pods, rate
					r, err := storm.Run(c)
					if err != nil {
						t.Fatal(err)
					}
					rs[name] = r
				}
				none, hf, demand := rs[storm.NoRetry], rs[storm.PlainBudget], rs[storm.Demand]
				rel := demand.PeakOutage / none.PeakOutage
				extra := (demand.PeakOutage - none.PeakOutage) * demand.Steady / float64(pods) // retries per pod in the busiest second
				t.Logf("%g requests/s: demand budget %.1f%% retries, peak during %.1f× (%.2f× no retry's, %.2f retries per pod over it); plain budget %.1f%%, %.2f×",
					rate, 100*demand.RetryShare, demand.PeakOutage, rel, extra, 100*hf.RetryShare, hf.PeakOutage/none.PeakOutage)
				if demand.RetryShare > goalDemandRetryShare {
					t.Errorf("%g requests/s: retries are %.1f%% of first attempts, goal %.0f%%", rate, 100*demand.RetryShare, 100*goalDemandRetryShare)
				}
				if rel > goalDemandPeak && extra > demandBurst {
					t.Errorf("%g requests/s: peak during the outage %.2f× no retry's (%.2f retries per pod over it), goal %.1f× or at most the budget's burst of %.1f",
						rate, rel, extra, goalDemandPeak, demandBurst)
				}
				if rate >= 10 && rel > goalDemandPeak {
					t.Errorf("%g requests/s: peak during the outage %.2f× no retry's, goal %.1f×", rate, rel, goalDemandPeak)
				}
				if demand.Recovery > goalRecovery {
					t.Errorf("%g requests/s: recovery took %v, goal %v", rate, demand.Recovery, goalRecovery)
				}
				if rate == 2 && hf.RetryShare <= goalDemandRetryShare {
					t.Errorf("plain budget at 2 requests/s: %.1f%% retries, want over %.0f%% (the plain bucket's allowance is per second, not per request)",
						100*hf.RetryShare, 100*goalDemandRetryShare)
				}
			}
		})
	}
}

// TestJSONRows: cmd/storm -json prints {"rows": [...]} with the fields
// its users read.
func TestJSONRows(t *testing.T) {
	t.Parallel()
	c := storm.Default(storm.Database, storm.Named(storm.Demand))
	c.Pods, c.RequestRate = 20, 5
	r, err := storm.Run(c)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := storm.JSON(&buf, []*storm.Result{r, r}); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Rows []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("%v:\n%s", err, buf.String())
	}
	if len(got.Rows) != 2 {
		t.Fatalf("%d rows, want 2:\n%s", len(got.Rows), buf.String())
	}
	row := got.Rows[0]
	for _, k := range []string{"dependency", "strategy", "rate", "peak_during", "peak_after", "total", "retries_pct", "recovery_s",
		"first_per_pod", "retries_per_pod", "probes_per_pod", "median_back_s", "every_pod_back_s", "floor_s", "reconnect_attempts", "floor_at_attempts_s", "requests", "failed"} {
		if _, ok := row[k]; !ok {
			t.Errorf("row has no %q: %v", k, row)
		}
	}
	if row["dependency"] != "database" || row["strategy"] != storm.Demand || row["rate"] != 5.0 || row["peak_during"] != r.PeakOutage {
		t.Errorf("row = %v, want the run's dependency, strategy, rate and figures", row)
	}
	if _, ok := row["hold"]; ok {
		t.Errorf("row of a strategy without a hold has one: %v", row)
	}
	// holdfast's defaults beside no retry: the hold's parameters, and the
	// peak during the outage relative to no retry's.
	var rs []*storm.Result
	for _, name := range []string{storm.NoRetry, storm.Holdfast} {
		c := storm.Default(storm.Database, storm.Named(name))
		c.Pods, c.RequestRate = 20, 5
		r, err := storm.Run(c)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	buf.Reset()
	if err := storm.JSON(&buf, rs); err != nil {
		t.Fatal(err)
	}
	got.Rows = nil
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	hold := got.Rows[1]
	if hold["strategy"] != storm.Holdfast || hold["hold"] != storm.DefaultHold().String() ||
		hold["peak_during_vs_no_retry"] != rs[1].PeakOutage/rs[0].PeakOutage || hold["probes_per_pod"] != rs[1].ProbesPerPod {
		t.Errorf("holdfast defaults' row = %v, want its hold, probes and peak relative to no retry's", hold)
	}
	var tb strings.Builder
	if err := storm.RateTable(&tb, []*storm.Result{r}); err != nil || strings.Count(tb.String(), "\n") != 3 {
		t.Errorf("RateTable = %v:\n%s", err, tb.String())
	}
}

func TestNamed(t *testing.T) {
	t.Parallel()
	for _, s := range storm.Strategies() {
		if got := storm.Named(s.Name); got.Name != s.Name || got.Policy != s.Policy {
			t.Errorf("Named(%q) = %+v", s.Name, got)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("Named of an unknown name did not panic")
		}
	}()
	storm.Named("no such strategy")
}
