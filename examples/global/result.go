package main

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/holdfast-db/holdfast/examples/harness"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/fakes/failovertest"
)

// Result is what the command measured; its JSON form is the -json output.
type Result struct {
	Workers          int     `json:"workers"`
	RequestTimeoutMS float64 `json:"request_timeout_ms"`
	// Operation is what the simulator played.
	Operation Operation `json:"operation"`
	// Clients are pgxpool, then holdfast.
	Clients []ClientResult `json:"clients"`
	// Monitor is the holdfast monitor's status at the end; null when
	// holdfast routed no failover on the global writer endpoint.
	Monitor *MonitorResult `json:"monitor"`
	// Timeline merges the simulator's steps and the holdfast monitor's
	// events, in ms from the switch.
	Timeline []TimelineEvent `json:"timeline"`
	// Goals are holdfast's targets for the operation, checked on this run.
	Goals []Goal `json:"goals"`
}

// Operation is the operation the simulator played, its timings and, for
// a failover, what it lost. The offsets are in ms from the switch: the
// writer refusing writes (switchover), the primary Region going down
// (failover).
type Operation struct {
	Op        string `json:"op"` // "switchover" or "failover"
	OldRegion string `json:"old_region"`
	NewRegion string `json:"new_region"`
	OldWriter string `json:"old_writer"`
	NewWriter string `json:"new_writer"`
	// LagMS is how late the secondary received the writer's WAL;
	// DetectMS (failover) and DNSLagMS the operation's timings; DNSTTLMS
	// the clients' DNS cache's.
	LagMS    float64  `json:"lag_ms"`
	DetectMS *float64 `json:"detect_ms,omitempty"`
	DNSLagMS float64  `json:"dns_lag_ms"`
	DNSTTLMS float64  `json:"dns_ttl_ms"`
	TLS      bool     `json:"tls"`
	// Switch names the step the offsets are from.
	Switch string `json:"switch"`
	// WritableMS is when the new primary first answered that it takes
	// writes (pg_is_in_recovery() false: a probe of this program asks it
	// every 5 ms); PromotionMS when the simulator stamped its promotion,
	// once it saw it too; DNSMovedMS when the global writer endpoint moved
	// to its Region.
	WritableMS  float64 `json:"accepts_writes_ms"`
	PromotionMS float64 `json:"promotion_ms"`
	DNSMovedMS  float64 `json:"dns_moved_ms"`
	// RPOLagMS is, for a failover, the secondary's rpo_lag_in_msec last
	// measured before the primary Region went down.
	RPOLagMS *float64 `json:"rpo_lag_ms,omitempty"`
	// LostRows counts, for a failover, the rows the old writer had and the
	// new one lacks (the simulator's audit); Lost splits them per client.
	LostRows *int       `json:"lost_rows,omitempty"`
	Lost     []LostRows `json:"lost,omitempty"`
}

// LostRows are a client's rows that a failover lost.
type LostRows struct {
	Client string `json:"client"`
	// IDs are the ids the old writer had committed and the new one lacks.
	IDs []int64 `json:"ids"`
	// Acknowledged counts those whose request succeeded: writes the client
	// was told were stored.
	Acknowledged int `json:"acknowledged"`
	// Unlisted counts the client's acknowledged writes missing on the new
	// writer that the audit does not list: 0, or the audit misses some.
	Unlisted int `json:"unlisted"`
}

// ClientResult is one client's figures: the write demos' own (name,
// requests, ok, failed, errors, retries, runner, outcome_unknown,
// acknowledged, lost and misplaced writes: misplaced, those whose
// transaction was answered by a server that was not the writer at any
// time during the request), and the operation's.
type ClientResult struct {
	harness.PausedWrites
	// ResumeAfterPromotionMS is the time from the new primary taking
	// writes (Operation.WritableMS) to the first write it acknowledged;
	// null when none did before the end of the run.
	ResumeAfterPromotionMS *float64 `json:"resume_after_promotion_ms"`
	// WritesToOldPrimary counts the acknowledged writes whose transaction
	// the old primary answered and that started after the switch (the old
	// primary turned read-only, or went down).
	WritesToOldPrimary int `json:"writes_to_old_primary"`
	// DuringSwitch counts the requests in flight at some time from the
	// switch to the DNS move; FailedDuringSwitch, those of them that
	// failed.
	DuringSwitch       int `json:"requests_switch_to_dns"`
	FailedDuringSwitch int `json:"failed_switch_to_dns"`
	// SlowestMS is the slowest single request, retries included.
	SlowestMS float64 `json:"slowest_request_ms"`
}

// TimelineEvent is one event and its offset from the switch. Region,
// FromRegion and RPOLagMS are what holdfast's events on a global
// cluster carry: the new writer's Region, the Region it left and, for a
// failover, the lag that Region lost.
type TimelineEvent struct {
	Source     string   `json:"source"` // "simulator" or "holdfast"
	Event      string   `json:"event"`
	Server     string   `json:"server,omitempty"`
	Region     string   `json:"region,omitempty"`
	FromRegion string   `json:"from_region,omitempty"`
	RPOLagMS   *float64 `json:"rpo_lag_ms,omitempty"`
	OffsetMS   float64  `json:"offset_ms"`

	at time.Time
}

