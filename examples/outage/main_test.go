package main

import (
	"context"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/examples/harness/harnesstest"
	"github.com/holdfast-db/holdfast/examples/timeline"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// smallOptions are the demo's options for tests: 2 workers per pool, a
// short warmup and settle; the restart keeps its 5 s, the Multi-AZ
// failover is scaled from 20 s to 4 s (detect 1 s, DNS lag 3 s: longer
// than the plain client's attempt bound, 3 s, so that its attempts on the
// silent address time out), the demoted primary's name moves 2 s after
// the promotion. Each request is bounded by the outage plus 1 s (the
// default).
func smallOptions(scenario string) options {
	o := defaultOptions()
	o.Scenario = scenario
	o.Workers = 2
	o.Warmup = 500 * time.Millisecond
	o.Settle = time.Second
	o.Detect = time.Second
	o.DNSLag = 3 * time.Second
	o.NameLag = 2 * time.Second
	o.Every = defaultEvery(scenario)
	return o
}

// TestOutage runs the demo in-process for each scenario, one after the
// other (the goals are about timings), and checks holdfast's goals, that
// the fault bites plain pgxpool, the -json output and the -svg picture.
func TestOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("plays every outage of the demo on real servers: skipped with -short")
	}
	for _, scenario := range scenarios {
		t.Run(scenario, func(t *testing.T) { check(t, scenario) })
	}
}

