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

// titles say what each operation is.
var titles = map[string]string{
	Switchover: "a managed switchover (SwitchoverGlobalCluster, no data loss)",
	Failover:   "a failover with data loss (FailoverGlobalCluster --allow-data-loss)",
}

// print writes the operation, the timeline, the side-by-side table, the
// audit of a failover, the goals and the legend.
func (r *Result) print(w io.Writer) {
	op := r.Operation
	tls := "no TLS"
	if op.TLS {
		tls = "TLS verify-full"
	}
	detect := ""
	if op.DetectMS != nil {
		detect = fmt.Sprintf(", detect %.0f ms", *op.DetectMS)
	}
	fmt.Fprintf(w, "\nsimulated Aurora Global Database %s: %s\n", op.Op, titles[op.Op])
	fmt.Fprintf(w, "writer %s (%s) → %s (%s); lag %.0f ms%s, DNS lag %.0f ms, client DNS TTL %.0f ms, %s; requests bounded by %.0f ms\n",
		op.OldWriter, op.OldRegion, op.NewWriter, op.NewRegion, op.LagMS, detect, op.DNSLagMS, op.DNSTTLMS, tls, r.RequestTimeoutMS)
	fmt.Fprintf(w, "the switch (%s) at 0 ms; the new primary takes writes at %.0f ms (the simulator's stamp: %.0f ms); the global writer endpoint moves at %.0f ms\n",
		op.Switch, op.WritableMS, op.PromotionMS, op.DNSMovedMS)
	if op.RPOLagMS != nil && op.LostRows != nil {
		fmt.Fprintf(w, "lost: %d rows the old writer had committed (the secondary's last rpo_lag_in_msec before the failure: %.0f ms)\n",
			*op.LostRows, *op.RPOLagMS)
	}
	fmt.Fprintf(w, "\ntimeline (ms from the switch):\n")
	for _, e := range r.Timeline {
		fmt.Fprintf(w, "  %8.0f ms  %-9s  %-24s %s\n", e.OffsetMS, e.Source, e.Event, eventDetail(e))
	}
	fmt.Fprintln(w)
	t := harness.Table[ClientResult]{W: w, LabelWidth: 32, ColumnWidth: 12, Clients: r.Clients}
	t.Counts("failed requests", errorNames)
	t.Row("  of them switch to DNS move", func(c ClientResult) string {
		return fmt.Sprintf("%d of %d", c.FailedDuringSwitch, c.DuringSwitch)
	})
	harness.RetryRows(t)
	harness.WriteRows(t)
	t.Row("writes to the old primary", func(c ClientResult) string { return fmt.Sprint(c.WritesToOldPrimary) })
	t.Row("longest pause (ms)", func(c ClientResult) string { return fmt.Sprintf("%.0f", c.MaxPauseMS) })
	t.Row("resume after promotion (ms)", func(c ClientResult) string {
		return strings.TrimSuffix(msText(c.ResumeAfterPromotionMS), " ms")
	})
	t.Row("slowest request (ms)", func(c ClientResult) string { return fmt.Sprintf("%.0f", c.SlowestMS) })

	if op.Op == Failover {
		n := 0
		if op.LostRows != nil {
			n = *op.LostRows
		}
		fmt.Fprintf(w, "\naudit: rows the old writer had committed and the new writer lacks (%d)\n", n)
		for _, l := range op.Lost {
			fmt.Fprintf(w, "  %-9s %3d rows, %3d acknowledged, %d acknowledged and lost but not listed: %s\n",
				l.Client, len(l.IDs), l.Acknowledged, l.Unlisted, idRanges(l.IDs, idBase[l.Client]))
		}
	}
	if m := r.Monitor; m != nil {
		region := ""
		if m.WriterRegion != "" {
			region = " in " + m.WriterRegion
		}
		fmt.Fprintf(w, "\nholdfast monitor: writer %s%s, routing %s, %d failover(s) seen, %d connect(s) held then released, %d monitor connection(s)\n",
			m.Writer, region, m.Routing, m.Failovers, m.Held, m.MonitorConnects)
	} else {
		fmt.Fprintf(w, "\nholdfast monitor: none (holdfast routes no failover on the global writer endpoint: it behaves as plain pgxpool)\n")
	}
	fmt.Fprintf(w, "\ngoals:\n")
	for _, g := range r.Goals {
		fmt.Fprintf(w, "  %-64s %-7s (%s)\n", g.Goal, harness.Met(g.Met), g.Measured)
	}
	fmt.Fprint(w, legend)
	if op.Op == Failover {
		fmt.Fprint(w, failoverLegend)
	}
}

