package main

import (
	"math"
	"time"

	"github.com/holdfast-db/holdfast/examples/harness"
	"github.com/holdfast-db/holdfast/fakes/failovertest"
)

// Result is what the command measured; its JSON form is the -json output.
type Result struct {
	Engine           failovertest.Engine `json:"engine"`
	ReadersAtStart   int                 `json:"readers_at_start"`
	PoolSize         int                 `json:"pool_size"`
	Workers          int                 `json:"workers"`
	RefreshMS        float64             `json:"refresh_interval_ms"`
	MaxLagMS         float64             `json:"max_lag_ms"`
	LagMS            float64             `json:"lag_ms"`
	DNSTTLMS         float64             `json:"dns_ttl_ms"`
	JoinWaitMS       float64             `json:"join_wait_ms"`
	AddedReader      string              `json:"added_reader"`
	AddReaderTookMS  float64             `json:"add_reader_took_ms"` // AddReader's own time (pg_basebackup)
	CrashedReader    string              `json:"crashed_reader"`
	LaggingReader    string              `json:"lagging_reader"`
	LagCutoffAfterMS float64             `json:"lag_cutoff_after_ms"` // MaxLag + one refresh
	// Clients are pgxpool, then holdfast.
	Clients []ClientResult `json:"clients"`
	// Phases are the run's phases, in ms from the start of the workload.
	Phases []Phase `json:"phases"`
	// Samples are the connections per reader per client, every 250 ms
	// (a reader down is left out).
	Samples []Sample `json:"samples"`
	Goals   Goals    `json:"goals"`
}

// ClientResult is one client's figures: every demo's (name, requests, ok,
// failed, errors) and the readers'.
type ClientResult struct {
	harness.Counts
	// ReaderConnectionsMaxMin is the largest, over the steady phase's
	// samples, of the most connections on a reader over the fewest; null
	// when a reader had none (unbounded): see ReaderConnectionsMin/Max.
	ReaderConnectionsMaxMin *float64 `json:"reader_connections_max_min"`
	ReaderConnectionsMin    int      `json:"reader_connections_min"` // the fewest on a reader, over the steady phase
	ReaderConnectionsMax    int      `json:"reader_connections_max"` // the most on a reader, over the steady phase
	// NewReaderShare is the added reader's connections ÷ its fair share
	// (the client's reader connections ÷ the readers), JoinWait after it
	// joined.
	NewReaderShare       float64 `json:"new_reader_share"`
	NewReaderConnections int     `json:"new_reader_connections"`
	NewReaderFairShare   float64 `json:"new_reader_fair_share"`
	// NewReader80pctMS: from the join to the first sample where it held
	// ≥ 80 % of its fair share; null if none did before the crash.
	NewReader80pctMS *float64 `json:"new_reader_80pct_ms"`
	// ResumeAfterCrashMS: from the crash until every worker reads again
	// (each worker's first successful read after its last failure, or
	// after the crash when it had none), up to the end of the run (the
	// lag phase fails no read); null when one never read again.
	ResumeAfterCrashMS *float64 `json:"resume_after_crash_ms"`
	// FailedAtCrash: reads that failed from the crash to the end of the
	// run (reads in flight at the crash included); FailedBeyondInFlight:
	// those of them that started after CrashReader returned, when the
	// reader was dead already (not in flight when it died).
	FailedAtCrash        int `json:"failed_at_crash"`
	FailedBeyondInFlight int `json:"failed_beyond_in_flight"`
	// LaggingReads: successful reads served by the lagging reader that
	// started after the lag + MaxLag + one refresh; LaggingReadsAll, every
	// read it served from the lag on.
	LaggingReads    int `json:"lagging_reads"`
	LaggingReadsAll int `json:"lagging_reads_all"`
	// PerPhase: per phase, the reads served per server and the
	// connections per reader at the phase's last sample.
	PerPhase []PhaseFigures `json:"per_phase"`
}

// PhaseFigures are a client's figures in one phase.
type PhaseFigures struct {
	Phase       string         `json:"phase"`
	Reads       map[string]int `json:"reads_per_server"`
	Failed      int            `json:"failed"`
	Connections map[string]int `json:"connections_per_reader"`
}

// Phase is one phase of the run, in ms from the start of the workload.
type Phase struct {
	Name    string  `json:"name"`
	StartMS float64 `json:"start_ms"`
	EndMS   float64 `json:"end_ms"`

	start, end time.Time
}

// Sample is the connections per reader of each client at one time.
type Sample struct {
	AtMS  float64                   `json:"at_ms"`
	Phase string                    `json:"phase"`
	Conns map[string]map[string]int `json:"connections"` // client → reader → connections

	at time.Time
}

// Goals are the targets, checked on holdfast's figures of this run.
type Goals struct {
	SpreadAtMost125       bool `json:"spread_at_most_1_25"`          // reader connections max/min ≤ 1.25
	NewReaderAtLeast80pct bool `json:"new_reader_at_least_80pct"`    // ≥ 80 % of its fair share within JoinWait
	ResumeWithin1s        bool `json:"resume_after_crash_within_1s"` // every worker reads again within 1 s
	NoFailedBeyondFlight  bool `json:"no_failed_beyond_in_flight"`   // no read that started after the crash failed
	NoLaggingReads        bool `json:"no_lagging_reads"`             // none served by the lagging reader after MaxLag + one refresh
	Met                   bool `json:"met"`                          // all of the above
}

var ms = harness.MS

