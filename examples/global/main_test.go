package main

import (
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/examples/harness/harnesstest"
	"github.com/holdfast-db/holdfast/examples/timeline"
	"github.com/holdfast-db/holdfast/fakes/failovertest"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// smallOptions are the demo's options scaled down for tests: 2 workers per
// pool, a lag of 300 ms, a failover detected after 300 ms, the global
// writer endpoint moving 1.5 s after the promotion, a client DNS TTL of
// 500 ms, a short warmup (long enough for the secondary's lag to be
// measured) and settle.
func smallOptions(op string) options {
	o := defaultOptions()
	o.Op = op
	o.Name = "t-" + op
	o.Workers = 2
	o.Think = 5 * time.Millisecond
	o.Warmup = time.Second
	o.Settle = time.Second
	o.Lag = 300 * time.Millisecond
	o.Detect = 300 * time.Millisecond
	o.DNSLag = 1500 * time.Millisecond
	o.DNSTTL = 500 * time.Millisecond
	return o
}

// TestGlobal runs the demo in-process for each operation, one global
// cluster each, one after the other (the goals are about timings), and
// checks holdfast's goals, that the operation bites plain pgxpool (the
// control), the -json output and the -svg picture.
func TestGlobal(t *testing.T) {
	if testing.Short() {
		t.Skip("plays an Aurora Global Database's switchover and failover on real servers: skipped with -short")
	}
	for _, op := range ops {
		t.Run(op, func(t *testing.T) { check(t, op) })
	}
}

func check(t *testing.T, op string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	o := smallOptions(op)
	o.SVG = filepath.Join(t.TempDir(), "global.svg")
	res, progress, out := harnesstest.Run(t, func(progress io.Writer) (*Result, error) { return run(ctx, o, progress) }, (*Result).print)
	if len(res.Clients) != 2 || res.Clients[0].Name != "pgxpool" || res.Clients[1].Name != "holdfast" {
		t.Fatalf("clients %+v, want pgxpool and holdfast", res.Clients)
	}
	plain, hf := res.Clients[0], res.Clients[1]
	ev := res.Operation
	t.Logf("MEASURED %s: writable %.0f ms, promotion stamped %.0f ms, DNS %.0f ms after the switch; holdfast: %d of %d failed %v, resume %s, %d to the old primary, longest pause %.0f ms; pgxpool: %d of %d failed %v (%d of %d from the switch to the DNS move), resume %s, %d to the old primary, longest pause %.0f ms",
		op, ev.WritableMS, ev.PromotionMS, ev.DNSMovedMS, hf.Failed, hf.Requests, hf.Errors, msText(hf.ResumeAfterPromotionMS), hf.WritesToOldPrimary, hf.MaxPauseMS,
		plain.Failed, plain.Requests, plain.Errors, plain.FailedDuringSwitch, plain.DuringSwitch, msText(plain.ResumeAfterPromotionMS), plain.WritesToOldPrimary, plain.MaxPauseMS)

	// The operation as the simulator played it.
	if ev.Op != op || ev.OldRegion == ev.NewRegion || ev.OldWriter == ev.NewWriter || ev.WritableMS <= 0 || ev.PromotionMS < ev.WritableMS ||
		ev.DNSMovedMS < ev.PromotionMS {
		t.Errorf("operation %+v", ev)
	}
	steps := []string{failovertest.EventWritesBlocked, failovertest.EventSynced, failovertest.EventWriterDown, failovertest.EventPromoted,
		failovertest.EventDemoted, failovertest.EventTopology, failovertest.EventDNS}
	if op == Failover {
		steps = []string{failovertest.EventRegionDown, failovertest.EventPromoted, failovertest.EventTopology, failovertest.EventDNS}
	}
	for _, s := range steps {
		if !hasEvent(res.Timeline, "simulator", s) {
			t.Errorf("timeline lacks the simulator's %q", s)
		}
	}

	// Both clients: writes acknowledged, none by a server that was not the
	// writer; a switchover loses none, a failover's losses are all
	// listed by the audit.
	for _, c := range res.Clients {
		if c.Acknowledged == 0 || c.MisplacedWrites != 0 {
			t.Errorf("%s: %d acknowledged, %d misplaced; want acknowledged writes, none misplaced", c.Name, c.Acknowledged, c.MisplacedWrites)
		}
		if op == Switchover && c.LostWrites != 0 {
			t.Errorf("%s: %d acknowledged writes lost through a switchover, want none", c.Name, c.LostWrites)
		}
	}
	if op == Failover {
		checkAudit(t, res)
	}

	// The control: plain pgxpool fails writes from the switch until the
	// global writer endpoint moves (and after: a switchover leaves its
	// connections on the old primary, read-only).
	if plain.FailedDuringSwitch == 0 {
		t.Errorf("pgxpool: none of its %d requests from the switch to the DNS move failed: the %s does not bite", plain.DuringSwitch, op)
	}

	// holdfast's goals.
	bound := resumeBound()
	if hf.ResumeAfterPromotionMS == nil || *hf.ResumeAfterPromotionMS > bound {
		t.Errorf("holdfast resumed %s after the new primary took writes, want within %.0f ms (goal %d ms%s)",
			msText(hf.ResumeAfterPromotionMS), bound, resumeGoalMS, raceNote())
	}
	if hf.WritesToOldPrimary != 0 {
		t.Errorf("holdfast: %d writes started after the switch were acknowledged by the old primary %s, want none", hf.WritesToOldPrimary, ev.OldWriter)
	}
	switch op {
	case Switchover:
		if hf.Failed != 0 {
			t.Errorf("holdfast failed %d writes through the switchover %v, want none", hf.Failed, hf.Errors)
		}
	case Failover:
		e, ok := res.lostLag()
		if !ok || e.FromRegion != ev.OldRegion || e.Region != ev.NewRegion {
			t.Errorf("holdfast's %q event %+v (found %v): want one from %s to %s naming the lag lost", regionFailover, e, ok, ev.OldRegion, ev.NewRegion)
		}
	}
	for _, g := range res.Goals {
		if !g.Met {
			t.Logf("goal not met in this run: %s (%s)", g.Goal, g.Measured)
		}
	}
	if !raceEnabled {
		for _, g := range res.Goals {
			if !g.Met {
				t.Errorf("goal %q not met: %s", g.Goal, g.Measured)
			}
		}
	}

	wants := []string{"timeline (ms from the switch)", "failed requests", "of them switch to DNS move", "acknowledged writes", "lost writes",
		"misplaced writes", "writes to the old primary", "longest pause", "resume after promotion", "holdfast monitor:", "goals:", "legend:"}
	if op == Failover {
		wants = append(wants, "audit: rows the old writer had committed", "rpo_lag_in_msec")
	}
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	for _, want := range []string{"holdfast=", "pgxpool  ok", "holdfast ok", "mode: ", "| writer "} {
		if !strings.Contains(progress, want) {
			t.Errorf("no progress line with %q:\n%s", want, progress)
		}
	}
	checkSVG(t, o.SVG, res)
	checkJSON(t, res)
}

// checkAudit checks a failover's audit: the lag lost and rows lost,
// every acknowledged write lost listed, and the lost rows split by client.
func checkAudit(t *testing.T, res *Result) {
	t.Helper()
	ev := res.Operation
	if ev.RPOLagMS == nil || *ev.RPOLagMS <= 0 || ev.LostRows == nil || *ev.LostRows == 0 || len(ev.Lost) != 2 {
		t.Fatalf("failover: rpo lag %v, %v rows lost, %d clients' losses; want a lag, rows lost, both clients", ev.RPOLagMS, ev.LostRows, len(ev.Lost))
	}
	n := 0
	for i, l := range ev.Lost {
		c := res.Clients[i]
		n += len(l.IDs)
		if l.Client != c.Name || l.Unlisted != 0 || l.Acknowledged != c.LostWrites {
			t.Errorf("%s's losses %+v; want all %d of its acknowledged writes lost listed", c.Name, l, c.LostWrites)
		}
		for _, id := range l.IDs {
			if owner(id) != c.Name {
				t.Errorf("%s's losses list id %d, of %s", c.Name, id, owner(id))
			}
		}
	}
	if n != *ev.LostRows {
		t.Errorf("the clients' losses list %d rows, the audit %d", n, *ev.LostRows)
	}
}

// resumeBound is the resume bound the test holds holdfast to: the goal
// (250 ms after the new primary takes writes) without the race detector;
// under it, which slows holdfast's monitor and the workload several times
// over, 1 s: still well before the DNS move (1.5 s after the promotion)
// and its cache (500 ms), so routing that stopped working fails either
// way.
func resumeBound() float64 {
	if raceEnabled {
		return 1000
	}
	return resumeGoalMS
}

func raceNote() string {
	if raceEnabled {
		return ", loosened under the race detector"
	}
	return ""
}

func hasEvent(tl []TimelineEvent, source, name string) bool {
	return slices.ContainsFunc(tl, func(e TimelineEvent) bool { return e.Source == source && e.Event == name })
}

// checkSVG checks the picture of -svg: a well-formed SVG with both
// clients' series, their failed requests and longest pauses as in the
// table, the operation's two phases, the promotion and the DNS move.
func checkSVG(t *testing.T, path string, res *Result) {
	t.Helper()
	var clients []timeline.Figures
	for _, c := range res.Clients {
		clients = append(clients, timeline.Figures{Name: c.Name, Failed: c.Failed, MaxPauseMS: c.MaxPauseMS})
	}
	got := harnesstest.CheckSVG(t, path, clients)
	first := "writes blocked"
	if res.Operation.Op == Failover {
		first = "Region down"
	}
	if want := []string{first, "new primary, DNS lags"}; !slices.Equal(got.Bands, want) {
		t.Errorf("picture: phases %v, want %v", got.Bands, want)
	}
	for _, m := range []string{"new primary takes writes", "DNS moved"} {
		if !slices.Contains(got.Marks, m) {
			t.Errorf("picture: marks %v lack %q", got.Marks, m)
		}
	}
}

// checkJSON checks that the -json output has the shape a script reads: a
// clients array with name, requests, failed, max_pause_ms,
// resume_after_promotion_ms and writes_to_old_primary, and an operation
// object with the operation, Regions, writers, promotion and DNS move
// and, for a failover, the rpo lag and the rows lost.
func checkJSON(t *testing.T, res *Result) {
	t.Helper()
	var got struct {
		Clients []struct {
			harnesstest.WritesJSON
			MaxPauseMS             *float64        `json:"max_pause_ms"`
			ResumeAfterPromotionMS json.RawMessage `json:"resume_after_promotion_ms"`
			WritesToOldPrimary     *int            `json:"writes_to_old_primary"`
		} `json:"clients"`
		Operation *struct {
			Op          *string  `json:"op"`
			OldRegion   *string  `json:"old_region"`
			NewRegion   *string  `json:"new_region"`
			OldWriter   *string  `json:"old_writer"`
			NewWriter   *string  `json:"new_writer"`
			WritableMS  *float64 `json:"accepts_writes_ms"`
			PromotionMS *float64 `json:"promotion_ms"`
			DNSMovedMS  *float64 `json:"dns_moved_ms"`
			RPOLagMS    *float64 `json:"rpo_lag_ms"`
			LostRows    *int     `json:"lost_rows"`
		} `json:"operation"`
		Timeline []struct {
			Event    *string  `json:"event"`
			OffsetMS *float64 `json:"offset_ms"`
		} `json:"timeline"`
		Goals []struct {
			Goal *string `json:"goal"`
			Met  *bool   `json:"met"`
		} `json:"goals"`
	}
	b := harnesstest.DecodeJSON(t, res, &got)
	if len(got.Clients) != 2 || got.Operation == nil || len(got.Timeline) == 0 || len(got.Goals) == 0 {
		t.Fatalf("JSON lacks clients, operation, timeline or goals: %s", b)
	}
	for _, c := range got.Clients {
		if c.Missing() || c.MaxPauseMS == nil || c.ResumeAfterPromotionMS == nil || c.WritesToOldPrimary == nil {
			t.Errorf("JSON client lacks a field: %s", b)
		}
	}
	op := got.Operation
	if op.Op == nil || *op.Op != res.Operation.Op || op.OldRegion == nil || op.NewRegion == nil || op.OldWriter == nil || op.NewWriter == nil ||
		op.WritableMS == nil || op.PromotionMS == nil || op.DNSMovedMS == nil {
		t.Errorf("JSON operation lacks a field: %s", b)
	}
	if failover := res.Operation.Op == Failover; (op.RPOLagMS != nil) != failover || (op.LostRows != nil) != failover {
		t.Errorf("JSON operation: rpo_lag_ms and lost_rows want to be there for a failover only: %s", b)
	}
	for _, g := range got.Goals {
		if g.Goal == nil || g.Met == nil {
			t.Errorf("JSON goal lacks goal or met: %s", b)
		}
	}
}

func TestParseFlags(t *testing.T) {
	harnesstest.Flags(t, command, []string{"-op", "nope"}, []harnesstest.FlagCase[options]{
		{Name: "defaults", Args: nil, Check: func(o options) bool {
			return o.Op == Switchover && o.Workers == 4 && !o.JSON && o.TLS && o.Lag == failovertest.DefaultGlobalLag &&
				o.DNSTTL == failovertest.DefaultTTL && o.DNSLag == 5*time.Second && o.RequestTimeout == 15*time.Second
		}},
		{Name: "failover", Args: []string{"-op", "failover", "-json", "-svg", "run.svg", "-detect", "1s", "-lag", "1s", "-tls=false"},
			Check: func(o options) bool {
				return o.Op == Failover && o.JSON && o.SVG == "run.svg" && o.Detect == time.Second && o.Lag == time.Second && !o.TLS
			}},
		{Name: "timings", Args: []string{"-dns-lag", "2s", "-dns-ttl", "0", "-warmup", "3s", "-settle", "1s", "-request-timeout", "5s"},
			Check: func(o options) bool {
				return o.DNSLag == 2*time.Second && o.DNSTTL == 0 && o.Warmup == 3*time.Second && o.Settle == time.Second &&
					o.RequestTimeout == 5*time.Second
			}},
		{Name: "unknown op", Args: []string{"-op", "failback"}, WantErr: true},
		{Name: "no workers", Args: []string{"-workers", "0"}, WantErr: true},
		{Name: "negative lag", Args: []string{"-lag", "-1s"}, WantErr: true},
		{Name: "no request timeout", Args: []string{"-request-timeout", "0"}, WantErr: true},
		{Name: "unknown flag", Args: []string{"-nope"}, WantErr: true},
	})
}

func TestIDRanges(t *testing.T) {
	for _, tt := range []struct {
		ids  []int64
		base int64
		want string
	}{
		{nil, 0, "none"},
		{[]int64{3, 4, 5, 9}, 0, "ids 3–5, 9"},
		{[]int64{1<<40 + 7, 1<<40 + 8}, 1 << 40, "ids 7–8 (+1099511627776)"},
		{[]int64{1, 3, 5, 7, 9, 11, 13, 14}, 0, "ids 1, 3, 5, 7, 9, 11 and 2 more"},
	} {
		if got := idRanges(tt.ids, tt.base); got != tt.want {
			t.Errorf("idRanges(%v, %d) = %q, want %q", tt.ids, tt.base, got, tt.want)
		}
	}
}