const legend = `
legend:
progress lines: requests that succeeded and failed in that second; holdfast= is the
  monitor's routing (normal; redirect: the global writer endpoint's DNS still lags the
  new writer; held: no writer known), "off" when holdfast routes no failover there.
the switch: the writer refusing writes (switchover: default_transaction_read_only, so
  that writes fail with 25006), or the primary Region going down (failover).
timeline: the simulator stamps each step once it is done; holdfast's events are its
  failover monitor's (region switchover, region failover: the writer moved to another
  Region; region failover names the Region that lost writes and the lag it lost).
failed requests: requests that still failed after the retry (pgxpool: the application's
  loop, up to 6 attempts, each at most 3 s; holdfast: its transaction runner with its
  defaults), by SQLSTATE, else by holdfast's error class/reason; "switch to DNS move":
  of the requests in flight at some time from the switch to the global writer
  endpoint moving.
outcome unknown: requests whose COMMIT was sent and whose answer was lost: holdfast's
  runner returns holdfast.ErrOutcomeUnknown and never runs them again; this program
  then looks the request's id up on the writer (done if found, run again if not), as
  an application with an idempotency key does ("-": a hand-written loop cannot tell,
  and re-runs them).
application retries: runs of a whole transaction after its first, by the workload's
  own retry: for pgxpool the loop this program writes around each transaction, for
  holdfast its runner, which re-runs only what did not commit.
acknowledged writes: requests whose COMMIT succeeded. lost writes: acknowledged ids
  missing on the new writer at the end. misplaced writes: acknowledged writes whose
  transaction a server answered that was not the writer at any time during the
  request (aurora_db_instance_identifier(), asked in the transaction).
writes to the old primary: acknowledged writes whose transaction the old primary
  answered and that started after the switch: 0 is the goal (a server that refuses
  writes cannot acknowledge one; a transaction open before the switch may still
  commit there, and is not counted).
longest pause: the longest time without an acknowledged write, from the start of the
  workload to its end.
resume after promotion: from the new primary taking writes (the first time it answered
  pg_is_in_recovery() false to this program's probe, which asks it every 5 ms from the
  operation's start; the simulator stamps its step later, once it saw it too) to the
  first write it acknowledged; "never" when none did before the end of the run (plain
  pgxpool reaches it only by DNS, after the move and its cache's TTL, and keeps the
  connections it made meanwhile to the old primary, read-only after a switchover).
`

const failoverLegend = `audit: the simulator reads the old writer's data directory after the failover and lists
  the rows it had committed that the new writer lacks: what the secondary had not
  received, about the last rpo_lag_in_msec of writes. Acknowledged: of them, those
  the client was told were stored (the others' COMMIT was in flight); both clients
  lose them alike: no client can keep what the Region did not replicate.
`

// eventDetail is what the timeline prints after an event's name: its
// server and, for holdfast's events on a global cluster, the Regions and
// the lag lost.
func eventDetail(e TimelineEvent) string {
	s := e.Server
	switch {
	case e.FromRegion != "":
		s += fmt.Sprintf(" (%s → %s)", e.FromRegion, e.Region)
	case e.Region != "":
		s += " (" + e.Region + ")"
	}
	if e.RPOLagMS != nil {
		s += fmt.Sprintf(" rpo lag %.0f ms", *e.RPOLagMS)
	}
	return s
}

