package timeline

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"
)

// DefaultBucket is the width of a bar: the requests that finished in each
// 100 ms.
const DefaultBucket = 100 * time.Millisecond

// DefaultWidth is the document's width in px.
const DefaultWidth = 1000

// Request is one request of a client: when it finished, from the start of
// the run, and whether it succeeded.
type Request struct {
	End time.Duration
	OK  bool
}

// Span is a time of the run, from the start of the run, and its label.
type Span struct {
	From, To time.Duration
	Label    string
}

// Series is one client's requests and its longest pause.
type Series struct {
	Name     string
	Requests []Request
	// Pause is the client's longest pause, bracketed in its lane; nil for
	// none. An empty label reads "longest pause N ms".
	Pause *Span
}

// Band is a phase of the run, shaded across the lanes and labelled above
// them.
type Band struct {
	Label    string
	From, To time.Duration
	// Color is the fill (an SVG colour); "" picks the next of a set of
	// light colours.
	Color string
}

// Mark is an event of the run: a dashed line across the lanes, labelled
// above them.
type Mark struct {
	Label string
	At    time.Duration
}

// Chart is a run to draw.
type Chart struct {
	Title    string
	Subtitle string
	// Length is the time the x axis spans from 0; 0 means up to the last
	// request, band or mark.
	Length time.Duration
	// Bucket is the width of a bar; 0 means DefaultBucket.
	Bucket time.Duration
	// Width is the document's width in px; 0 means DefaultWidth.
	Width  int
	Series []Series
	Bands  []Band
	Marks  []Mark
	// Notes are lines of text under the axis.
	Notes []string
}

// Buckets counts the requests that finished in each bucket of the given
// width from 0 to length: ok and failed apart. A request that finished
// before 0 or after length is left out; one that finished at length is in
// the last bucket.
func Buckets(reqs []Request, bucket, length time.Duration) (ok, failed []int) {
	if bucket <= 0 {
		bucket = DefaultBucket
	}
	n := max(int((length+bucket-1)/bucket), 1)
	ok, failed = make([]int, n), make([]int, n)
	for _, r := range reqs {
		if r.End < 0 || r.End > length {
			continue
		}
		i := min(int(r.End/bucket), n-1)
		if r.OK {
			ok[i]++
		} else {
			failed[i]++
		}
	}
	return ok, failed
}

// ID is the id of the group that holds the series of the client name:
// "client-" and the name in lower case, every run of other characters than
// letters and digits replaced by one '-'.
func ID(name string) string { return "client-" + slug(name) }

func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.TrimSuffix(b.String(), "-")
}

// Colours: the clients', the failed requests', the bands'.
var (
	clientColors = []string{"#3b6fb6", "#2a9d5c", "#8e5bb5", "#c7821a", "#4a4a4a"}
	failedColor  = "#d62728"
	bandColors   = []string{"#fdf1c7", "#f9d5d3", "#d6e6f7", "#d7f0dc", "#ece0f4", "#e8e8e8"}
)

// Layout, in px.
const (
	left       = 120 // the lane names and scales
	right      = 24
	rowH       = 15 // a row of band or mark labels
	laneHead   = 20 // the pause bracket and its label
	upH        = 70 // the ok bars at the largest count
	minDownH   = 16 // the failed bars, at least, when any failed
	laneGap    = 14
	charW      = 6.3 // an 11 px character, about
	fontFamily = "DejaVu Sans, Helvetica, Arial, sans-serif"
)

// WriteSVG writes the chart as an SVG document.
func (c Chart) WriteSVG(w io.Writer) error {
	var b bytes.Buffer
	c.draw(&b)
	_, err := w.Write(b.Bytes())
	return err
}

