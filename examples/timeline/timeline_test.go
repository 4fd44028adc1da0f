package timeline_test

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/examples/timeline"
)

const ms = time.Millisecond

func TestBuckets(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		reqs           []timeline.Request
		bucket, length time.Duration
		ok, failed     []int
	}{
		{name: "none", bucket: 100 * ms, length: 300 * ms, ok: []int{0, 0, 0}, failed: []int{0, 0, 0}},
		{name: "ok and failed apart", bucket: 100 * ms, length: 300 * ms,
			reqs: []timeline.Request{{End: 0, OK: true}, {End: 99 * ms, OK: true}, {End: 100 * ms, OK: false}, {End: 250 * ms, OK: true}, {End: 299 * ms}},
			ok:   []int{2, 0, 1}, failed: []int{0, 1, 1}},
		{name: "at the end: the last bucket", bucket: 100 * ms, length: 300 * ms,
			reqs: []timeline.Request{{End: 300 * ms, OK: true}}, ok: []int{0, 0, 1}, failed: []int{0, 0, 0}},
		{name: "outside: left out", bucket: 100 * ms, length: 200 * ms,
			reqs: []timeline.Request{{End: -ms, OK: true}, {End: 201 * ms}, {End: 150 * ms}}, ok: []int{0, 0}, failed: []int{0, 1}},
		{name: "a partial last bucket", bucket: 100 * ms, length: 250 * ms,
			reqs: []timeline.Request{{End: 240 * ms, OK: true}}, ok: []int{0, 0, 1}, failed: []int{0, 0, 0}},
		{name: "default bucket", length: time.Second, reqs: []timeline.Request{{End: 950 * ms, OK: true}},
			ok: []int{0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, failed: make([]int, 10)},
		{name: "zero length: one bucket", bucket: 100 * ms, reqs: []timeline.Request{{End: 0}}, ok: []int{0}, failed: []int{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ok, failed := timeline.Buckets(tt.reqs, tt.bucket, tt.length)
			if !slices.Equal(ok, tt.ok) || !slices.Equal(failed, tt.failed) {
				t.Errorf("Buckets = %v, %v; want %v, %v", ok, failed, tt.ok, tt.failed)
			}
		})
	}
}

func TestID(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]string{
		"pgxpool": "client-pgxpool", "database/sql": "client-database-sql", "Hold Fast!": "client-hold-fast", "a<&>b": "client-a-b",
	} {
		if got := timeline.ID(name); got != want {
			t.Errorf("ID(%q) = %q, want %q", name, got, want)
		}
	}
}

// requests are n requests, one every 10 ms from 0, ok unless failed says
// otherwise.
func requests(n int, failed func(time.Duration) bool) []timeline.Request {
	var out []timeline.Request
	for i := range n {
		at := time.Duration(i) * 10 * ms
		out = append(out, timeline.Request{End: at, OK: failed == nil || !failed(at)})
	}
	return out
}