// idRanges writes ids (sorted) as ranges of consecutive ids, each less
// base: "3–5, 9"; at most 6 ranges, then how many more ids.
func idRanges(ids []int64, base int64) string {
	if len(ids) == 0 {
		return "none"
	}
	var parts []string
	shown := 0
	for i := 0; i < len(ids) && len(parts) < 6; {
		j := i
		for j+1 < len(ids) && ids[j+1] == ids[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, fmt.Sprint(ids[i]-base))
		} else {
			parts = append(parts, fmt.Sprintf("%d–%d", ids[i]-base, ids[j]-base))
		}
		shown += j - i + 1
		i = j + 1
	}
	s := "ids " + strings.Join(parts, ", ")
	if shown < len(ids) {
		s += fmt.Sprintf(" and %d more", len(ids)-shown)
	}
	if base != 0 {
		s += fmt.Sprintf(" (+%d)", base)
	}
	return s
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
// operation's phases and steps, holdfast's region events as marks.
func (r *Result) chart(begin, stopAt, end time.Time, gres failovertest.GlobalResult, events []failover.Event, clients []*harness.Client) timeline.Chart {
	op := r.Operation
	c := timeline.Chart{
		Title: fmt.Sprintf("Aurora Global Database %s (%s → %s): plain pgxpool vs holdfast on the global writer endpoint, %d workers each",
			op.Op, op.OldRegion, op.NewRegion, r.Workers),
		Length: end.Sub(begin),
	}
	for _, cl := range clients {
		c.Series = append(c.Series, cl.PauseSeries(begin, stopAt))
	}
	lost := ""
	if op.LostRows != nil && op.RPOLagMS != nil {
		lost = fmt.Sprintf(", %d rows lost (rpo lag %.0f ms)", *op.LostRows, *op.RPOLagMS)
	}
	c.Subtitle = fmt.Sprintf("lag %.0f ms, DNS lag %.0f ms, client DNS TTL %.0f ms%s; failed requests: %s",
		op.LagMS, op.DNSLagMS, op.DNSTTLMS, lost, harness.Failures(r.Clients))
	// The phases: no writer from the switch to the promotion; a new
	// primary the global writer endpoint does not name yet, from the
	// promotion to the DNS move.
	switched, _ := gres.At(op.Switch)
	promoted, _ := gres.At(failovertest.EventPromoted)
	dns, _ := gres.At(failovertest.EventDNS)
	first := "writes blocked"
	if op.Op == Failover {
		first = "Region down"
	}
	c.Bands = []timeline.Band{
		{Label: first, From: switched.Sub(begin), To: promoted.Sub(begin), Color: "#f9d5d3"},
		{Label: "new primary, DNS lags", From: promoted.Sub(begin), To: dns.Sub(begin), Color: "#fdf1c7"},
	}
	marks := map[string]string{
		failovertest.EventWriterDown: "old writer down",
		failovertest.EventPromoted:   "new primary takes writes",
		failovertest.EventDemoted:    "old primary demoted",
		failovertest.EventDNS:        "DNS moved",
	}
	for _, e := range gres.Events {
		if l, ok := marks[e.Name]; ok {
			c.Marks = append(c.Marks, timeline.Mark{Label: l, At: e.At.Sub(begin)})
		}
	}
	for _, e := range events {
		if strings.HasPrefix(e.Name, "region ") || e.Name == "new writer" {
			c.Marks = append(c.Marks, timeline.Mark{Label: "holdfast: " + e.Name, At: e.At.Sub(begin)})
		}
	}
	slices.SortStableFunc(c.Marks, func(a, b timeline.Mark) int { return cmp.Compare(a.At, b.At) })
	c.Notes = []string{"longest pause: the longest time without an acknowledged write. Plain pgxpool reaches the new primary when the global",
		"writer endpoint's DNS moves (and its cache expires); holdfast's monitor routes to it when it takes writes."}
	if n := r.Clients[0].Errors["25006"]; n > 0 {
		c.Notes = append(c.Notes, fmt.Sprintf("pgxpool's %d read-only failures (25006): the old primary refusing writes, or its connections there after its demotion.", n))
	}
	return c
}