func (c Chart) draw(b *bytes.Buffer) {
	width := c.Width
	if width <= 0 {
		width = DefaultWidth
	}
	bucket := c.Bucket
	if bucket <= 0 {
		bucket = DefaultBucket
	}
	length := c.Length
	if length <= 0 {
		for _, s := range c.Series {
			for _, r := range s.Requests {
				length = max(length, r.End)
			}
		}
		for _, bd := range c.Bands {
			length = max(length, bd.To)
		}
		for _, m := range c.Marks {
			length = max(length, m.At)
		}
	}
	length = max(length, bucket)
	plotW := float64(width - left - right)
	x := func(d time.Duration) float64 {
		d = min(max(d, 0), length)
		return left + plotW*float64(d)/float64(length)
	}

	// The counts, and the scale: one for every lane, ok and failed alike.
	type counts struct{ ok, failed []int }
	all := make([]counts, len(c.Series))
	top, topFailed := 1, 0
	for i, s := range c.Series {
		ok, failed := Buckets(s.Requests, bucket, length)
		all[i] = counts{ok, failed}
		for j := range ok {
			top = max(top, ok[j], failed[j])
			topFailed = max(topFailed, failed[j])
		}
	}
	perReq := float64(upH) / float64(top)
	downH := 0.0
	if topFailed > 0 {
		downH = max(float64(minDownH), perReq*float64(topFailed))
	}

	// The label rows above the plot: the bands' first, then the marks'.
	y := 22.0
	var head bytes.Buffer
	fmt.Fprintf(&head, `<text x="%d" y="%.0f" font-size="16" font-weight="bold">%s</text>`+"\n", 12, y, esc(c.Title))
	if c.Subtitle != "" {
		y += 18
		fmt.Fprintf(&head, `<text x="%d" y="%.0f" font-size="12" fill="#444">%s</text>`+"\n", 12, y, esc(c.Subtitle))
	}
	y += 22
	c.legend(&head, y)
	y += 14

	type label struct {
		text   string
		x      float64 // anchor
		middle bool
		row    int
	}
	place := func(labels []label, minX, maxX float64) (int, []label) {
		var ends []float64 // per row: the right end of its last label
		for i := range labels {
			l := &labels[i]
			wd := charW * float64(len([]rune(l.text)))
			from := l.x
			if l.middle {
				from = l.x - wd/2
			}
			from = min(max(from, minX), maxX-wd)
			if l.middle {
				l.x = from + wd/2
			} else {
				l.x = from
			}
			r := 0
			for r < len(ends) && ends[r]+6 > from {
				r++
			}
			if r == len(ends) {
				ends = append(ends, 0)
			}
			ends[r] = from + wd
			l.row = r
		}
		return len(ends), labels
	}
	var bandLabels, markLabels []label
	for _, bd := range c.Bands {
		bandLabels = append(bandLabels, label{text: bd.Label, x: (x(bd.From) + x(bd.To)) / 2, middle: true})
	}
	for _, m := range c.Marks {
		markLabels = append(markLabels, label{text: m.Label, x: x(m.At) + 3})
	}
	bandRows, bandLabels := place(bandLabels, 2, float64(width)-2)
	markRows, markLabels := place(markLabels, left, float64(width)-2)
	labelTop := y
	plotTop := labelTop + float64(bandRows+markRows)*rowH + 6

	// The lanes.
	laneH := laneHead + upH + downH + laneGap
	plotBottom := plotTop + float64(len(c.Series))*laneH
	if len(c.Series) == 0 {
		plotBottom = plotTop + upH
	}

	height := plotBottom + 44 + 15*float64(len(c.Notes)) + 8
	fmt.Fprintf(b, `<?xml version="1.0" encoding="UTF-8"?>`+"\n")
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="%d" height="%.0f" viewBox="0 0 %d %.0f" font-family="%s" font-size="11">`+"\n",
		width, height, width, height, fontFamily)
	fmt.Fprintf(b, "<title>%s</title>\n", esc(c.Title))
	fmt.Fprintf(b, `<rect x="0" y="0" width="%d" height="%.0f" fill="#ffffff"/>`+"\n", width, height)
	b.Write(head.Bytes())

	// Bands, behind everything, and their labels.
	b.WriteString(`<g id="bands">` + "\n")
	for i, bd := range c.Bands {
		color := bd.Color
		if color == "" {
			color = bandColors[i%len(bandColors)]
		}
		x0, x1 := x(bd.From), x(bd.To)
		fmt.Fprintf(b, `<rect class="band" data-label="%s" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n",
			esc(bd.Label), x0, plotTop, max(x1-x0, 0.5), plotBottom-plotTop, color)
		ly := labelTop + float64(bandLabels[i].row+1)*rowH - 3
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%d" fill="%s"/>`+"\n", x0, ly-11, max(x1-x0, 0.5), 14, color)
	}
	for _, l := range bandLabels { // over every band's colour
		ly := labelTop + float64(l.row+1)*rowH - 3
		fmt.Fprintf(b, `<text class="band-label" x="%.1f" y="%.1f" text-anchor="middle" font-weight="bold" fill="#333">%s</text>`+"\n", l.x, ly, esc(l.text))
	}
	b.WriteString("</g>\n")

	// The grid and the x axis.
	step := tickStep(length)
	b.WriteString(`<g id="axis" fill="#333">` + "\n")
	for t := time.Duration(0); t <= length; t += step {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#000" stroke-opacity="0.08"/>`+"\n", x(t), plotTop, x(t), plotBottom)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`+"\n", x(t), plotBottom, x(t), plotBottom+5)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x(t), plotBottom+17, seconds(t))
	}
	fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`+"\n", left, plotBottom, x(length), plotBottom)
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">seconds since the workload started; each bar: the requests that finished in %s</text>`+"\n",
		left+plotW/2, plotBottom+33, durationText(bucket))
	b.WriteString("</g>\n")

	// The marks.
	b.WriteString(`<g id="marks">` + "\n")
	for i, m := range c.Marks {
		l := markLabels[i]
		ly := labelTop + float64(bandRows+l.row+1)*rowH - 3
		fmt.Fprintf(b, `<line class="mark" data-label="%s" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#555" stroke-dasharray="4 3"/>`+"\n",
			esc(m.Label), x(m.At), ly+3, x(m.At), plotBottom)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="#333" font-style="italic">%s</text>`+"\n", l.x, ly, esc(l.text))
	}
	b.WriteString("</g>\n")

	// The series.
	barW := plotW * float64(bucket) / float64(length)
	for i, s := range c.Series {
		color := clientColors[i%len(clientColors)]
		laneTop := plotTop + float64(i)*laneH
		base := laneTop + laneHead + upH
		fmt.Fprintf(b, `<g id="%s" class="client" data-name="%s">`+"\n", ID(s.Name), esc(s.Name))
		fmt.Fprintf(b, `<text x="8" y="%.1f" font-size="13" font-weight="bold" fill="%s">%s</text>`+"\n", base-upH/2, color, esc(s.Name))
		nok, nfailed := 0, 0
		for j := range all[i].ok {
			nok += all[i].ok[j]
			nfailed += all[i].failed[j]
		}
		fmt.Fprintf(b, `<text x="8" y="%.1f" fill="#555">%d ok</text>`+"\n", base-upH/2+15, nok)
		fmt.Fprintf(b, `<text x="8" y="%.1f" fill="%s">%d failed</text>`+"\n", base-upH/2+29, failedColor, nfailed)
		// The scale: the largest count above, the largest failed below.
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end" font-size="9" fill="#777">%d</text>`+"\n", left-4, base-upH+8, top)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end" font-size="9" fill="#777">0</text>`+"\n", left-4, base+3)
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#999"/>`+"\n", left, base-upH, left, base+downH)
		fmt.Fprintf(b, `<path class="ok" d="%s" fill="%s" stroke="none"/>`+"\n",
			stepPath(all[i].ok, left, barW, base, -perReq), color)
		if nfailed > 0 {
			fmt.Fprintf(b, `<path class="failed" d="%s" fill="%s" stroke="none"/>`+"\n",
				stepPath(all[i].failed, left, barW, base, perReq), failedColor)
		} else if downH > 0 {
			fmt.Fprintf(b, `<text x="%d" y="%.1f" fill="#555" font-style="italic">no failed request</text>`+"\n", left+6, base+min(downH, 24)-4)
		}
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#222"/>`+"\n", left, base, x(length), base)
		if p := s.Pause; p != nil {
			c.pause(b, *p, x, laneTop, base, downH, float64(width))
		}
		b.WriteString("</g>\n")
	}

	// The notes.
	ny := plotBottom + 50
	for _, n := range c.Notes {
		fmt.Fprintf(b, `<text x="12" y="%.1f" fill="#444">%s</text>`+"\n", ny, esc(n))
		ny += 15
	}
	b.WriteString("</svg>\n")
}

