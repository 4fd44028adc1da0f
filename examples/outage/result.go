package main

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/holdfast-db/holdfast/examples/harness"
	"github.com/holdfast-db/holdfast/fakes/outagetest"
)

// Result is what the command measured; its JSON form is the -json output.
type Result struct {
	Scenario         string  `json:"scenario"`
	Workers          int     `json:"workers"`
	RequestTimeoutMS float64 `json:"request_timeout_ms"`
	DNSTTLMS         float64 `json:"dns_ttl_ms"`
	// OutageMS is the time from the fault (the stop, the silence, the
	// demoted primary's stop) to the database back (accepting again, the
	// DNS record moved, the name moved).
	OutageMS float64 `json:"outage_ms"`
	// BackoffSteps is how many steps of the prober's fastest pace (a
	// check every 100 ms, less 20 % jitter) the outage holds: the most
	// connects one pool should make while it lasts.
	BackoffSteps int `json:"backoff_steps"`
	// Clients are pgxpool, then holdfast.
	Clients []ClientResult `json:"clients"`
	// Timeline merges the simulator's steps and holdfast's "database
	// down" and "database back", in ms from the fault.
	Timeline []TimelineEvent `json:"timeline"`
	// Goals are holdfast's targets in this scenario, checked on this run.
	Goals []Goal `json:"goals"`
}

// ClientResult is one client's figures: the write demos' own (name,
// requests, ok, failed, errors, retries, runner, outcome_unknown,
// acknowledged and lost writes; misplaced writes are not measured here,
// always 0: a standby refuses writes), the longest pause
// (harness.PausedWrites), and the outage's.
type ClientResult struct {
	harness.PausedWrites
	// ResumeAfterBackMS is the time from the database back to the first
	// acknowledgement of a write after it (one held through the outage,
	// or one that started after it); null when none came before the end
	// of the run.
	ResumeAfterBackMS *float64 `json:"resume_after_back_ms"`
	// ConnectsWhileDown counts the pool's dials from the fault to the
	// database back (holdfast's prober's checks among them).
	ConnectsWhileDown int `json:"connects_while_down"`
	// DuringOutage counts the requests started from the fault to the
	// database back; FailedDuringOutage, those of them that failed.
	DuringOutage       int `json:"requests_during_outage"`
	FailedDuringOutage int `json:"failed_during_outage"`
	// HungPastDeadline counts the requests that ended over hangSlack
	// after their deadline.
	HungPastDeadline int `json:"hung_past_deadline"`
	// SlowestMS is the slowest single request, retries included.
	SlowestMS float64 `json:"slowest_request_ms"`
}

// TimelineEvent is one event and its offset from the fault.
type TimelineEvent struct {
	Source   string  `json:"source"` // "simulator" or "holdfast"
	Event    string  `json:"event"`
	Server   string  `json:"server,omitempty"`
	OffsetMS float64 `json:"offset_ms"`
}

// Goal is one of holdfast's targets and what this run measured.
type Goal struct {
	Goal     string `json:"goal"`
	Met      bool   `json:"met"`
	Measured string `json:"measured"`
}

// hangSlack is how late a request may end after its deadline before it
// counts as hung: the time to notice the deadline and unwind.
const hangSlack = 200 * time.Millisecond

var ms = harness.MS

// backoffSteps is the number of the prober's steps at its fastest pace
// (every 100 ms, 80 ms at the least with its jitter) that fit in an
// outage of d, the first check included.
func backoffSteps(d time.Duration) int { return int(d/(80*time.Millisecond)) + 1 }