func check(t *testing.T, scenario string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o := smallOptions(scenario)
	o.SVG = filepath.Join(t.TempDir(), "outage.svg")
	res, progress, out := harnesstest.Run(t, func(progress io.Writer) (*Result, error) { return run(ctx, o, progress) }, (*Result).print)
	if len(res.Clients) != 2 || res.Clients[0].Name != "pgxpool" || res.Clients[1].Name != "holdfast" {
		t.Fatalf("clients %+v, want pgxpool and holdfast", res.Clients)
	}
	plain, hf := res.Clients[0], res.Clients[1]
	t.Logf("MEASURED %s: outage %.0f ms; holdfast: %d of %d failed %v, resume %s, %d connects while down (%d steps), %d hung; pgxpool: %d of %d failed %v (%d of %d during the outage), resume %s, %d connects while down, longest pause %.0f ms",
		scenario, res.OutageMS, hf.Failed, hf.Requests, hf.Errors, msText(hf.ResumeAfterBackMS), hf.ConnectsWhileDown, res.BackoffSteps, hf.HungPastDeadline,
		plain.Failed, plain.Requests, plain.Errors, plain.FailedDuringOutage, plain.DuringOutage, msText(plain.ResumeAfterBackMS), plain.ConnectsWhileDown, plain.MaxPauseMS)

	// Correctness, for both clients and in every scenario: no
	// acknowledged write lost; holdfast: no request past its deadline.
	for _, c := range res.Clients {
		if c.Acknowledged == 0 || c.LostWrites != 0 {
			t.Errorf("%s: %d acknowledged, %d lost; want acknowledged writes, none lost", c.Name, c.Acknowledged, c.LostWrites)
		}
	}
	if hf.HungPastDeadline != 0 {
		t.Errorf("holdfast: %d requests ended over %v after their deadline (the slowest %.0f ms, bound %.0f ms)",
			hf.HungPastDeadline, hangSlack, hf.SlowestMS, res.RequestTimeoutMS)
	}
	restartMS, dnsMS := speedBounds()
	switch scenario {
	case Restart:
		// holdfast: nothing fails, at most one connect per step of the
		// prober's pace while down, a resume within 200 ms.
		if hf.Failed != 0 {
			t.Errorf("holdfast failed %d requests %v, want none", hf.Failed, hf.Errors)
		}
		if hf.ConnectsWhileDown > res.BackoffSteps {
			t.Errorf("holdfast: %d connects while down, more than one per backoff step (%d steps)", hf.ConnectsWhileDown, res.BackoffSteps)
		}
		checkResume(t, hf, restartMS, 200, "the database accepting again")
		// The control: the requests during the stop fail, its dials storm.
		if plain.FailedDuringOutage == 0 || plain.FailedDuringOutage < plain.DuringOutage/2 {
			t.Errorf("pgxpool: %d of %d requests during the stop failed; want most: the restart does not bite", plain.FailedDuringOutage, plain.DuringOutage)
		}
		if plain.ConnectsWhileDown <= hf.ConnectsWhileDown {
			t.Errorf("pgxpool: %d connects while down, holdfast %d: want pgxpool's retries to dial more", plain.ConnectsWhileDown, hf.ConnectsWhileDown)
		}
	case MultiAZ:
		checkResume(t, hf, dnsMS, 1000, "the DNS move")
		// holdfast: no connect fails at the admission wait's bound (a
		// connect queued behind the ones the hold keeps waiting waits on
		// the hold too). Those on the silent primary's frozen connections
		// (in flight at the silence, or handed an idle one at once) are
		// cut when the prober sees the DNS move, and the runner runs them
		// again if their deadline leaves time: 0 failed in the runs
		// measured, not asserted (a fraction of a second is left).
		if n := hf.Errors["transient/"+classify.ReasonQueued]; n != 0 {
			t.Errorf("holdfast: %d requests failed waiting for an admission slot %v, want none", n, hf.Errors)
		}
		if plain.MaxPauseMS < res.OutageMS {
			t.Errorf("pgxpool's longest pause %.0f ms, shorter than the outage (%.0f ms): the failover does not bite", plain.MaxPauseMS, res.OutageMS)
		}
		if plain.Failed+plain.Retries == 0 {
			t.Errorf("pgxpool: no request failed or retried: the failover does not bite")
		}
	case Demoted:
		if n := hf.Errors["25006"]; n > readOnlyFailures {
			t.Errorf("holdfast: %d writes failed with 25006, want at most %d (the first, and one acquired meanwhile)", n, readOnlyFailures)
		}
		if hf.Failed != 0 {
			t.Errorf("holdfast failed %d requests %v, want none", hf.Failed, hf.Errors)
		}
		if hf.ResumeAfterBackMS == nil {
			t.Error("holdfast never wrote again after the name moved")
		}
		if plain.Errors["25006"] == 0 {
			t.Errorf("pgxpool: no write failed with 25006: the demote does not bite (%v)", plain.Errors)
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

	for _, want := range []string{"timeline (ms from the fault)", "failed requests", "acknowledged writes", "lost writes",
		"longest pause", "resume after back", "connects while down", "goals:", "legend:"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	for _, want := range []string{"pgxpool  ok", "holdfast ok", "| dials pgxpool"} {
		if !strings.Contains(progress, want) {
			t.Errorf("no progress line with %q:\n%s", want, progress)
		}
	}
	if scenario != MultiAZ && !hasEvent(res.Timeline, "holdfast", "database back") {
		t.Errorf("timeline lacks holdfast's \"database back\": %+v", res.Timeline)
	}
	checkSVG(t, o.SVG, res)
	checkJSON(t, res)
}

// checkResume checks holdfast's resume after the database is back
// against bound (the goal, goalMS, without the race detector).
func checkResume(t *testing.T, hf ClientResult, bound, goalMS float64, after string) {
	t.Helper()
	if hf.ResumeAfterBackMS == nil || *hf.ResumeAfterBackMS > bound {
		t.Errorf("holdfast resumed %s after %s, want within %.0f ms (goal %.0f ms%s)", msText(hf.ResumeAfterBackMS), after, bound, goalMS, raceNote())
	}
}

func hasEvent(tl []TimelineEvent, source, name string) bool {
	return slices.ContainsFunc(tl, func(e TimelineEvent) bool { return e.Source == source && e.Event == name })
}

// checkSVG checks the picture of -svg: a well-formed SVG with both
// clients' series, their failed requests and longest pauses as in the
// table, the outage as a phase.
func checkSVG(t *testing.T, path string, res *Result) {
	t.Helper()
	var clients []timeline.Figures
	for _, c := range res.Clients {
		clients = append(clients, timeline.Figures{Name: c.Name, Failed: c.Failed, MaxPauseMS: c.MaxPauseMS})
	}
	got := harnesstest.CheckSVG(t, path, clients)
	if !slices.Equal(got.Bands, []string{"database down"}) {
		t.Errorf("picture: phases %v, want [database down]", got.Bands)
	}
}

// checkJSON checks that the -json output has the shape a script reads: a
// clients array with name, requests, failed, max_pause_ms,
// resume_after_back_ms and connects_while_down.
func checkJSON(t *testing.T, res *Result) {
	t.Helper()
	var got struct {
		Scenario *string  `json:"scenario"`
		OutageMS *float64 `json:"outage_ms"`
		Clients  []struct {
			harnesstest.WritesJSON
			MaxPauseMS        *float64 `json:"max_pause_ms"`
			ResumeAfterBackMS *float64 `json:"resume_after_back_ms"`
			ConnectsWhileDown *int     `json:"connects_while_down"`
		} `json:"clients"`
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
	if got.Scenario == nil || *got.Scenario != res.Scenario || got.OutageMS == nil || len(got.Clients) != 2 ||
		len(got.Timeline) == 0 || len(got.Goals) == 0 {
		t.Fatalf("JSON lacks scenario, outage_ms, clients, timeline or goals: %s", b)
	}
	for i, c := range got.Clients {
		// resume_after_back_ms is null only for a client that never wrote
		// again.
		if c.Missing() || c.MaxPauseMS == nil || c.ConnectsWhileDown == nil || (c.ResumeAfterBackMS == nil) != (res.Clients[i].ResumeAfterBackMS == nil) {
			t.Errorf("JSON client lacks a field: %s", b)
		}
	}
	for _, g := range got.Goals {
		if g.Goal == nil || g.Met == nil {
			t.Errorf("JSON goal lacks goal or met: %s", b)
		}
	}
}

func TestParseFlags(t *testing.T) {
	harnesstest.Flags(t, command, []string{"-scenario", "nope"}, []harnesstest.FlagCase[options]{
		{Name: "defaults", Args: nil, Check: func(o options) bool {
			return o.Scenario == Restart && o.Every == 250*time.Millisecond && o.Workers == 4 && !o.JSON && o.Down == 5*time.Second && o.timeout() == 7*time.Second &&
				o.Detect+o.DNSLag == 20*time.Second && o.DNSTTL == 200*time.Millisecond
		}},
		{Name: "multiaz", Args: []string{"-scenario", "multiaz", "-json", "-svg", "run.svg"}, Check: func(o options) bool {
			return o.Scenario == MultiAZ && o.JSON && o.SVG == "run.svg" && o.timeout() == 21200*time.Millisecond && o.Every == 250*time.Millisecond
		}},
		{Name: "demoted", Args: []string{"-scenario", "demoted", "-name-lag", "1s", "-request-timeout", "3s", "-dns-ttl", "0"},
			Check: func(o options) bool {
				return o.Scenario == Demoted && o.NameLag == time.Second && o.timeout() == 3*time.Second && o.DNSTTL == 0
			}},
		{Name: "closed loop", Args: []string{"-scenario", "multiaz", "-every", "0"}, Check: func(o options) bool { return o.Every == 0 }},
		{Name: "unknown scenario", Args: []string{"-scenario", "crash"}, WantErr: true},
		{Name: "no workers", Args: []string{"-workers", "0"}, WantErr: true},
		{Name: "negative down", Args: []string{"-down", "-1s"}, WantErr: true},
		{Name: "unknown flag", Args: []string{"-nope"}, WantErr: true},
	})
}

// speedBounds are the resume bounds the test holds holdfast to: the goals
// (200 ms after a restart's server accepts again, 1 s after the DNS move)
// without the race detector; under it, which slows holdfast's prober and
// the workload several times over, 600 ms and 2 s. Correctness (no failed
// request, no lost write, none past its deadline) is held either way.
func speedBounds() (restartMS, dnsMS float64) {
	if raceEnabled {
		return 600, 2000
	}
	return 200, 1000
}

func raceNote() string {
	if raceEnabled {
		return ", loosened under the race detector"
	}
	return ""
}