// moments are the times and readers of the run that its figures are
// measured by.
type moments struct {
	begin            time.Time         // the workload's start
	original         []string          // the readers at the start
	added            string            // the reader that joined
	joined           time.Time         // when AddReader returned
	share            map[string][2]int // client → {its connections on the added reader, on every reader}, JoinWait after the join
	readersAfterJoin int               // the readers then
	crashAt          time.Time         // CrashReader called
	crashDone        time.Time         // CrashReader returned
	lagging          string            // the reader that lags
	lagAt            time.Time         // SetLag called
	cutoff           time.Time         // lagAt + MaxLag + one refresh
}

// measure computes the figures of each client into res, from the
// phases, the samples and the moments of the run, then the goals.
func measure(res *Result, clients []*client, phases []Phase, samples []Sample, m moments) {
	for i := range phases {
		phases[i].StartMS, phases[i].EndMS = ms(phases[i].start.Sub(m.begin)), ms(phases[i].end.Sub(m.begin))
	}
	res.Phases = phases
	res.Samples = samples
	for i := range res.Samples {
		res.Samples[i].AtMS = ms(res.Samples[i].at.Sub(m.begin))
	}
	for _, cl := range clients {
		cr := ClientResult{Counts: cl.Count()}
		all := cl.Records()
		// Steady: the worst max/min of a sample.
		lo, hi, worst := math.MaxInt, 0, 0.0
		for _, s := range res.Samples {
			if s.Phase != "steady" {
				continue
			}
			slo, shi := math.MaxInt, 0
			for _, id := range m.original {
				n := s.Conns[cl.Name][id]
				slo, shi = min(slo, n), max(shi, n)
			}
			lo, hi = min(lo, slo), max(hi, shi)
			if slo == 0 {
				worst = math.Inf(1)
			} else {
				worst = max(worst, float64(shi)/float64(slo))
			}
		}
		if lo == math.MaxInt {
			lo = 0
		}
		cr.ReaderConnectionsMin, cr.ReaderConnectionsMax = lo, hi
		if !math.IsInf(worst, 1) && worst > 0 {
			cr.ReaderConnectionsMaxMin = &worst
		}
		// The added reader's share.
		sh := m.share[cl.Name]
		cr.NewReaderConnections = sh[0]
		cr.NewReaderFairShare = float64(sh[1]) / float64(m.readersAfterJoin)
		if cr.NewReaderFairShare > 0 {
			cr.NewReaderShare = float64(sh[0]) / cr.NewReaderFairShare
		}
		for _, s := range res.Samples {
			if s.at.Before(m.joined) || !s.at.Before(m.crashAt) {
				continue
			}
			total := 0
			for _, n := range s.Conns[cl.Name] {
				total += n
			}
			if fair := float64(total) / float64(m.readersAfterJoin); fair > 0 && float64(s.Conns[cl.Name][m.added]) >= 0.8*fair {
				v := ms(s.at.Sub(m.joined))
				cr.NewReader80pctMS = &v
				break
			}
		}
		// The crash.
		resume := time.Duration(0)
		resumed := true
		for _, recs := range cl.Recs {
			from := m.crashAt
			for _, r := range recs {
				if r.Err != "" && !r.Start.Before(m.crashAt) {
					cr.FailedAtCrash++
					if !r.Start.Before(m.crashDone) {
						cr.FailedBeyondInFlight++
					}
					from = r.End
				}
				// A read that started before the crash and failed after it.
				if r.Err != "" && r.Start.Before(m.crashAt) && r.End.After(m.crashAt) {
					cr.FailedAtCrash++
					from = r.End
				}
			}
			var back time.Time
			for _, r := range recs {
				if r.Err == "" && !r.Start.Before(from) {
					back = r.End
					break
				}
			}
			if back.IsZero() {
				resumed = false
				continue
			}
			resume = max(resume, back.Sub(m.crashAt))
		}
		if resumed {
			v := ms(resume)
			cr.ResumeAfterCrashMS = &v
		}
		// The lag.
		for _, r := range all {
			if r.Err != "" || r.Server != m.lagging || r.Start.Before(m.lagAt) {
				continue
			}
			cr.LaggingReadsAll++
			if !r.Start.Before(m.cutoff) {
				cr.LaggingReads++
			}
		}
		// Per phase.
		for _, p := range phases {
			pf := PhaseFigures{Phase: p.Name, Reads: map[string]int{}, Connections: map[string]int{}}
			for _, r := range all {
				if r.Start.Before(p.start) || !r.Start.Before(p.end) {
					continue
				}
				if r.Err != "" {
					pf.Failed++
				} else {
					pf.Reads[r.Server]++
				}
			}
			for _, s := range res.Samples {
				if s.Phase == p.Name {
					pf.Connections = s.Conns[cl.Name]
				}
			}
			cr.PerPhase = append(cr.PerPhase, pf)
		}
		res.Clients = append(res.Clients, cr)
	}
	res.goals()
}

// goals checks the targets on holdfast's figures.
func (r *Result) goals() {
	hf := r.Clients[1]
	g := &r.Goals
	g.SpreadAtMost125 = hf.ReaderConnectionsMaxMin != nil && *hf.ReaderConnectionsMaxMin <= 1.25
	g.NewReaderAtLeast80pct = hf.NewReaderShare >= 0.8
	g.ResumeWithin1s = hf.ResumeAfterCrashMS != nil && *hf.ResumeAfterCrashMS <= 1000
	g.NoFailedBeyondFlight = hf.FailedBeyondInFlight == 0
	g.NoLaggingReads = hf.LaggingReads == 0
	g.Met = g.SpreadAtMost125 && g.NewReaderAtLeast80pct && g.ResumeWithin1s && g.NoFailedBeyondFlight && g.NoLaggingReads
}
