package main

import (
	"context"
	"slices"
	"sort"
	"time"

	"github.com/holdfast-db/holdfast/examples/harness"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/fakes/failovertest"
	"github.com/holdfast-db/holdfast/readiness"
)

// Result is what the command measured; its JSON form is the -json output.
type Result struct {
	Scenario  failovertest.Kind   `json:"scenario"`
	Workers   int                 `json:"workers"`
	Engine    failovertest.Engine `json:"engine"`
	DetectMS  float64             `json:"detect_ms"`
	DNSLagMS  float64             `json:"dns_lag_ms"`
	HangForMS float64             `json:"hang_for_ms,omitempty"`
	DNSTTLMS  float64             `json:"dns_ttl_ms"`
	OldWriter string              `json:"old_writer"`
	NewWriter string              `json:"new_writer"` // the writer at the end (the first one again after a failback)
	// Clients are pgxpool, then holdfast, then (with -sql) database/sql.
	Clients []ClientResult `json:"clients"`
	// Timeline merges the simulator's steps, the holdfast monitor's
	// events and the readiness changes, in ms from the writer going down.
	Timeline []TimelineEvent `json:"timeline"`
	// Readiness is the set of health values the holdfast pool's
	// readiness.Checker answered ("pass", "warn", "fail"), in that order;
	// ReadinessReasons, the reasons of the answers that were not pass.
	Readiness        []string `json:"readiness"`
	ReadinessReasons []string `json:"readiness_reasons"`
	// Monitor is the holdfast monitor's status at the end.
	Monitor MonitorResult `json:"monitor"`
	Goals   Goals         `json:"goals"`
}

// ClientResult is one client's figures: the write demos' own (name,
// requests, ok, failed, errors, retries, runner, outcome_unknown,
// acknowledged, lost and misplaced writes: misplaced, those whose
// transaction was answered by a server that was not the cluster's writer
// at any time during the request, a split brain), and the failover's.
type ClientResult struct {
	harness.Writes
	// CommittedUnacknowledged: rows on the writer whose request failed
	// (an ambiguous COMMIT: applied, but the answer was lost). Not an
	// error: the request's caller was told it failed, and a retry of the
	// idempotent transaction would find the row.
	CommittedUnacknowledged int `json:"committed_unacknowledged"`
	// MaxPauseMS is the longest time without an acknowledged write.
	MaxPauseMS float64 `json:"max_pause_ms"`
	// ResumeMS is the time from the promotion of the new writer to the
	// first acknowledgement of a write that started after it (the longest
	// of these over the promotions of a failback); null when the client
	// never wrote again before the next fault or the end of the run.
	// ResumeEachMS lists it per promotion.
	ResumeMS     *float64   `json:"resume_ms"`
	ResumeEachMS []*float64 `json:"resume_each_ms"`
	// SlowestMS is the slowest single request, retries included.
	SlowestMS float64 `json:"slowest_request_ms"`
}

// TimelineEvent is one event and its offset from the writer going down.
type TimelineEvent struct {
	Source   string  `json:"source"` // "simulator", "holdfast" or "readiness"
	Event    string  `json:"event"`
	Server   string  `json:"server,omitempty"`
	OffsetMS float64 `json:"offset_ms"`

	at time.Time
}

// MonitorResult is the holdfast monitor's status at the end of the run.
type MonitorResult struct {
	Writer          string `json:"writer"`
	Routing         string `json:"routing"`
	Failovers       int    `json:"failovers"`
	Held            int    `json:"held"`
	MonitorConnects int    `json:"monitor_connects"`
}

// Goals are the targets of holdfast's failover routing, checked on this
// run.
type Goals struct {
	// ResumeWithin1500ms: holdfast wrote again within 1.5 s of each
	// promotion.
	ResumeWithin1500ms bool `json:"resume_within_1500ms"`
	// PauseRatio is holdfast's longest pause over plain pgxpool's.
	PauseRatio       float64 `json:"pause_ratio"`
	PauseAtMost20pct bool    `json:"pause_at_most_20pct"`
	// NoLostWrites: neither client lost an acknowledged write.
	NoLostWrites bool `json:"no_lost_writes"`
	// ReadinessNeverFailed: the holdfast pool's readiness never answered
	// fail.
	ReadinessNeverFailed bool `json:"readiness_never_failed"`
	// DatabaseSQL checks the database/sql client (-sql) against the same
	// targets; absent without -sql.
	DatabaseSQL *SQLGoals `json:"database_sql,omitempty"`
}

