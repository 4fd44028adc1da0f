package main

import (
	"fmt"
	"io"
	"time"

	"github.com/holdfast-db/holdfast/examples/harness"
	"github.com/holdfast-db/holdfast/examples/timeline"
	"github.com/holdfast-db/holdfast/fakes/bluegreentest"
)

// print writes the holdfast timeline and the side-by-side table.
func (r *Result) print(w io.Writer) {
	fmt.Fprintf(w, "\nsimulated switchover (%s): IN_PROGRESS lasted %.0f ms; primary afterwards: %s\n", r.Scenario, r.InProgressMS, r.Primary)
	for _, e := range r.Script {
		fmt.Fprintf(w, "  %8.0f ms  %s\n", e.OffsetMS, e.Event)
	}
	fmt.Fprintf(w, "\nholdfast timeline summary:\n%s\n\n", r.summary)
	t := harness.Table[ClientResult]{W: w, LabelWidth: 30, ColumnWidth: 12, Clients: r.Clients}
	t.Counts("failed requests", errorNames)
	harness.RetryRows(t)
	t.Row("longest pause (ms)", func(c ClientResult) string { return fmt.Sprintf("%.0f", c.MaxPauseMS) })
	t.Row("p50 during switchover (ms)", func(c ClientResult) string { return fmt.Sprintf("%.1f", c.P50MS) })
	t.Row("p99 during switchover (ms)", func(c ClientResult) string { return fmt.Sprintf("%.1f", c.P99MS) })
	harness.WriteRows(t)
	completed := false
	for _, c := range r.Clients {
		completed = completed || c.OKAfterCompleted != nil
	}
	if completed {
		t.Row("ok after COMPLETED", func(c ClientResult) string { return fmt.Sprint(*c.OKAfterCompleted) })
	}
	if n := r.stuckOnOldBlue(); n != "" {
		fmt.Fprintf(w, "%s: 0 ok after COMPLETED: %s\n", n, stuckOnOldBlue)
	}
	if r.AliasedCerts > 0 {
		fmt.Fprintf(w, "\nholdfast accepted %d certificates for the green counterpart of the blue name asked for\n", r.AliasedCerts)
	}
	fmt.Fprintf(w, `
held (in the progress lines): connects, Acquires and statements holdfast holds at that
  moment, waiting for the switchover to move on instead of failing them.
outcome unknown: requests whose COMMIT was sent and whose answer was lost: holdfast's runner
  returns holdfast.ErrOutcomeUnknown and never runs them again; this program then looks the
  id up on the primary (done if found, run again if not), as an application with an
  idempotency key does ("-": a hand-written retry loop cannot tell, and re-runs them).
application retries: runs of a whole transaction after its first, by the workload's own
  retry: for pgxpool the loop this program writes around each transaction (pgxpool itself
  retries nothing), for holdfast its runner, which re-runs only what did not commit.
longest pause: the slowest single request, retries included. Plain pgxpool does not wait:
  its requests get an error at once (terminated or refused while blue is closed, read-only
  on old blue afterwards) and fail after the same few retries, so its pauses stay short.
  holdfast holds its requests through the switch window (IN_PROGRESS lasted %.0f ms here)
  and then completes them on the new primary: a longer pause, but no failed request.
`, r.InProgressMS)
}

// chart is the run as a timeline (package examples/timeline), from begin
// to end: each client's requests by the time they finished, its slowest
// request as its longest pause, the script's statuses as phases and its
// steps that move traffic as marks.
func (r *Result) chart(begin, end time.Time, sres bluegreentest.SwitchoverResult, clients []*harness.Client) timeline.Chart {
	c := timeline.Chart{
		Title:  fmt.Sprintf("Blue/green switchover (scenario %s): plain pgxpool vs holdfast, %d workers each", r.Scenario, r.Workers),
		Length: end.Sub(begin),
	}
	for _, cl := range clients {
		s := cl.Series(begin)
		var slowest harness.Record
		for _, rec := range cl.Records() {
			if rec.Took() > slowest.Took() {
				slowest = rec
			}
		}
		if slowest.Took() > 0 {
			from := slowest.Start.Sub(begin)
			s.Pause = &timeline.Span{From: from, To: from + slowest.Took(), Label: fmt.Sprintf("longest pause %.0f ms", ms(slowest.Took()))}
		}
		c.Series = append(c.Series, s)
	}
	c.Subtitle = fmt.Sprintf("IN_PROGRESS lasted %.0f ms, primary afterwards: %s; failed requests: %s", r.InProgressMS, r.Primary, harness.Failures(r.Clients))
	// The phases: each status the script wrote, until the next (or the end).
	phases := map[string]struct{ label, color string }{
		bluegreentest.StatusInitiated:      {"PREPARATION", "#fdf1c7"},
		bluegreentest.StatusInProgress:     {"IN_PROGRESS", "#f9d5d3"},
		bluegreentest.StatusPostProcessing: {"POST", "#d6e6f7"},
		bluegreentest.StatusCompleted:      {"COMPLETED", "#d7f0dc"},
		bluegreentest.ScriptRolledBack:     {"ROLLED BACK", "#e8e8e8"},
	}
	marks := map[string]string{
		bluegreentest.ScriptGreenWritable:  "green writable",
		bluegreentest.ScriptBlueReopened:   "old blue reopens, read-only",
		bluegreentest.ScriptBlueDNSUpdated: "blue names resolve to green",
		bluegreentest.ScriptCertsRenewed:   "certificates renewed",
	}
	for _, e := range sres.Events {
		at := e.Time.Sub(begin)
		if p, ok := phases[e.Name]; ok {
			if n := len(c.Bands); n > 0 {
				c.Bands[n-1].To = at
			}
			c.Bands = append(c.Bands, timeline.Band{Label: p.label, From: at, To: c.Length, Color: p.color})
		}
		if m, ok := marks[e.Name]; ok {
			c.Marks = append(c.Marks, timeline.Mark{Label: m, At: at})
		}
	}
	c.Notes = append(c.Notes, "longest pause: the slowest single request, retries included; holdfast holds its requests through IN_PROGRESS instead of failing them.")
	if n := r.stuckOnOldBlue(); n != "" {
		c.Notes = append(c.Notes, n+": 0 ok after COMPLETED: "+stuckOnOldBlue+".")
	}
	return c
}

// stuckOnOldBlue is why a plain pool succeeds in nothing after COMPLETED.
const stuckOnOldBlue = "its connections opened on old blue in POST, before DNS moved; " +
	"old blue is read-only (25006) and pgxpool keeps them"

// stuckOnOldBlue names the plain client when it succeeded in nothing after
// COMPLETED and failed there with 25006 (its connections on old blue).
func (r *Result) stuckOnOldBlue() string {
	for _, c := range r.Clients {
		if !c.Runner && c.OKAfterCompleted != nil && *c.OKAfterCompleted == 0 && c.readOnlyAfterCompleted > 0 {
			return c.Name
		}
	}
	return ""
}

// errorNames name the error keys in the table.
var errorNames = map[string]string{
	"57P01":     "57P01 terminated",
	"53300":     "53300 conn refused",
	"25006":     "25006 read-only",
	"57P03":     "57P03 cannot connect",
	"28000":     "28000 IAM token rejected",
	keyCertName: "certificate not for the name",
}
