package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/examples/harness/harnesstest"
	"github.com/holdfast-db/holdfast/fakes/failovertest"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// smallOptions are the demo's options scaled down, for tests: shorter
// phases, 3 workers per client. The pool stays 12 on 3 then 4 readers, so
// that an even spread is possible (max/min 1.00 is exact: counts are
// integers); the lag and MaxLag stay the demo's, 3 s and 1 s, with a 1 s
// refresh. The added reader's share is measured 5 s after it joined, half
// the goal's 10 s.
func smallOptions() options {
	o := defaultOptions()
	o.Name = "t-readers"
	o.Workers = 3
	o.Steady = 2 * time.Second
	o.JoinWait = 5 * time.Second
	o.CrashFor = 3 * time.Second
	o.LagFor = 3 * time.Second
	return o
}

// resumeBound is the test's bound on holdfast's resume after the crash:
// the goal is 1 s; two shared cores under other clusters get more room.
// The figure itself is logged.
const resumeBound = 2500 // ms

// TestReaders runs the demo in-process, scaled down, and checks
// holdfast's goals: connections per reader max/min ≤ 1.25 in the steady
// phase, the added reader ≥ 80 % of its fair share, reads resuming after
// a reader crash (within resumeBound) with no failed read beyond those in
// flight, and no read served by the lagging reader after MaxLag + one
// refresh; and that the faults bite the plain pool: a worse spread than
// holdfast's, failures at the crash.
func TestReaders(t *testing.T) {
	if testing.Short() {
		t.Skip("plays the readers demo on a real cluster: skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o := smallOptions()
	res, progress, out := harnesstest.Run(t, func(progress io.Writer) (*Result, error) { return run(ctx, o, progress) }, (*Result).print)

	if len(res.Clients) != 2 || res.Clients[0].Name != "pgxpool" || res.Clients[1].Name != "holdfast" {
		t.Fatalf("clients %+v, want pgxpool and holdfast", res.Clients)
	}
	plain, hf := res.Clients[0], res.Clients[1]
	if res.AddedReader == "" || res.CrashedReader == "" || res.LaggingReader == "" || res.CrashedReader == res.LaggingReader {
		t.Fatalf("added %q, crashed %q, lagging %q: want three readers, the crashed one not the lagging one",
			res.AddedReader, res.CrashedReader, res.LaggingReader)
	}
	var names []string
	for _, p := range res.Phases {
		names = append(names, p.Name)
	}
	if strings.Join(names, ",") != "steady,add,crash,lag" {
		t.Errorf("phases %v, want steady, add, crash, lag", names)
	}
	for _, c := range res.Clients {
		if c.OK == 0 || c.Requests != c.OK+c.Failed || len(c.PerPhase) != 4 {
			t.Errorf("%s: %d requests, %d ok, %d failed, %d phases", c.Name, c.Requests, c.OK, c.Failed, len(c.PerPhase))
		}
	}
	ratio := func(c ClientResult) string {
		if c.ReaderConnectionsMaxMin == nil {
			return "∞"
		}
		return fmt.Sprintf("%.2f", *c.ReaderConnectionsMaxMin)
	}
	t.Logf("MEASURED holdfast: max/min %s (%d–%d), new reader share %.2f (80%% after %s ms), resume after crash %s ms, "+
		"failed at crash %d (%d beyond in flight), lagging reads %d (%d from the lag on)",
		ratio(hf), hf.ReaderConnectionsMin, hf.ReaderConnectionsMax, hf.NewReaderShare, optMS(hf.NewReader80pctMS),
		optMS(hf.ResumeAfterCrashMS), hf.FailedAtCrash, hf.FailedBeyondInFlight, hf.LaggingReads, hf.LaggingReadsAll)
	t.Logf("MEASURED pgxpool:  max/min %s (%d–%d), new reader share %.2f, resume after crash %s ms, "+
		"failed at crash %d (%d beyond in flight), lagging reads %d (%d from the lag on)",
		ratio(plain), plain.ReaderConnectionsMin, plain.ReaderConnectionsMax, plain.NewReaderShare,
		optMS(plain.ResumeAfterCrashMS), plain.FailedAtCrash, plain.FailedBeyondInFlight, plain.LaggingReads, plain.LaggingReadsAll)

	// holdfast: the goals.
	if hf.ReaderConnectionsMaxMin == nil || *hf.ReaderConnectionsMaxMin > 1.25 {
		t.Errorf("holdfast: reader connections max/min %s (%d–%d) in the steady phase, want ≤ 1.25",
			ratio(hf), hf.ReaderConnectionsMin, hf.ReaderConnectionsMax)
		for _, s := range res.Samples {
			if s.Phase == "steady" {
				t.Logf("steady sample at %.0f ms: holdfast %v, pgxpool %v", s.AtMS, s.Conns["holdfast"], s.Conns["pgxpool"])
			}
		}
	}
	if hf.NewReaderShare < 0.8 {
		t.Errorf("holdfast: the added reader holds %d connections %v after it joined, %.0f%% of its fair share %.1f; want ≥ 80%%",
			hf.NewReaderConnections, o.JoinWait, 100*hf.NewReaderShare, hf.NewReaderFairShare)
	}
	if hf.ResumeAfterCrashMS == nil || *hf.ResumeAfterCrashMS > resumeBound {
		t.Errorf("holdfast: reads resumed %s ms after the crash, want ≤ %d ms (goal 1000 ms)", optMS(hf.ResumeAfterCrashMS), resumeBound)
	}
	if hf.FailedBeyondInFlight != 0 {
		t.Errorf("holdfast: %d reads that started after the crash failed (%d failed in all, %v), want none beyond those in flight",
			hf.FailedBeyondInFlight, hf.FailedAtCrash, hf.Errors)
	}
	if hf.LaggingReads != 0 {
		t.Errorf("holdfast: %d reads served by the lagging reader %s after MaxLag + one refresh (%v), want none",
			hf.LaggingReads, res.LaggingReader, o.MaxLag+o.Refresh)
	}

	// The control: the faults bite the plain pool.
	if plain.ReaderConnectionsMaxMin != nil && hf.ReaderConnectionsMaxMin != nil && *plain.ReaderConnectionsMaxMin <= *hf.ReaderConnectionsMaxMin {
		t.Errorf("pgxpool's spread %s is no worse than holdfast's %s: the DNS cache did not bite", ratio(plain), ratio(hf))
	}
	if plain.FailedAtCrash == 0 {
		t.Errorf("pgxpool failed no read at the crash of %s, the reader with most of its connections", res.CrashedReader)
	}

	for _, want := range []string{"reader connections max/min", "new reader share", "resume after crash", "lagging reads",
		"per phase", "goals (holdfast):", "legend:"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	for _, want := range []string{"steady", "pgxpool  ok", "holdfast ok", "conns "} {
		if !strings.Contains(progress, want) {
			t.Errorf("no progress line with %q", want)
		}
	}
	checkJSON(t, res)
}

// checkJSON checks that the -json output has the shape a script reads:
// the clients array with the figures under their names.
func checkJSON(t *testing.T, res *Result) {
	t.Helper()
	var got struct {
		Clients []map[string]json.RawMessage `json:"clients"`
		Phases  []struct {
			Name    *string  `json:"name"`
			StartMS *float64 `json:"start_ms"`
			EndMS   *float64 `json:"end_ms"`
		} `json:"phases"`
		Samples []struct {
			AtMS  *float64                  `json:"at_ms"`
			Phase *string                   `json:"phase"`
			Conns map[string]map[string]int `json:"connections"`
		} `json:"samples"`
		Goals map[string]bool `json:"goals"`
	}
	b := harnesstest.DecodeJSON(t, res, &got)
	if len(got.Clients) != 2 || len(got.Phases) != 4 || len(got.Samples) == 0 || len(got.Goals) == 0 {
		t.Fatalf("JSON: %d clients, %d phases, %d samples, goals %v; want 2, 4, some, some: %s",
			len(got.Clients), len(got.Phases), len(got.Samples), got.Goals, b)
	}
	for i, c := range got.Clients {
		for _, k := range []string{"name", "requests", "failed", "reader_connections_max_min", "new_reader_share",
			"resume_after_crash_ms", "lagging_reads"} {
			if _, ok := c[k]; !ok {
				t.Errorf("JSON clients[%d] lacks %q", i, k)
			}
		}
		var name string
		if err := json.Unmarshal(c["name"], &name); err != nil || name != res.Clients[i].Name {
			t.Errorf("JSON clients[%d].name %s, want %q", i, c["name"], res.Clients[i].Name)
		}
		var n int
		for _, k := range []string{"requests", "failed", "lagging_reads"} {
			if err := json.Unmarshal(c[k], &n); err != nil {
				t.Errorf("JSON clients[%d].%s %s: not an integer: %v", i, k, c[k], err)
			}
		}
		var f *float64
		for _, k := range []string{"reader_connections_max_min", "new_reader_share", "resume_after_crash_ms"} {
			if err := json.Unmarshal(c[k], &f); err != nil {
				t.Errorf("JSON clients[%d].%s %s: not a number or null: %v", i, k, c[k], err)
			}
		}
	}
	if hf := got.Clients[1]; string(hf["reader_connections_max_min"]) == "null" {
		t.Errorf("JSON holdfast reader_connections_max_min is null (a reader without connections)")
	}
	for _, p := range got.Phases {
		if p.Name == nil || p.StartMS == nil || p.EndMS == nil {
			t.Errorf("JSON phase lacks name, start_ms or end_ms: %s", b)
		}
	}
	for _, s := range got.Samples {
		if s.AtMS == nil || s.Phase == nil || len(s.Conns) != 2 {
			t.Errorf("JSON sample lacks at_ms, phase or the two clients' connections: %s", b)
			break
		}
	}
}

func TestParseFlags(t *testing.T) {
	harnesstest.Flags(t, command, []string{"-readers", "0"}, []harnesstest.FlagCase[options]{
		{Name: "defaults", Args: nil, Check: func(o options) bool {
			return o.Readers == 3 && o.Pool == 12 && o.Workers == 4 && o.MaxLag == time.Second && o.Refresh == time.Second &&
				o.Lag == 3*time.Second && o.JoinWait == 10*time.Second && o.DNSTTL == failovertest.DefaultTTL && !o.JSON
		}},
		{Name: "everything", Args: []string{"-readers", "2", "-pool", "6", "-workers", "2", "-json", "-steady", "1s", "-join-wait", "3s",
			"-crash-for", "2s", "-lag", "5s", "-max-lag", "2s", "-lag-for", "1s", "-refresh", "500ms", "-dns-ttl", "0", "-seed", "7", "-v"},
			Check: func(o options) bool {
				return o.Readers == 2 && o.Pool == 6 && o.Workers == 2 && o.JSON && o.Verbose && o.Steady == time.Second &&
					o.JoinWait == 3*time.Second && o.CrashFor == 2*time.Second && o.Lag == 5*time.Second && o.MaxLag == 2*time.Second &&
					o.LagFor == time.Second && o.Refresh == 500*time.Millisecond && o.DNSTTL == 0 && o.Seed == 7
			}},
		{Name: "one reader", Args: []string{"-readers", "1"}, WantErr: true},
		{Name: "too many readers", Args: []string{"-readers", "8"}, WantErr: true},
		{Name: "pool too small", Args: []string{"-pool", "3"}, WantErr: true},
		{Name: "no workers", Args: []string{"-workers", "0"}, WantErr: true},
		{Name: "lag below max-lag", Args: []string{"-lag", "1s", "-max-lag", "2s"}, WantErr: true},
		{Name: "no refresh", Args: []string{"-refresh", "0"}, WantErr: true},
		{Name: "negative steady", Args: []string{"-steady", "-1s"}, WantErr: true},
		{Name: "unknown flag", Args: []string{"-nope"}, WantErr: true},
		{Name: "argument", Args: []string{"extra"}, WantErr: true},
	})
}