// SQLGoals are holdfast's goals checked on the database/sql client.
type SQLGoals struct {
	// Met: all of the below.
	Met bool `json:"met"`
	// ResumeWithin1500ms: it wrote again within 1.5 s of each promotion.
	ResumeWithin1500ms bool `json:"resume_within_1500ms"`
	// PauseRatio is its longest pause over plain pgxpool's.
	PauseRatio       float64 `json:"pause_ratio"`
	PauseAtMost20pct bool    `json:"pause_at_most_20pct"`
	// NoLostWrites: no acknowledged write lost or misplaced.
	NoLostWrites bool `json:"no_lost_writes"`
	// NoFailedRequests: every request succeeded, after the retry.
	NoFailedRequests bool `json:"no_failed_requests"`
}

var ms = harness.MS

// writerSpan is a time a server was the cluster's writer (zero times are
// open ends). A promoted server's span starts when the writer before it
// went down: nothing else could take writes from then on.
type writerSpan struct {
	server   string
	from, to time.Time
}

func writerSpans(initial string, events []failovertest.Event) []writerSpan {
	spans := []writerSpan{{server: initial}}
	var down time.Time
	for _, e := range events {
		switch e.Name {
		case failovertest.EventWriterDown:
			down = e.At
			for i := range spans {
				if spans[i].server == e.Server && spans[i].to.IsZero() {
					spans[i].to = e.At
				}
			}
		case failovertest.EventPromoted:
			spans = append(spans, writerSpan{server: e.Server, from: down})
		}
	}
	return spans
}

// wasWriter reports whether server was the writer at some time between
// from and to.
func wasWriter(spans []writerSpan, server string, from, to time.Time) bool {
	for _, s := range spans {
		if s.server == server && (s.from.IsZero() || !s.from.After(to)) && (s.to.IsZero() || !s.to.Before(from)) {
			return true
		}
	}
	return false
}

// measure computes each client's figures and audits their writes on the
// writer at the end.
func measure(ctx context.Context, res *Result, c *failovertest.Cluster, fres failovertest.Result, begin, stopAt time.Time,
	clients []*harness.Client) error {
	servers := map[string]string{} // "ip:port" → server id
	for _, id := range c.ServerIDs() {
		servers[c.Addr(id)] = id
	}
	spans := writerSpans(res.OldWriter, fres.Events)
	var promotions, downs []time.Time
	for _, e := range fres.Events {
		switch e.Name {
		case failovertest.EventPromoted:
			promotions = append(promotions, e.At)
		case failovertest.EventWriterDown:
			downs = append(downs, e.At)
		}
	}
	for _, cl := range clients {
		ids, err := c.CommittedIDs(ctx, "public."+tables[cl.Name])
		if err != nil {
			return err
		}
		committed := harness.Committed(ids)
		cr := ClientResult{Writes: cl.Writes(committed)}
		var acks []time.Time
		all := cl.Records()
		for _, rec := range all {
			cr.SlowestMS = max(cr.SlowestMS, ms(rec.Took()))
			if rec.Err != "" {
				if committed(rec.ID) {
					cr.CommittedUnacknowledged++
				}
				continue
			}
			acks = append(acks, rec.End)
			if id, ok := servers[rec.Server]; !ok || !wasWriter(spans, id, rec.Start, rec.End) {
				cr.MisplacedWrites++
			}
		}
		from, to := harness.LongestGap(begin, stopAt, acks)
		cr.MaxPauseMS = ms(to.Sub(from))
		for _, p := range promotions {
			until := stopAt
			for _, d := range downs {
				if d.After(p) {
					until = d
					break
				}
			}
			var first time.Time
			for _, rec := range all {
				if rec.Err == "" && !rec.Start.Before(p) && rec.End.Before(until) && (first.IsZero() || rec.End.Before(first)) {
					first = rec.End
				}
			}
			var r *float64
			if !first.IsZero() {
				v := ms(first.Sub(p))
				r = &v
			}
			cr.ResumeEachMS = append(cr.ResumeEachMS, r)
		}
		cr.ResumeMS = slowestResume(cr.ResumeEachMS)
		res.Clients = append(res.Clients, cr)
	}
	return nil
}

