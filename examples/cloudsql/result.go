package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/holdfast-db/holdfast/examples/harness"
	"github.com/holdfast-db/holdfast/examples/timeline"
	fake "github.com/holdfast-db/holdfast/fakes/cloudsqltest"
)

// Result is a run's measurements, the -json object.
type Result struct {
	Scenario string `json:"scenario"`
	Workers  int    `json:"workers"`
	// PlainRetry: the plain client retries its transaction by hand.
	PlainRetry bool `json:"plain_retry"`
	// From and To are the instances before and after the scenario
	// (connection names).
	From string `json:"from"`
	To   string `json:"to"`
	// DowntimeMS is from the cut to the instance accepting again (for a
	// switchover: from its start to the write endpoint moving).
	DowntimeMS float64 `json:"downtime_ms"`
	// FailoverPeriodMS is the connector's check of the write endpoint
	// (dr-switchover only).
	FailoverPeriodMS float64 `json:"failover_period_ms,omitempty"`
	// Readiness are the answers of the holdfast pool's readiness check
	// (package readiness) sampled every 100 ms: "pass", "warn (REASON)",
	// "fail (REASON)".
	Readiness []string       `json:"readiness"`
	Clients   []ClientResult `json:"clients"`
}

// ClientResult is one client's figures.
type ClientResult struct {
	harness.PausedWrites
	// ResumeAfterMS is from the instance accepting again (the write
	// endpoint moving, for a switchover) to the first write acknowledged
	// after it; nil when none was.
	ResumeAfterMS *float64 `json:"resume_after_ms"`
	// FailedInFlight counts the failed requests that were under way at
	// the cut, FailedAfterCut those that started after it (token503: every
	// failure is after it).
	FailedInFlight int `json:"failed_in_flight"`
	FailedAfterCut int `json:"failed_after_cut"`
	// SlowestMS is the longest request, retries included.
	SlowestMS float64 `json:"slowest_ms"`
	// Dials counts the connector's dials of the instance, DialsFailed
	// those refused, PeakDials the most under way at once.
	Dials       int64 `json:"dials"`
	DialsFailed int64 `json:"dials_failed"`
	PeakDials   int64 `json:"peak_dials_in_flight"`
}

func ms(d time.Duration) float64 { return harness.MS(d) }

// measure counts each client's records against what the fake did and
// audits the writes on the writer.
func measure(ctx context.Context, o options, s *sim, sw fake.Switch, begin, stopAt time.Time, clients []*harness.Client) (*Result, error) {
	res := &Result{Scenario: o.Scenario, Workers: o.Workers, PlainRetry: o.PlainRetry, From: sw.From, To: sw.To, DowntimeMS: ms(sw.Accepting.Sub(sw.Cut))}
	if o.Scenario == "dr-switchover" {
		res.FailoverPeriodMS = ms(o.FailoverPeriod)
	}
	for _, cl := range clients {
		committed, err := s.committed(ctx, cl.Name)
		if err != nil {
			return nil, fmt.Errorf("auditing %s's writes: %w", cl.Name, err)
		}
		cr := ClientResult{PausedWrites: cl.PausedWrites(committed, begin, stopAt)}
		var first time.Time
		for _, rec := range cl.Records() {
			cr.SlowestMS = max(cr.SlowestMS, ms(rec.Took()))
			if rec.Err != "" {
				if rec.Start.Before(sw.Cut) {
					cr.FailedInFlight++
				} else {
					cr.FailedAfterCut++
				}
				continue
			}
			if !rec.End.Before(sw.Accepting) && (first.IsZero() || rec.End.Before(first)) {
				first = rec.End
			}
		}
		if !first.IsZero() {
			v := ms(first.Sub(sw.Accepting))
			cr.ResumeAfterMS = &v
		}
		res.Clients = append(res.Clients, cr)
	}
	return res, nil
}

// print writes the table.
func (r *Result) print(w io.Writer) {
	fmt.Fprintf(w, "\nscenario %s: %s -> %s, down %.0f ms", r.Scenario, r.From, r.To, r.DowntimeMS)
	if r.FailoverPeriodMS > 0 {
		fmt.Fprintf(w, ", connector failover period %.0f ms", r.FailoverPeriodMS)
	}
	fmt.Fprintf(w, "; holdfast's readiness answered %s\n", strings.Join(r.Readiness, ", "))
	t := harness.Table[ClientResult]{W: w, LabelWidth: 28, ColumnWidth: 14, Clients: r.Clients}
	t.Row("", func(c ClientResult) string { return c.Name })
	t.Row("requests", func(c ClientResult) string { return fmt.Sprint(c.Requests) })
	t.Row("failed", func(c ClientResult) string { return fmt.Sprint(c.Failed) })
	t.Row("  in flight at the cut", func(c ClientResult) string { return fmt.Sprint(c.FailedInFlight) })
	t.Row("  started after the cut", func(c ClientResult) string { return fmt.Sprint(c.FailedAfterCut) })
	t.Row("outcome unknown, resolved", func(c ClientResult) string { return fmt.Sprint(c.OutcomeUnknown) })
	t.Row("longest pause (ms)", func(c ClientResult) string { return fmt.Sprintf("%.0f", c.MaxPauseMS) })
	t.Row("resume after (ms)", func(c ClientResult) string {
		if c.ResumeAfterMS == nil {
			return "never"
		}
		return fmt.Sprintf("%.0f", *c.ResumeAfterMS)
	})
	t.Row("slowest request (ms)", func(c ClientResult) string { return fmt.Sprintf("%.0f", c.SlowestMS) })
	t.Row("dials (refused)", func(c ClientResult) string { return fmt.Sprintf("%d (%d)", c.Dials, c.DialsFailed) })
	t.Row("most dials at once", func(c ClientResult) string { return fmt.Sprint(c.PeakDials) })
	t.Row("acknowledged writes", func(c ClientResult) string { return fmt.Sprint(c.Acknowledged) })
	t.Row("lost writes", func(c ClientResult) string { return fmt.Sprint(c.LostWrites) })
	for _, c := range r.Clients {
		if len(c.Errors) == 0 {
			continue
		}
		var keys []string
		for k, n := range c.Errors {
			keys = append(keys, fmt.Sprintf("%s %d", k, n))
		}
		slices.Sort(keys)
		fmt.Fprintf(w, "%s errors: %s\n", c.Name, strings.Join(keys, ", "))
	}
}

// chart is the run as a timeline: each client's requests, its longest
// pause, the scenario's outage as a band.
func (r *Result) chart(begin, stopAt, end time.Time, sw fake.Switch, clients []*harness.Client) timeline.Chart {
	c := timeline.Chart{
		Title:  fmt.Sprintf("Cloud SQL %s through cloudsqlconn: plain pgxpool vs holdfast, %d workers each", r.Scenario, r.Workers),
		Length: end.Sub(begin),
	}
	for _, cl := range clients {
		s := cl.PauseSeries(begin, stopAt)
		s.Pause.Label = ""
		c.Series = append(c.Series, s)
	}
	c.Subtitle = "failed requests: " + harness.Failures(r.Clients)
	if sw.Accepting.After(sw.Cut) {
		c.Bands = append(c.Bands, timeline.Band{Label: r.Scenario, From: sw.Cut.Sub(begin), To: sw.Accepting.Sub(begin)})
	} else {
		c.Marks = append(c.Marks, timeline.Mark{Label: r.Scenario, At: sw.Cut.Sub(begin)})
	}
	return c
}