// MonitorResult is the holdfast monitor's status at the end of the run.
type MonitorResult struct {
	Writer          string `json:"writer"`
	WriterRegion    string `json:"writer_region"`
	Routing         string `json:"routing"`
	Failovers       int    `json:"failovers"`
	Held            int    `json:"held"`
	MonitorConnects int    `json:"monitor_connects"`
	Off             string `json:"off,omitempty"`
}

// Goal is one of holdfast's targets and what this run measured.
type Goal struct {
	Goal     string `json:"goal"`
	Met      bool   `json:"met"`
	Measured string `json:"measured"`
}

// resumeGoalMS is the bound on holdfast's resume after the
// promotion.
const resumeGoalMS = 250

var ms = harness.MS

// switchEvent is the step an operation's offsets are from: the old
// primary turning read-only, or its Region going down.
func switchEvent(op string) string {
	if op == Failover {
		return failovertest.EventRegionDown
	}
	return failovertest.EventWritesBlocked
}

// measure computes each client's figures, audits their writes on the new
// writer and records the operation.
//
// writable is when the new primary first said it takes writes (this
// program's probe); zero falls back to the simulator's stamp of the
// promotion.
func measure(ctx context.Context, o options, g *failovertest.Global, gres failovertest.GlobalResult, writable time.Time,
	clients []*harness.Client, begin, stopAt time.Time) (*Result, error) {
	switched, ok1 := gres.At(switchEvent(o.Op))
	promoted, ok2 := gres.At(failovertest.EventPromoted)
	dns, ok3 := gres.At(failovertest.EventDNS)
	if !ok1 || !ok2 || !ok3 {
		return nil, fmt.Errorf("the simulator played no %q, %q or %q: %+v", switchEvent(o.Op), failovertest.EventPromoted, failovertest.EventDNS, gres.Events)
	}
	if writable.IsZero() || writable.After(promoted) {
		writable = promoted
	}
	op := Operation{Op: o.Op, OldRegion: gres.OldRegion, NewRegion: gres.NewRegion, OldWriter: gres.OldWriter, NewWriter: gres.NewWriter,
		LagMS: ms(o.Lag), DNSLagMS: ms(o.DNSLag), DNSTTLMS: ms(o.DNSTTL), TLS: o.TLS, Switch: switchEvent(o.Op),
		WritableMS: ms(writable.Sub(switched)), PromotionMS: ms(promoted.Sub(switched)), DNSMovedMS: ms(dns.Sub(switched))}
	if o.Op == Failover {
		detect, rpo, n := ms(o.Detect), ms(gres.RPOLag), len(gres.Lost)
		op.DetectMS, op.RPOLagMS, op.LostRows = &detect, &rpo, &n
	}
	res := &Result{Workers: o.Workers, RequestTimeoutMS: ms(o.RequestTimeout), Operation: op}

	ids, err := g.CommittedIDs(ctx, "public."+table)
	if err != nil {
		return nil, err
	}
	committed := func(id int64) bool { _, ok := slices.BinarySearch(ids, id); return ok }
	listed := func(id int64) bool { _, ok := slices.BinarySearch(gres.Lost, id); return ok }
	for _, cl := range clients {
		cr := ClientResult{PausedWrites: cl.PausedWrites(committed, begin, stopAt)}
		var first time.Time
		acked := map[int64]bool{}
		lost := LostRows{Client: cl.Name, IDs: []int64{}}
		for _, rec := range cl.Records() {
			cr.SlowestMS = max(cr.SlowestMS, ms(rec.Took()))
			if rec.Start.Before(dns) && rec.End.After(switched) {
				cr.DuringSwitch++
				if rec.Err != "" {
					cr.FailedDuringSwitch++
				}
			}
			if rec.Err != "" {
				continue
			}
			acked[rec.ID] = true
			if (rec.Server != gres.OldWriter && rec.Server != gres.NewWriter) ||
				(rec.Server == gres.OldWriter && !rec.Start.Before(switched)) {
				// Answered by a server that was never the writer, or by the
				// old primary though it started after the switch: the old
				// primary was no longer the writer at any time during it.
				cr.MisplacedWrites++
			}
			if rec.Server == gres.OldWriter && !rec.Start.Before(switched) {
				cr.WritesToOldPrimary++
			}
			if rec.Server == gres.NewWriter && (first.IsZero() || rec.End.Before(first)) {
				first = rec.End
			}
			if !committed(rec.ID) && !listed(rec.ID) {
				lost.Unlisted++
			}
		}
		if !first.IsZero() {
			// The probe's answer may come up to its 5 ms after a write's.
			v := ms(max(first.Sub(writable), 0))
			cr.ResumeAfterPromotionMS = &v
		}
		if o.Op == Failover {
			for _, id := range gres.Lost {
				if owner(id) == cl.Name {
					lost.IDs = append(lost.IDs, id)
					if acked[id] {
						lost.Acknowledged++
					}
				}
			}
			res.Operation.Lost = append(res.Operation.Lost, lost)
		}
		res.Clients = append(res.Clients, cr)
	}
	return res, nil
}

