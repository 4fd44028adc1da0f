package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/holdfast-db/holdfast/examples/harness"
	"github.com/holdfast-db/holdfast/examples/timeline"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/fakes/failovertest"
)

// print writes the timeline, the side-by-side table, the goals and the
// legend.
func (r *Result) print(w io.Writer) {
	hang := ""
	if r.Scenario == failovertest.Hang {
		hang = fmt.Sprintf(", hang %.0f ms", r.HangForMS)
	}
	fmt.Fprintf(w, "\nsimulated failover (%s, %s): writer %s → %s; detect %.0f ms, DNS lag %.0f ms%s, client DNS TTL %.0f ms\n",
		r.Scenario, r.Engine, r.OldWriter, r.NewWriter, r.DetectMS, r.DNSLagMS, hang, r.DNSTTLMS)
	fmt.Fprintf(w, "\ntimeline (ms from the writer going down):\n")
	for _, e := range r.Timeline {
		fmt.Fprintf(w, "  %8.0f ms  %-9s  %-26s %s\n", e.OffsetMS, e.Source, e.Event, e.Server)
	}
	fmt.Fprintln(w)
	t := harness.Table[ClientResult]{W: w, LabelWidth: 32, ColumnWidth: 12, Clients: r.Clients}
	t.Counts("failed requests", errorNames)
	harness.RetryRows(t)
	harness.WriteRows(t)
	t.Row("committed, not acknowledged", func(c ClientResult) string { return fmt.Sprint(c.CommittedUnacknowledged) })
	t.Row("longest pause (ms)", func(c ClientResult) string { return fmt.Sprintf("%.0f", c.MaxPauseMS) })
	t.Row("resume after promotion (ms)", resumeList)
	t.Row("slowest request (ms)", func(c ClientResult) string { return fmt.Sprintf("%.0f", c.SlowestMS) })

	reasons := ""
	if len(r.ReadinessReasons) > 0 {
		reasons = " (reasons: " + strings.Join(r.ReadinessReasons, ", ") + ")"
	}
	fmt.Fprintf(w, "\nholdfast readiness answers seen: %s%s\n", strings.Join(r.Readiness, ", "), reasons)
	fmt.Fprintf(w, "holdfast monitor: writer %s, routing %s, %d failover(s) seen, %d connect(s) held then released, %d monitor connection(s)\n",
		r.Monitor.Writer, r.Monitor.Routing, r.Monitor.Failovers, r.Monitor.Held, r.Monitor.MonitorConnects)
	g := r.Goals
	fmt.Fprintf(w, "\ngoals:\n")
	fmt.Fprintf(w, "  holdfast resumes within 1.5 s of each promotion   %s\n", harness.Met(g.ResumeWithin1500ms))
	fmt.Fprintf(w, "  holdfast's longest pause ≤ 20%% of pgxpool's        %s (%.0f%%)\n", harness.Met(g.PauseAtMost20pct), 100*g.PauseRatio)
	fmt.Fprintf(w, "  no lost writes (both clients)                     %s\n", harness.Met(g.NoLostWrites))
	fmt.Fprintf(w, "  holdfast readiness never fails                    %s\n", harness.Met(g.ReadinessNeverFailed))
	if s := g.DatabaseSQL; s != nil {
		c := r.Clients[2]
		fmt.Fprintf(w, "  database/sql meets the same goals                 %s (resume %s ms, pause %.0f%% of pgxpool's, %d lost, %d misplaced, %d failed)\n",
			harness.Met(s.Met), resumeList(c), 100*s.PauseRatio, c.LostWrites, c.MisplacedWrites, c.Failed)
	}
	fmt.Fprint(w, `
legend:
progress lines: requests that succeeded and failed in that second; holdfast= is the
  monitor's routing (normal, held: writer down and no other known, redirect: the
  writer endpoint's DNS still lags the new writer); held counts the connects holdfast
  held while no writer was known and then released, so far.
timeline: the simulator stamps each step once it is done (the writer is down a
  little before "writer down"), so holdfast's first events can show negative offsets.
failed requests: requests that still failed after the retry (pgxpool: the application's
  loop, up to 6 attempts, each at most 3 s; holdfast: its transaction runner with its
  defaults; the request at most 15 s), by SQLSTATE, else by holdfast's error class/reason. failover-held: a connect held
  while no writer was known, past the attempt's bound; failover-cut: a connection to
  the old writer closed by holdfast after the failover; failover-not-writer: a
  connection by the writer endpoint that reached a reader, refused.
acknowledged writes: requests whose COMMIT succeeded.
lost writes: acknowledged ids missing on the writer at the end. Replication is
  synchronous, so an acknowledged write is on the promoted replica: 0 is the goal.
misplaced writes: acknowledged writes whose transaction was answered by a server
  that was not the cluster's writer at any time during the request (a split brain).
  It cannot happen here, and is measured anyway: a server that is not the writer
  runs in hot standby and refuses writes (25006); a hung old writer, resumed, cannot
  commit (its synchronous standby was promoted) and is fenced at once.
committed, not acknowledged: rows present whose request failed (an ambiguous
  COMMIT: applied, the answer lost). Not an error, and not misplaced: the caller
  was told it failed, and a retry of the idempotent transaction finds the row.
outcome unknown: requests whose COMMIT was sent and whose answer was lost: holdfast's
  runner returns holdfast.ErrOutcomeUnknown and never runs them again; this program
  then looks the request's id up on the writer (done if found, run again if not), as
  an application with an idempotency key does ("-": a hand-written loop cannot tell,
  and re-runs them).
application retries: runs of a whole transaction after its first, by the workload's own
  retry: for pgxpool the loop this program writes around each transaction (pgxpool itself
  retries nothing), for holdfast its runner, which re-runs only what did not commit.
longest pause: the longest time without an acknowledged write, from the start
  of the workload to its end. A client stuck on the old writer, back as a reader,
  pauses until the end of the run.
resume after promotion: from the replica taking writes to the first acknowledged
  write that started after it; "never" when none did before the next fault or the
  end of the run (a failback has two promotions).
slowest request: the longest single request, retries included (holdfast holds
  its requests while no writer is known, instead of failing them).
readiness: the answers of a readiness.Checker on the holdfast pool, asked every
  100 ms: warn (reason "failover") while the cluster fails over, never fail.
`)
	if g.DatabaseSQL != nil {
		fmt.Fprint(w, `database/sql (-sql): a *sql.DB of package sqldb over its own holdfast pool of the
  same factory (the same failover monitor: its held connects count in held), the
  same transaction and retry; the retry also runs again a transaction that
  database/sql reports as driver.ErrBadConn (nothing of it was sent;
  transient/sql-bad-conn when it still failed). Its goals are holdfast's: resume
  within 1.5 s of each promotion, longest pause ≤ 20% of pgxpool's, no lost or
  misplaced write, no failed request.
`)
	}
}