// legend writes the legend's row at y: the clients' colours, the failed
// requests', the pause bracket.
func (c Chart) legend(b *bytes.Buffer, y float64) {
	lx := 12.0
	item := func(swatch, text string) {
		b.WriteString(swatch)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", lx+18, y, esc(text))
		lx += 18 + charW*float64(len([]rune(text))) + 18
	}
	b.WriteString(`<g id="legend">` + "\n")
	for i, s := range c.Series {
		item(fmt.Sprintf(`<rect x="%.1f" y="%.1f" width="12" height="12" fill="%s"/>`+"\n", lx, y-10, clientColors[i%len(clientColors)]),
			s.Name)
	}
	item(fmt.Sprintf(`<rect x="%.1f" y="%.1f" width="12" height="12" fill="%s"/>`+"\n", lx, y-10, failedColor),
		"failed requests (below a client's line; ok above it, in its colour)")
	item(fmt.Sprintf(`<path d="M%.1f %.1fv8M%.1f %.1fh12M%.1f %.1fv8" stroke="#111" stroke-width="2" fill="none"/>`+"\n",
		lx, y-8, lx, y-4, lx+12, y-8), "longest pause")
	b.WriteString("</g>\n")
}

// pause brackets p in the lane whose line is at base.
func (c Chart) pause(b *bytes.Buffer, p Span, x func(time.Duration) float64, laneTop, base, downH, width float64) {
	label := p.Label
	if label == "" {
		label = fmt.Sprintf("longest pause %d ms", (p.To - p.From).Milliseconds())
	}
	x0, x1 := x(p.From), x(p.To)
	x1 = max(x1, x0+1)
	by := laneTop + 14
	fmt.Fprintf(b, `<g class="pause" data-ms="%d">`+"\n", (p.To - p.From).Milliseconds())
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#000" fill-opacity="0.07"/>`+"\n", x0, by, x1-x0, base+downH-by)
	fmt.Fprintf(b, `<path d="M%.1f %.1fv-8M%.1f %.1fH%.1fM%.1f %.1fv-8" stroke="#111" stroke-width="2" fill="none"/>`+"\n",
		x0, by+4, x0, by, x1, x1, by+4)
	wd := charW * float64(len([]rune(label)))
	lx, anchor := x1+5, "start"
	if lx+wd > width-2 {
		lx, anchor = x0-5, "end"
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="%s" font-weight="bold" fill="#111">%s</text>`+"\n", lx, by+3, anchor, esc(label))
	b.WriteString("</g>\n")
}

// stepPath is the outline of the bars vals from the line at base, each
// count dy px (negative: up).
func stepPath(vals []int, x0, barW, base, dy float64) string {
	var p strings.Builder
	fmt.Fprintf(&p, "M%.1f %.1f", x0, base)
	prev := math.NaN()
	for i, v := range vals {
		y := base + dy*float64(v)
		if y != prev {
			fmt.Fprintf(&p, "V%.1f", y)
			prev = y
		}
		if i == len(vals)-1 || vals[i+1] != v {
			fmt.Fprintf(&p, "H%.1f", x0+barW*float64(i+1))
		}
	}
	fmt.Fprintf(&p, "V%.1fZ", base)
	return p.String()
}

// tickStep is the step of the axis's ticks: 1, 2, 5, 10, 20, 30 or 60 s,
// for at most about 25 ticks; under 2 s, 100 ms.
func tickStep(length time.Duration) time.Duration {
	if length < 2*time.Second {
		return 100 * time.Millisecond
	}
	for _, s := range []time.Duration{1, 2, 5, 10, 20, 30} {
		if length/(s*time.Second) <= 25 {
			return s * time.Second
		}
	}
	return time.Minute
}

// seconds is a tick's label.
func seconds(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%d s", d/time.Second)
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// durationText is "100 ms", "1 s".
func durationText(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%d s", d/time.Second)
	}
	return fmt.Sprintf("%d ms", d.Milliseconds())
}

// esc escapes s for XML text and attributes.
func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // a strings.Builder does not fail
	return b.String()
}

// Contents is what a document of WriteSVG holds, as Read finds it.
type Contents struct {
	// Clients are the series' names (data-name), in order, and IDs their
	// groups' ids.
	Clients, IDs []string
	// Bands and Marks are the labels of the phases and events.
	Bands, Marks []string
	// Pauses are the clients' longest pauses in ms, by client name.
	Pauses map[string]int64
	// OK and Failed count the bar outlines of each client, by name.
	OK, Failed map[string]int
}

// Read decodes a whole SVG document with encoding/xml, which fails on one
// that is not well-formed, and returns what it holds.
func Read(r io.Reader) (Contents, error) {
	c := Contents{Pauses: map[string]int64{}, OK: map[string]int{}, Failed: map[string]int{}}
	d := xml.NewDecoder(r)
	var client string // the client group the decoder is in
	depth, clientDepth := 0, -1
	root := false
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return c, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			depth++
			if depth == 1 {
				if t.Name.Local != "svg" || t.Name.Space != "http://www.w3.org/2000/svg" {
					return c, fmt.Errorf("root element %s %s, want svg in the SVG namespace", t.Name.Space, t.Name.Local)
				}
				root = true
			}
			a := func(name string) string {
				for _, at := range t.Attr {
					if at.Name.Local == name {
						return at.Value
					}
				}
				return ""
			}
			switch class := a("class"); {
			case t.Name.Local == "g" && class == "client":
				client, clientDepth = a("data-name"), depth
				c.Clients = append(c.Clients, client)
				c.IDs = append(c.IDs, a("id"))
			case t.Name.Local == "rect" && class == "band":
				c.Bands = append(c.Bands, a("data-label"))
			case t.Name.Local == "line" && class == "mark":
				c.Marks = append(c.Marks, a("data-label"))
			case t.Name.Local == "g" && class == "pause" && clientDepth >= 0:
				var ms int64
				if _, err := fmt.Sscan(a("data-ms"), &ms); err != nil {
					return c, fmt.Errorf("pause of %s: data-ms %q: %v", client, a("data-ms"), err)
				}
				c.Pauses[client] = ms
			case t.Name.Local == "path" && class == "ok" && clientDepth >= 0:
				c.OK[client]++
			case t.Name.Local == "path" && class == "failed" && clientDepth >= 0:
				c.Failed[client]++
			}
		case xml.EndElement:
			if depth == clientDepth {
				client, clientDepth = "", -1
			}
			depth--
		}
	}
	if !root {
		return c, errors.New("no svg element")
	}
	return c, nil
}

// WriteFile writes c's SVG into the file path.
func (c Chart) WriteFile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := c.WriteSVG(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ReadFile is Read of the file path.
func ReadFile(path string) (Contents, error) {
	f, err := os.Open(path)
	if err != nil {
		return Contents{}, err
	}
	defer f.Close()
	return Read(f)
}

// Figures are what a demo's table says of one client, for
// [Contents.CheckClients].
type Figures struct {
	Name       string
	Failed     int     // failed requests
	MaxPauseMS float64 // the longest pause, in ms
}

// CheckClients returns what c gets wrong about clients, in order, one
// sentence each (none: the picture holds them all): one ok series per
// client, a failed series exactly for a client with failed requests, its
// longest pause marked with the table's ms (within 1 ms), the clients in
// the table's order, and a group with id wantID.
func (c Contents) CheckClients(clients []Figures, wantID string) []string {
	var problems, names []string
	for _, f := range clients {
		names = append(names, f.Name)
		if c.OK[f.Name] != 1 {
			problems = append(problems, fmt.Sprintf("%s has %d ok series, want 1", f.Name, c.OK[f.Name]))
		}
		if (c.Failed[f.Name] == 1) != (f.Failed > 0) {
			problems = append(problems, fmt.Sprintf("%s has %d failed series, with %d failed requests", f.Name, c.Failed[f.Name], f.Failed))
		}
		if p, ok := c.Pauses[f.Name]; !ok || math.Abs(float64(p)-f.MaxPauseMS) > 1 {
			problems = append(problems, fmt.Sprintf("%s's pause %d ms (marked %v), want its longest pause %.0f ms", f.Name, p, ok, f.MaxPauseMS))
		}
	}
	if !slices.Equal(c.Clients, names) || !slices.Contains(c.IDs, wantID) {
		problems = append(problems, fmt.Sprintf("clients %v (ids %v), want %v", c.Clients, c.IDs, names))
	}
	return problems
}