// monitor records the holdfast monitor's status at the end (nil: none).
func (r *Result) monitor(m failover.Monitor) {
	if m == nil {
		return
	}
	st := m.Status()
	r.Monitor = &MonitorResult{Writer: st.Writer, WriterRegion: st.WriterRegion, Routing: st.Routing,
		Failovers: st.Failovers, Held: st.Held, MonitorConnects: st.MonitorConnects, Off: st.Off}
}

// timeline merges the simulator's steps and the monitor's events, in ms
// from the switch.
func (r *Result) timeline(gres failovertest.GlobalResult, events []failover.Event) {
	anchor, _ := gres.At(r.Operation.Switch)
	var tl []TimelineEvent
	for _, e := range gres.Events {
		tl = append(tl, TimelineEvent{Source: "simulator", Event: e.Name, Server: e.Server, at: e.At})
	}
	for _, e := range events {
		te := TimelineEvent{Source: "holdfast", Event: e.Name, Server: e.Server, Region: e.Region, FromRegion: e.FromRegion, at: e.At}
		if e.RPOLag > 0 {
			v := ms(e.RPOLag)
			te.RPOLagMS = &v
		}
		tl = append(tl, te)
	}
	sort.SliceStable(tl, func(i, j int) bool { return tl[i].at.Before(tl[j].at) })
	for i := range tl {
		tl[i].OffsetMS = ms(tl[i].at.Sub(anchor))
	}
	r.Timeline = tl
}

// regionFailover is holdfast's event of a failover with data loss; it
// names the Region that lost writes and the lag it lost.
const regionFailover = "region failover"

// lostLag returns holdfast's "region failover" event that names the lag
// lost, and whether there is one.
func (r *Result) lostLag() (TimelineEvent, bool) {
	i := slices.IndexFunc(r.Timeline, func(e TimelineEvent) bool {
		return e.Source == "holdfast" && e.Event == regionFailover && e.RPOLagMS != nil
	})
	if i < 0 {
		return TimelineEvent{}, false
	}
	return r.Timeline[i], true
}

// goals checks holdfast's targets for the operation on the figures.
func (r *Result) goals() {
	plain, hf := r.Clients[0], r.Clients[1]
	op := r.Operation
	add := func(goal string, met bool, format string, a ...any) {
		r.Goals = append(r.Goals, Goal{Goal: goal, Met: met, Measured: fmt.Sprintf(format, a...)})
	}
	resumed := hf.ResumeAfterPromotionMS != nil && *hf.ResumeAfterPromotionMS <= resumeGoalMS
	add(fmt.Sprintf("holdfast resumes within %d ms of the promotion", resumeGoalMS), resumed,
		"%s (pgxpool: %s)", msText(hf.ResumeAfterPromotionMS), msText(plain.ResumeAfterPromotionMS))
	switch op.Op {
	case Switchover:
		add("holdfast: no write failed through the switchover", hf.Failed == 0,
			"%d of %d failed (pgxpool: %d of %d)", hf.Failed, hf.Requests, plain.Failed, plain.Requests)
		add("holdfast: no write to the old primary after it turned read-only", hf.WritesToOldPrimary == 0,
			"%d (pgxpool: %d)", hf.WritesToOldPrimary, plain.WritesToOldPrimary)
		add("no acknowledged write lost (both clients)", plain.LostWrites == 0 && hf.LostWrites == 0,
			"%d and %d", plain.LostWrites, hf.LostWrites)
	case Failover:
		e, ok := r.lostLag()
		measured := "no such event"
		if ok {
			measured = fmt.Sprintf("%s lost about %.0f ms (the simulator's last rpo_lag_in_msec: %.0f ms)", e.FromRegion, *e.RPOLagMS, *op.RPOLagMS)
		}
		add("holdfast's \"region failover\" event names the lag lost", ok, "%s", measured)
		add("holdfast: no write to the old primary after its Region went down", hf.WritesToOldPrimary == 0,
			"%d (pgxpool: %d)", hf.WritesToOldPrimary, plain.WritesToOldPrimary)
		unlisted := 0
		for _, l := range op.Lost {
			unlisted += l.Unlisted
		}
		add("the audit lists every acknowledged write lost (both clients)", unlisted == 0,
			"%d lost, %d of them not listed", plain.LostWrites+hf.LostWrites, unlisted)
	}
}

// msText is v in ms ("123 ms"), "never" for nil.
func msText(v *float64) string {
	if v == nil {
		return "never"
	}
	return fmt.Sprintf("%.0f ms", *v)
}