// measure computes each client's figures and audits its writes on the
// primary at the end.
func (r *Result) measure(ctx context.Context, tgt *target, clients []*harness.Client, dialers map[string]*dialer,
	begin, stopAt, down, back time.Time, timeout time.Duration) error {
	for _, cl := range clients {
		ids, err := tgt.committed(ctx, "public."+tables[cl.Name])
		if err != nil {
			return err
		}
		cr := ClientResult{PausedWrites: cl.PausedWrites(harness.Committed(ids), begin, stopAt),
			ConnectsWhileDown: dialers[cl.Name].between(down, back)}
		var first time.Time
		for _, rec := range cl.Records() {
			cr.SlowestMS = max(cr.SlowestMS, ms(rec.Took()))
			if rec.Took() > timeout+hangSlack {
				cr.HungPastDeadline++
			}
			if !rec.Start.Before(down) && rec.Start.Before(back) {
				cr.DuringOutage++
				if rec.Err != "" {
					cr.FailedDuringOutage++
				}
			}
			if rec.Err == "" && rec.End.After(back) && (first.IsZero() || rec.End.Before(first)) {
				first = rec.End
			}
		}
		if !first.IsZero() {
			v := ms(first.Sub(back))
			cr.ResumeAfterBackMS = &v
		}
		r.Clients = append(r.Clients, cr)
	}
	return nil
}

// timeline merges the simulator's steps and holdfast's log events, in ms
// from down.
func (r *Result) timeline(events, logged []outagetest.Event, down time.Time) {
	type ev struct {
		TimelineEvent
		at time.Time
	}
	var all []ev
	for _, e := range events {
		all = append(all, ev{TimelineEvent{Source: "simulator", Event: e.Name, Server: e.Server}, e.At})
	}
	for _, e := range logged {
		all = append(all, ev{TimelineEvent{Source: "holdfast", Event: e.Name}, e.At})
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].at.Before(all[j].at) })
	r.Timeline = nil
	for _, e := range all {
		e.OffsetMS = ms(e.at.Sub(down))
		r.Timeline = append(r.Timeline, e.TimelineEvent)
	}
}

// The goals' bounds.
const (
	restartResumeMS = 200  // restart: resume after the database accepts again
	dnsResumeMS     = 1000 // multiaz: resume after the DNS record moves
	// readOnlyFailures: demoted, the writes that may fail with 25006: the
	// first, and one acquired meanwhile.
	readOnlyFailures = 2
)

// goals checks holdfast's targets of the scenario on the figures.
func (r *Result) goals() {
	plain, hf := r.Clients[0], r.Clients[1]
	add := func(goal string, met bool, format string, a ...any) {
		r.Goals = append(r.Goals, Goal{Goal: goal, Met: met, Measured: fmt.Sprintf(format, a...)})
	}
	resume := func(limit float64) bool { return hf.ResumeAfterBackMS != nil && *hf.ResumeAfterBackMS <= limit }
	switch r.Scenario {
	case Restart:
		add("holdfast: no request failed", hf.Failed == 0, "%d of %d failed (pgxpool: %d of the %d during the stop)",
			hf.Failed, hf.Requests, plain.FailedDuringOutage, plain.DuringOutage)
		add("holdfast: at most 1 connect per backoff step while down", hf.ConnectsWhileDown <= r.BackoffSteps,
			"%d connects, %d steps (pgxpool: %d)", hf.ConnectsWhileDown, r.BackoffSteps, plain.ConnectsWhileDown)
		add(fmt.Sprintf("holdfast resumes within %d ms of the database accepting", restartResumeMS), resume(restartResumeMS),
			"%s", msText(hf.ResumeAfterBackMS))
	case MultiAZ:
		add(fmt.Sprintf("holdfast resumes within %d ms of the DNS move", dnsResumeMS), resume(dnsResumeMS),
			"%s (pgxpool: %s)", msText(hf.ResumeAfterBackMS), msText(plain.ResumeAfterBackMS))
	case Demoted:
		add("holdfast: no write fails with 25006 after the first and one acquired", hf.Errors["25006"] <= readOnlyFailures,
			"%d failed with 25006 (pgxpool: %d)", hf.Errors["25006"], plain.Errors["25006"])
	}
	add("holdfast: no request outlives its deadline", hf.HungPastDeadline == 0,
		"%d (pgxpool: %d)", hf.HungPastDeadline, plain.HungPastDeadline)
	add("no acknowledged write lost (both clients)", plain.LostWrites == 0 && hf.LostWrites == 0,
		"%d and %d", plain.LostWrites, hf.LostWrites)
}

// msText is v in ms ("123 ms"), "never" for nil.
func msText(v *float64) string {
	if v == nil {
		return "never"
	}
	return fmt.Sprintf("%.0f ms", *v)
}
