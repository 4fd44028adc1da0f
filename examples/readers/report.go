package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/holdfast-db/holdfast/examples/harness"
)

// perReader formats connections per reader, in reader order: "4/4/4".
func perReader(m map[string]int) string {
	return byReader(m, "/", func(_ string, n int) string { return fmt.Sprint(n) })
}

// labelled formats a map of server id to count: "orders-2 4, orders-3 4".
func labelled(m map[string]int) string {
	return byReader(m, ", ", func(id string, n int) string { return fmt.Sprintf("%s %d", id, n) })
}

// byReader formats each server's count in m, in order of their ids
// ("orders-10" after "orders-9"), joined by sep; "-" for none.
func byReader(m map[string]int, sep string, each func(id string, n int) string) string {
	if len(m) == 0 {
		return "-"
	}
	ids := slices.Collect(maps.Keys(m))
	slices.SortFunc(ids, func(a, b string) int { return cmp.Or(cmp.Compare(len(a), len(b)), cmp.Compare(a, b)) })
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = each(id, m[id])
	}
	return strings.Join(parts, sep)
}

// print writes the per-phase view, the side-by-side table, the goals and
// the legend.
func (r *Result) print(w io.Writer) {
	fmt.Fprintf(w, "\nreaders: %d at the start, %s added, %s crashed, %s lagging %.0f ms; pools of %d, %d workers each; "+
		"holdfast RefreshInterval %.0f ms, MaxLag %.0f ms; client DNS TTL %.0f ms\n",
		r.ReadersAtStart, r.AddedReader, r.CrashedReader, r.LaggingReader, r.LagMS, r.PoolSize, r.Workers, r.RefreshMS, r.MaxLagMS, r.DNSTTLMS)
	fmt.Fprintf(w, "\nper phase (connections per reader at its end; reads per server):\n")
	for i, p := range r.Phases {
		fmt.Fprintf(w, "  %-6s %6.1f–%5.1f s\n", p.Name, p.StartMS/1000, p.EndMS/1000)
		for _, c := range r.Clients {
			pf := c.PerPhase[i]
			fmt.Fprintf(w, "    %-8s connections %-14s reads %s, %d failed\n", c.Name, labelled(pf.Connections), labelled(pf.Reads), pf.Failed)
		}
	}
	fmt.Fprintln(w)
	t := harness.Table[ClientResult]{W: w, LabelWidth: 36, ColumnWidth: 14, Clients: r.Clients}
	t.Counts("failed", errorNames)
	t.Row("reader connections max/min (steady)", func(c ClientResult) string {
		if c.ReaderConnectionsMaxMin == nil {
			return fmt.Sprintf("∞ (%d/%d)", c.ReaderConnectionsMax, c.ReaderConnectionsMin)
		}
		return fmt.Sprintf("%.2f", *c.ReaderConnectionsMaxMin)
	})
	t.Row(fmt.Sprintf("new reader share (%.0f s after join)", r.JoinWaitMS/1000), func(c ClientResult) string {
		return fmt.Sprintf("%.0f%% (%d/%.1f)", 100*c.NewReaderShare, c.NewReaderConnections, c.NewReaderFairShare)
	})
	t.Row("  80 % of fair share after (ms)", func(c ClientResult) string { return optMS(c.NewReader80pctMS) })
	t.Row("resume after crash (ms)", func(c ClientResult) string { return optMS(c.ResumeAfterCrashMS) })
	t.Row("  failed at the crash", func(c ClientResult) string { return fmt.Sprint(c.FailedAtCrash) })
	t.Row("  of them beyond those in flight", func(c ClientResult) string { return fmt.Sprint(c.FailedBeyondInFlight) })
	t.Row(fmt.Sprintf("lagging reads (after %.0f ms)", r.LagCutoffAfterMS), func(c ClientResult) string { return fmt.Sprint(c.LaggingReads) })
	t.Row("  lagging reads from the lag on", func(c ClientResult) string { return fmt.Sprint(c.LaggingReadsAll) })

	g, hf := r.Goals, r.Clients[1]
	fmt.Fprintf(w, "\ngoals (holdfast):\n")
	fmt.Fprintf(w, "  reader connections max/min ≤ 1.25 (steady)            %s\n", harness.Met(g.SpreadAtMost125))
	fmt.Fprintf(w, "  added reader ≥ 80%% of its fair share within %2.0f s     %s (%.0f%%)\n", r.JoinWaitMS/1000, harness.Met(g.NewReaderAtLeast80pct), 100*hf.NewReaderShare)
	fmt.Fprintf(w, "  reads resume ≤ 1 s after a reader crash               %s (%s ms)\n", harness.Met(g.ResumeWithin1s), optMS(hf.ResumeAfterCrashMS))
	fmt.Fprintf(w, "  no failed read beyond those in flight at the crash    %s (%d)\n", harness.Met(g.NoFailedBeyondFlight), hf.FailedBeyondInFlight)
	fmt.Fprintf(w, "  no read from the lagging reader after MaxLag+refresh  %s (%d)\n", harness.Met(g.NoLaggingReads), hf.LaggingReads)
	fmt.Fprint(w, `
legend:
progress lines: reads that succeeded and failed in that second per client, and its
  connections per reader (the last sample, in reader order; a crashed reader left out).
per phase: reads per server follow pgxpool's choice of an idle connection (the one
  released last), not only the connections' spread: with fewer workers than
  connections, a few connections serve most reads.
reader connections max/min: over the steady phase's samples (every 250 ms, each
  client's role in pg_stat_activity of each reader), the largest ratio of the most
  connections on a reader to the fewest; ∞ when a reader had none (most/fewest shown).
new reader share: the added reader's connections ÷ its fair share (the client's
  connections on the readers ÷ the readers), the join-wait after AddReader returned
  (the topology and the reader endpoint list it); "80 % of fair share after" is the
  first sample where it held 80 % of it.
resume after crash: from the crash (CrashReader called) until every worker reads
  again: each worker's first successful read after its last failed one (after the
  crash if none failed), up to the end of the run; "never" when one did not.
failed at the crash: reads that failed from the crash to the end of the run (those
  in flight at the crash included); beyond those in flight: those that started after
  CrashReader returned, when the reader was dead already.
lagging reads: successful reads answered by the lagging reader that started after
  SetLag was called + MaxLag + one RefreshInterval (holdfast's monitor has read the
  lag by then; the simulator publishes the lag in the topology at once). The refresh
  interval here is short; holdfast's default is 30 s.
`)
}

func optMS(v *float64) string {
	if v == nil {
		return "never"
	}
	return fmt.Sprintf("%.0f", *v)
}

// errorNames name the error keys in the table.
var errorNames = map[string]string{
	"57P01": "57P01 terminated",
	"57P03": "57P03 cannot connect",
	"08006": "08006 connection failure",
}