// slowestResume is the longest of the resume times, nil when one is nil
// (never resumed) or there are none.
func slowestResume(each []*float64) *float64 {
	var out *float64
	for _, v := range each {
		if v == nil {
			return nil
		}
		if out == nil || *v > *out {
			out = v
		}
	}
	return out
}

// readiness records the health values and reasons seen.
func (r *Result) readiness(rd *readinessLog) {
	r.Readiness, r.ReadinessReasons = []string{}, []string{}
	for _, h := range []readiness.Health{readiness.Pass, readiness.Warn, readiness.Fail} {
		if rd.seen[h] {
			r.Readiness = append(r.Readiness, string(h))
		}
	}
	for reason := range rd.reasons {
		r.ReadinessReasons = append(r.ReadinessReasons, reason)
	}
	sort.Strings(r.ReadinessReasons)
}

func (r *Result) monitor(m failover.Monitor) {
	st := m.Status()
	r.Monitor = MonitorResult{Writer: st.Writer, Routing: st.Routing, Failovers: st.Failovers, Held: st.Held, MonitorConnects: st.MonitorConnects}
}

// timeline merges the simulator's events, the monitor's and the readiness
// changes, in ms from the writer going down.
func (r *Result) timeline(fres failovertest.Result, m failover.Monitor, rd *readinessLog) {
	anchor, _ := fres.At(failovertest.EventWriterDown)
	var tl []TimelineEvent
	for _, e := range fres.Events {
		tl = append(tl, TimelineEvent{Source: "simulator", Event: e.Name, Server: e.Server, at: e.At})
	}
	for _, e := range m.Status().Events {
		tl = append(tl, TimelineEvent{Source: "holdfast", Event: e.Name, Server: e.Server, at: e.At})
	}
	tl = append(tl, rd.changes...)
	sort.SliceStable(tl, func(i, j int) bool { return tl[i].at.Before(tl[j].at) })
	for i := range tl {
		tl[i].OffsetMS = ms(tl[i].at.Sub(anchor))
	}
	r.Timeline = tl
}

// goals checks the targets on the figures.
func (r *Result) goals() {
	plain, hf := r.Clients[0], r.Clients[1]
	g := &r.Goals
	g.ResumeWithin1500ms = resumedWithin(hf, 1500)
	if plain.MaxPauseMS > 0 {
		g.PauseRatio = hf.MaxPauseMS / plain.MaxPauseMS
	}
	g.PauseAtMost20pct = plain.MaxPauseMS > 0 && g.PauseRatio <= 0.2
	g.NoLostWrites = plain.LostWrites == 0 && hf.LostWrites == 0
	g.ReadinessNeverFailed = !slices.Contains(r.Readiness, string(readiness.Fail))
	if len(r.Clients) > 2 {
		s := r.Clients[2]
		sg := &SQLGoals{ResumeWithin1500ms: resumedWithin(s, 1500)}
		if plain.MaxPauseMS > 0 {
			sg.PauseRatio = s.MaxPauseMS / plain.MaxPauseMS
		}
		sg.PauseAtMost20pct = plain.MaxPauseMS > 0 && sg.PauseRatio <= 0.2
		sg.NoLostWrites = s.LostWrites == 0 && s.MisplacedWrites == 0
		sg.NoFailedRequests = s.Failed == 0
		sg.Met = sg.ResumeWithin1500ms && sg.PauseAtMost20pct && sg.NoLostWrites && sg.NoFailedRequests
		g.DatabaseSQL = sg
	}
}

// resumedWithin reports whether c wrote again within limit ms of each
// promotion.
func resumedWithin(c ClientResult, limit float64) bool {
	if len(c.ResumeEachMS) == 0 {
		return false
	}
	for _, v := range c.ResumeEachMS {
		if v == nil || *v > limit {
			return false
		}
	}
	return true
}

// print writes the timeline, the side-by-side table, the goals and the
