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
	"github.com/holdfast-db/holdfast/fakes/outagetest"
)

// titles say what each scenario plays, and what "back" is in it.
var titles = map[string]struct{ fault, back string }{
	Restart: {"a restart of the server", "the database accepts again"},
	MultiAZ: {"an RDS Multi-AZ DB instance's DNS-only failover", "the endpoint's DNS record moves to the new primary"},
	Demoted: {"a primary demoted behind its DNS name", "the name moves to the new primary"},
}

// print writes the timeline, the side-by-side table, the goals and the
// legend.
func (r *Result) print(w io.Writer) {
	t := titles[r.Scenario]
	fmt.Fprintf(w, "\nsimulated outage (%s): %s; back (%s) %.0f ms after the fault; requests bounded by %.0f ms; client DNS TTL %.0f ms\n",
		r.Scenario, t.fault, t.back, r.OutageMS, r.RequestTimeoutMS, r.DNSTTLMS)
	fmt.Fprintf(w, "\ntimeline (ms from the fault):\n")
	for _, e := range r.Timeline {
		fmt.Fprintf(w, "  %8.0f ms  %-9s  %-28s %s\n", e.OffsetMS, e.Source, e.Event, e.Server)
	}
	fmt.Fprintln(w)
	tab := harness.Table[ClientResult]{W: w, LabelWidth: 32, ColumnWidth: 12, Clients: r.Clients}
	tab.Counts("failed requests", errorNames)
	tab.Row("  of them during the outage", func(c ClientResult) string {
		return fmt.Sprintf("%d of %d", c.FailedDuringOutage, c.DuringOutage)
	})
	harness.RetryRows(tab)
	tab.Row("acknowledged writes", func(c ClientResult) string { return fmt.Sprint(c.Acknowledged) })
	tab.Row("lost writes", func(c ClientResult) string { return fmt.Sprint(c.LostWrites) })
	tab.Row("longest pause (ms)", func(c ClientResult) string { return fmt.Sprintf("%.0f", c.MaxPauseMS) })
	tab.Row("resume after back (ms)", func(c ClientResult) string { return strings.TrimSuffix(msText(c.ResumeAfterBackMS), " ms") })
	tab.Row("connects while down", func(c ClientResult) string { return fmt.Sprint(c.ConnectsWhileDown) })
	tab.Row("hung past deadline", func(c ClientResult) string { return fmt.Sprint(c.HungPastDeadline) })
	tab.Row("slowest request (ms)", func(c ClientResult) string { return fmt.Sprintf("%.0f", c.SlowestMS) })

	fmt.Fprintf(w, "\ngoals:\n")
	for _, g := range r.Goals {
		fmt.Fprintf(w, "  %-70s %-7s (%s)\n", g.Goal, harness.Met(g.Met), g.Measured)
	}
	fmt.Fprintf(w, `
legend:
progress lines: requests that succeeded and failed in that second, and each pool's
  dials in it (pgxpool's connects and retries; holdfast's prober's checks).
back: %s; the outage runs from the fault to it.
failed requests: requests that still failed after the retry (pgxpool: the application's
  loop, up to 5 attempts, each at most 3 s; holdfast: its transaction runner with its
  defaults; each request at most %.0f ms, the outage and 1 s), by SQLSTATE, else by
  holdfast's error class/reason; "of them during the outage": of the requests started
  from the fault to back.
outcome unknown: requests whose COMMIT was sent and whose answer was lost: holdfast's
  runner returns holdfast.ErrOutcomeUnknown and never runs them again; this program then
  looks the request's id up (done if found, run again if not), as an application with
  an idempotency key does ("-": a hand-written loop cannot tell, and re-runs them).
application retries: runs of a whole transaction after its first, by the workload's own
  retry: for pgxpool the loop this program writes around each transaction, for holdfast
  its runner, which re-runs only what did not commit.
lost writes: acknowledged ids missing on the primary at the end: 0 is the goal.
longest pause: the longest time without an acknowledged write.
resume after back: from back to the first write acknowledged after it (held through
  the outage, or started after it).
connects while down: the pool's dials from the fault to back. holdfast's outage layer
  makes one dial per check while the database is down (its prober's, or that of a
  waiting request's connect, which takes the check's turn and keeps its connection):
  a pace that follows the demand (1.1 checks per connect the pool was asked for, at
  most every 100 ms) while requests wait (the outage's first 10 s), then backing
  off; at most %d here.
hung past deadline: requests that ended over %.0f ms after their deadline.
`, t.back, r.RequestTimeoutMS, r.BackoffSteps, ms(hangSlack))
	if n := notes[r.Scenario]; n != "" {
		fmt.Fprint(w, n)
	}
}

// notes are what the legend says of a scenario.
var notes = map[string]string{
	MultiAZ: `silent primary: a request in flight on a connection to it hangs (nothing answers, and
  without a topology nothing pings the primary: WithFailover's monitor does, on clusters
  that publish one): pgxpool's until its deadline, or until the old address answers
  again and resets it; holdfast's until its prober sees the name lead to the new
  primary, which cuts the pool's connections to the old address (a transaction open
  there is run again if the runner's 10 s allow it; a COMMIT in flight: outcome
  unknown). holdfast holds the requests that need a new connection and re-resolves
  the name at each step of its prober.
`,
	Demoted: `demoted primary: a pool's connections made to the name while it led to the demoted
  server stay there; pgxpool's writes on them fail with 25006 for as long as it keeps
  them. holdfast refuses a new connection to a read-only server and holds until a
  writable one answers at the name.
`,
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
// time without an acknowledged write (up to stopAt, as in the table), the
// outage as a phase, the simulator's steps and holdfast's as marks.
func (r *Result) chart(begin, stopAt, end, down, back time.Time, events, logged []outagetest.Event, clients []*harness.Client) timeline.Chart {
	t := titles[r.Scenario]
	c := timeline.Chart{
		Title:  fmt.Sprintf("Outage (%s): plain pgxpool vs holdfast, %d workers each", t.fault, r.Workers),
		Length: end.Sub(begin),
	}
	for _, cl := range clients {
		c.Series = append(c.Series, cl.PauseSeries(begin, stopAt))
	}
	c.Subtitle = fmt.Sprintf("back %.0f ms after the fault, requests bounded by %.0f ms; failed requests: %s",
		r.OutageMS, r.RequestTimeoutMS, harness.Failures(r.Clients))
	c.Bands = []timeline.Band{{Label: "database down", From: down.Sub(begin), To: back.Sub(begin), Color: "#f9d5d3"}}
	for _, e := range events {
		c.Marks = append(c.Marks, timeline.Mark{Label: e.Name, At: e.At.Sub(begin)})
	}
	for _, e := range logged {
		c.Marks = append(c.Marks, timeline.Mark{Label: "holdfast: " + e.Name, At: e.At.Sub(begin)})
	}
	slices.SortStableFunc(c.Marks, func(a, b timeline.Mark) int { return cmp.Compare(a.At, b.At) })
	c.Notes = []string{"longest pause: the longest time without an acknowledged write; back: " + t.back + ".",
		"holdfast holds its requests while the database is down (one prober dials) and lets them go when it answers again."}
	return c
}
