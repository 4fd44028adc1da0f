package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/examples/harness"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/fakes/bluegreentest"
	"github.com/jackc/pgx/v5"
)

// Result is what the command measured; its JSON form is the -json output.
type Result struct {
	Scenario bluegreentest.Scenario `json:"scenario"`
	Workers  int                    `json:"workers"`
	// InProgressMS is the simulated IN_PROGRESS window: from the
	// SWITCHOVER_IN_PROGRESS write to the SWITCHOVER_IN_POST_PROCESSING
	// write (to the rollback, or to the blue DNS update when the status is
	// stuck).
	InProgressMS float64        `json:"in_progress_ms"`
	Primary      string         `json:"primary"` // "green" after a switchover, "blue" after a rollback
	Clients      []ClientResult `json:"clients"`
	// Timeline is holdfast's switchover timeline (offsets from IN_PROGRESS).
	Timeline []TimelineEvent `json:"timeline"`
	Outcome  string          `json:"outcome,omitempty"` // holdfast's summary outcome, "" when none yet
	// MonitorConnects counts the connections holdfast's two blue/green
	// monitors opened during the run (a reconnect storm shows here).
	MonitorConnects int `json:"monitor_connects"`
	// AliasedCerts counts holdfast's TLS handshakes whose certificate was
	// valid for the green counterpart of the blue name asked for, not for
	// the name itself (bluegreen.Status.AliasedCerts).
	AliasedCerts int64 `json:"aliased_certs"`
	// Script is what the simulator did (offsets from IN_PROGRESS).
	Script []TimelineEvent `json:"script"`

	summary string
	// failover is the holdfast pool's failover monitor's status at the
	// end, with -failover (for the tests; not printed).
	failover *failover.Status
}

// ClientResult is one client's figures: the write demos' own (name,
// requests, ok, failed, errors, retries, runner, outcome_unknown,
// acknowledged, lost and misplaced writes: misplaced, the rows of the
// client on the server that is not the primary), and the switchover's.
type ClientResult struct {
	harness.Writes
	// OKAfterCompleted counts the requests that succeeded after
	// SWITCHOVER_COMPLETED; absent when the script wrote no COMPLETED.
	OKAfterCompleted *int    `json:"ok_after_completed,omitempty"`
	MaxPauseMS       float64 `json:"max_pause_ms"`
	// P50MS and P99MS are over the requests started during the switchover
	// (from SWITCHOVER_INITIATED to the end of the script).
	P50MS float64 `json:"p50_ms"`
	P99MS float64 `json:"p99_ms"`

	// readOnlyAfterCompleted counts the requests that failed with 25006
	// after SWITCHOVER_COMPLETED.
	readOnlyAfterCompleted int
}

// TimelineEvent is one event and its offset from IN_PROGRESS.
type TimelineEvent struct {
	Event    string  `json:"event"`
	OffsetMS float64 `json:"offset_ms"`
}

var ms = harness.MS

// measure computes the figures and checks every write against both
// servers.
func measure(ctx context.Context, d *bluegreentest.Deployment, sres bluegreentest.SwitchoverResult, scriptEnd time.Time,
	r *bluegreen.Router, clients []*harness.Client) (*Result, error) {
	res := &Result{Scenario: sres.Scenario, Workers: len(clients[0].Recs), Primary: "blue"}
	primary, other := d.Env.Blue, d.Env.Green
	if sres.Switched {
		primary, other, res.Primary = d.Env.Green, d.Env.Blue, "green"
	}
	anchor, _ := sres.At(bluegreentest.StatusInProgress)
	windowStart, _ := sres.At(bluegreentest.StatusInitiated)
	end, ok := sres.At(bluegreentest.StatusPostProcessing)
	if !ok {
		if end, ok = sres.At(bluegreentest.ScriptRolledBack); !ok {
			end, _ = sres.At(bluegreentest.ScriptBlueDNSUpdated)
		}
	}
	res.InProgressMS = ms(end.Sub(anchor))
	for _, e := range sres.Events {
		res.Script = append(res.Script, TimelineEvent{Event: e.Name, OffsetMS: ms(e.Time.Sub(anchor))})
	}
	st := r.Status()
	for _, m := range st.Monitors {
		res.MonitorConnects += m.Connects
	}
	res.AliasedCerts = st.AliasedCerts
	if s, ok := r.LastSummary(); ok {
		res.Outcome = s.Outcome.String()
		res.summary = s.String()
		for _, e := range s.Events {
			res.Timeline = append(res.Timeline, TimelineEvent{Event: e.Name, OffsetMS: ms(s.Offset(e))})
		}
	} else {
		st := r.Status()
		var b strings.Builder
		fmt.Fprintf(&b, "(no summary yet: the switchover has not ended for holdfast; phase %s, routing %v)\n", st.Phase, st.Routing.Phase)
		width := 31
		for _, e := range st.Timeline {
			width = max(width, len(e.Name))
		}
		for _, e := range st.Timeline {
			res.Timeline = append(res.Timeline, TimelineEvent{Event: e.Name, OffsetMS: ms(e.Time.Sub(anchor))})
			fmt.Fprintf(&b, "%28s %18d ms %*s\n", e.Time.UTC().Format("2006-01-02T15:04:05.000Z"), e.Time.Sub(anchor).Milliseconds(), width, e.Name)
		}
		res.summary = strings.TrimRight(b.String(), "\n")
	}

	completed, isCompleted := sres.At(bluegreentest.StatusCompleted)
	for _, c := range clients {
		onPrimary, err := idsOf(ctx, primary, d.Database, c.Name)
		if err != nil {
			return nil, err
		}
		onOther, err := idsOf(ctx, other, d.Database, c.Name)
		if err != nil {
			return nil, err
		}
		cr := ClientResult{Writes: c.Writes(func(id int64) bool { return onPrimary[id] })}
		okAfter := 0
		if isCompleted {
			cr.OKAfterCompleted = &okAfter
		}
		var during []time.Duration
		var maxPause time.Duration
		for _, rec := range c.Records() {
			maxPause = max(maxPause, rec.Took())
			if !rec.Start.Before(windowStart) && rec.Start.Before(scriptEnd) {
				during = append(during, rec.Took())
			}
			if !isCompleted || !rec.End.After(completed) {
				continue
			}
			switch rec.Err {
			case "":
				okAfter++
			case "25006":
				cr.readOnlyAfterCompleted++
			}
		}
		for id := range onOther {
			if !onPrimary[id] {
				cr.MisplacedWrites++
			}
		}
		cr.MaxPauseMS = ms(maxPause)
		cr.P50MS, cr.P99MS = ms(percentile(during, 0.50)), ms(percentile(during, 0.99))
		res.Clients = append(res.Clients, cr)
	}
	return res, nil
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// idsOf returns the ids of client's rows on s.
func idsOf(ctx context.Context, s *bluegreentest.Server, db, client string) (map[int64]bool, error) {
	conn, err := pgx.Connect(ctx, s.DSN(db))
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, "SELECT id FROM public.requests WHERE client = $1", client)
	if err != nil {
		return nil, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, err
	}
	out := make(map[int64]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out, nil
}