// resumeList is c's resume times, in ms ("never" for none).
func resumeList(c ClientResult) string {
	var parts []string
	for _, v := range c.ResumeEachMS {
		if v == nil {
			parts = append(parts, "never")
		} else {
			parts = append(parts, fmt.Sprintf("%.0f", *v))
		}
	}
	return strings.Join(parts, ", ")
}

// errorNames name the error keys in the table.
var errorNames = map[string]string{
	"57P01": "57P01 terminated",
	"57P03": "57P03 cannot connect",
	"25006": "25006 read-only",
	"08006": "08006 connection failure",
}

// chart is the run as a timeline (package examples/timeline), from begin
// to end: each client's requests by the time they finished, its longest
// time without an acknowledged write (up to stopAt, as in the table) as
// its longest pause, the failover's steps as phases and marks.
func (r *Result) chart(begin, stopAt, end time.Time, fres failovertest.Result, m failover.Monitor, clients []*harness.Client) timeline.Chart {
	c := timeline.Chart{
		Title:  fmt.Sprintf("Writer failover (scenario %s, %s): plain pgxpool vs holdfast, %d workers each", r.Scenario, r.Engine, r.Workers),
		Length: end.Sub(begin),
	}
	for _, cl := range clients {
		c.Series = append(c.Series, cl.PauseSeries(begin, stopAt))
	}
	hang := ""
	if r.Scenario == failovertest.Hang {
		hang = fmt.Sprintf(", hang %.0f ms", r.HangForMS)
	}
	c.Subtitle = fmt.Sprintf("detect %.0f ms, DNS lag %.0f ms%s, client DNS TTL %.0f ms; failed requests: %s",
		r.DetectMS, r.DNSLagMS, hang, r.DNSTTLMS, harness.Failures(r.Clients))
	// The phases: no writer from the writer going down to the promotion;
	// a new writer the cluster endpoint does not name yet, from the
	// promotion to the DNS update.
	marks := map[string]string{
		failovertest.EventDNS:           "DNS moved",
		failovertest.EventResumed:       "old writer resumed",
		failovertest.EventFenced:        "old writer fenced",
		failovertest.EventBackAsReader:  "old writer back as reader",
		failovertest.EventFailbackStart: "failback starts",
	}
	var open *timeline.Band
	closeBand := func(at time.Duration) {
		if open != nil {
			open.To = at
			c.Bands = append(c.Bands, *open)
			open = nil
		}
	}
	for _, e := range fres.Events {
		at := e.At.Sub(begin)
		switch e.Name {
		case failovertest.EventWriterDown:
			closeBand(at)
			open = &timeline.Band{Label: "writer down", From: at, Color: "#f9d5d3"}
		case failovertest.EventPromoted:
			closeBand(at)
			open = &timeline.Band{Label: "new writer, DNS lags", From: at, Color: "#fdf1c7"}
		case failovertest.EventDNS:
			closeBand(at)
		}
		if l, ok := marks[e.Name]; ok {
			c.Marks = append(c.Marks, timeline.Mark{Label: l, At: at})
		}
	}
	closeBand(c.Length)
	for _, e := range m.Status().Events {
		if e.Name == "new writer" {
			c.Marks = append(c.Marks, timeline.Mark{Label: "holdfast routes to the new writer", At: e.At.Sub(begin)})
		}
	}
	slices.SortStableFunc(c.Marks, func(a, b timeline.Mark) int { return cmp.Compare(a.At, b.At) })
	c.Notes = []string{"longest pause: the longest time without an acknowledged write. Plain pgxpool reaches the new writer when the cluster endpoint's",
		"DNS moves (and its cache expires); holdfast's monitor routes to it when it is promoted."}
	if n := r.Clients[0].Errors["25006"]; n > 0 {
		c.Notes = append(c.Notes, fmt.Sprintf("pgxpool's %d read-only failures (25006): connections its cached DNS answer sent to the old writer, back as a reader.", n))
	}
	return c
}