// TestWriteSVG draws charts and reads them back: a well-formed document
// (encoding/xml decodes it whole) with one group per client in order, its
// ok bars, its failed bars when any failed, its pause, and every band and
// mark.
func TestWriteSVG(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		chart timeline.Chart
		// failed: the clients that must have failed bars.
		failed []string
		text   []string // in the document
	}{
		{name: "empty", chart: timeline.Chart{Title: "nothing"}, text: []string{"nothing", "0 s"}},
		{name: "switchover", chart: timeline.Chart{
			Title: "switchover", Subtitle: "two clients",
			Series: []timeline.Series{
				{Name: "pgxpool", Requests: requests(500, func(d time.Duration) bool { return d > 3*time.Second }),
					Pause: &timeline.Span{From: 2 * time.Second, To: 2*time.Second + 940*ms}},
				{Name: "holdfast", Requests: requests(500, nil), Pause: &timeline.Span{From: 2 * time.Second, To: 4100 * ms, Label: "held 2100 ms"}},
			},
			Bands: []timeline.Band{{Label: "PREPARATION", From: time.Second, To: 2 * time.Second}, {Label: "IN_PROGRESS", From: 2 * time.Second, To: 4 * time.Second},
				{Label: "POST", From: 4 * time.Second, To: 5 * time.Second, Color: "#ddeeff"}},
			Marks: []timeline.Mark{{Label: "blue DNS → green", At: 4500 * ms}},
			Notes: []string{"a note"},
		}, failed: []string{"pgxpool"}, text: []string{"longest pause 940 ms", "held 2100 ms", "#ddeeff", "a note", "blue DNS → green", "5 s"}},
		{name: "names to escape, overlapping labels", chart: timeline.Chart{
			Title:  `a <b> & "c"`,
			Length: 30 * time.Second,
			Series: []timeline.Series{{Name: "database/sql", Requests: requests(10, func(time.Duration) bool { return true })},
				{Name: "x<&>y", Requests: requests(10, nil), Pause: &timeline.Span{From: 29 * time.Second, To: 30 * time.Second}}},
			Bands: []timeline.Band{{Label: "writer down", From: time.Second, To: 1100 * ms}, {Label: "new writer, DNS lags", From: 1100 * ms, To: 11 * time.Second}},
			Marks: []timeline.Mark{{Label: "holdfast: new writer", At: 1150 * ms}, {Label: "replica promoted", At: 1100 * ms}},
		}, failed: []string{"database/sql"}, text: []string{"a &lt;b&gt; &amp; &#34;c&#34;", "30 s", "x&lt;&amp;&gt;y"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var b bytes.Buffer
			if err := tt.chart.WriteSVG(&b); err != nil {
				t.Fatal(err)
			}
			got, err := timeline.Read(bytes.NewReader(b.Bytes()))
			if err != nil {
				t.Fatalf("Read: %v\n%s", err, b.String())
			}
			var names, ids, bands, marks []string
			for _, s := range tt.chart.Series {
				names, ids = append(names, s.Name), append(ids, timeline.ID(s.Name))
				if got.OK[s.Name] != 1 {
					t.Errorf("%s: %d ok outlines, want 1", s.Name, got.OK[s.Name])
				}
				if want := slices.Contains(tt.failed, s.Name); (got.Failed[s.Name] == 1) != want {
					t.Errorf("%s: %d failed outlines, want them: %v", s.Name, got.Failed[s.Name], want)
				}
				if p := s.Pause; p != nil && got.Pauses[s.Name] != (p.To-p.From).Milliseconds() {
					t.Errorf("%s: pause %d ms, want %d", s.Name, got.Pauses[s.Name], (p.To - p.From).Milliseconds())
				} else if p == nil && got.Pauses[s.Name] != 0 {
					t.Errorf("%s: a pause without one", s.Name)
				}
			}
			for _, bd := range tt.chart.Bands {
				bands = append(bands, bd.Label)
			}
			for _, m := range tt.chart.Marks {
				marks = append(marks, m.Label)
			}
			if !slices.Equal(got.Clients, names) || !slices.Equal(got.IDs, ids) || !slices.Equal(got.Bands, bands) || !slices.Equal(got.Marks, marks) {
				t.Errorf("Read = %+v; want clients %v (ids %v), bands %v, marks %v", got, names, ids, bands, marks)
			}
			for _, want := range tt.text {
				if !strings.Contains(b.String(), want) {
					t.Errorf("document lacks %q", want)
				}
			}
			if w := os.Getenv("TIMELINE_OUT"); w != "" { // to look at: TIMELINE_OUT=/tmp go test ./examples/timeline
				if err := os.WriteFile(fmt.Sprintf("%s/%s.svg", w, strings.ReplaceAll(tt.name, " ", "_")), b.Bytes(), 0o644); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

func TestReadRejects(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{
		``,
		`<svg xmlns="http://www.w3.org/2000/svg"><g>`,
		`<svg xmlns="http://www.w3.org/2000/svg"><text>a & b</text></svg>`,
		`<html></html>`,
		`<svg xmlns="http://www.w3.org/2000/svg"><g class="client" data-name="a"><g class="pause" data-ms="x"/></g></svg>`,
	} {
		if _, err := timeline.Read(strings.NewReader(doc)); err == nil {
			t.Errorf("Read(%q): no error", doc)
		}
	}
}

func ExampleBuckets() {
	reqs := []timeline.Request{
		{End: 20 * ms, OK: true},
		{End: 80 * ms, OK: true},
		{End: 130 * ms, OK: false},
		{End: 260 * ms, OK: true},
	}
	ok, failed := timeline.Buckets(reqs, 100*ms, 300*ms)
	fmt.Println("ok:    ", ok)
	fmt.Println("failed:", failed)
	// Output:
	// ok:     [2 0 1]
	// failed: [0 1 0]
}
