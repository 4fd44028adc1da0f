package harness

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestWorkload runs two clients without a database: one whose requests
// succeed, one whose every other request fails; the progress lines count
// them, Stop waits for the workers, and the figures and the table add up.
func TestWorkload(t *testing.T) {
	t.Parallel()
	ok := &Client{Name: "ok", Request: func(_ context.Context, _ int, r *Record) error { r.Server = "s1"; return nil }}
	n := 0
	flaky := &Client{Name: "flaky", Request: func(_ context.Context, worker int, r *Record) error {
		r.Server = "s2"
		if n++; worker == 0 && n%2 == 0 {
			return errors.New("boom")
		}
		return nil
	}}
	var progress bytes.Buffer
	w := Start([]*Client{ok, flaky}, Config{Workers: 1, Think: 5 * time.Millisecond, Timeout: time.Second,
		ErrorKey: func(err error) string { return "key/" + err.Error() }})
	w.Progress(SyncWriter(&progress), func(b *strings.Builder, counts []Count) { WriteCounts(b, counts) })
	time.Sleep(1100 * time.Millisecond)
	stopAt := w.Stop()
	if again := w.Stop(); !again.Equal(stopAt) {
		t.Errorf("Stop again: %v, want %v", again, stopAt)
	}
	if line := progress.String(); !strings.Contains(line, "| ok       ok ") || !strings.Contains(line, "| flaky    ok ") {
		t.Errorf("progress %q, want a line with both clients", line)
	}
	c := flaky.Count()
	if c.Requests == 0 || c.Failed == 0 || c.OK+c.Failed != c.Requests || c.Errors["key/boom"] != c.Failed {
		t.Errorf("flaky: %+v", c)
	}
	for _, r := range flaky.Records() {
		if (r.Err == "") != (r.Server == "s2") || r.End.Before(r.Start) || r.End.After(stopAt.Add(time.Second)) {
			t.Fatalf("record %+v", r)
		}
	}
	wr := ok.Writes(func(int64) bool { return true })
	if wr.Runner || wr.Acknowledged != wr.OK || wr.LostWrites != 0 {
		t.Errorf("ok as writes: %+v", wr)
	}

	var out bytes.Buffer
	tab := Table[Counts]{W: &out, LabelWidth: 10, ColumnWidth: 6, Clients: []Counts{ok.Count(), c}}
	tab.Counts("failed", map[string]string{})
	want := strings.Repeat(" ", 15) + "ok  flaky\nrequests  "
	if !strings.HasPrefix(out.String(), want) || !strings.Contains(out.String(), "\n  key/boo ") {
		t.Errorf("table:\n%s\nwant it to start %q and name the error key cut to 7 characters", out.String(), want)
	}
}

// TestWorkloadEvery runs an open-loop worker whose requests last longer
// than its pace: they overlap, and Stop waits for the last.
func TestWorkloadEvery(t *testing.T) {
	t.Parallel()
	slow := &Client{Name: "slow", Request: func(ctx context.Context, _ int, _ *Record) error {
		return Sleep(ctx, 100*time.Millisecond)
	}}
	w := Start([]*Client{slow}, Config{Workers: 1, Every: 20 * time.Millisecond, Timeout: time.Second,
		ErrorKey: func(err error) string { return err.Error() }})
	time.Sleep(300 * time.Millisecond)
	stopAt := w.Stop()
	recs := slow.Records()
	if c := slow.Count(); c.Requests < 8 || c.Failed != 0 {
		t.Fatalf("%+v: want a request every 20 ms for 300 ms, each 100 ms, none failed", c)
	}
	overlap := false
	for i := 1; i < len(recs); i++ {
		overlap = overlap || recs[i].Start.Before(recs[i-1].End)
	}
	if !overlap {
		t.Error("no two requests overlapped: the worker waited for each")
	}
	if last := recs[len(recs)-1]; last.End.Before(stopAt) {
		t.Errorf("the last request ended %v before Stop: Stop did not wait for it", stopAt.Sub(last.End))
	}
}
