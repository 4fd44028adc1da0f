package storm

import (
	"fmt"
	"image"
	"image/color"
	"math"
	"strings"
	"time"
)

// Plot draws the load of runs over time, as a PNG-ready image: a row per
// dependency, the whole run on the left and the seconds around the
// dependency's return on the right, a line per strategy. The load is the
// attempts per second reaching the failing dependency (in Bin steps), as a
// multiple of the steady state, on a log scale; the outage is shaded.
func Plot(rs []*Result) *image.Paletted {
	var deps []Dependency
	var names []string
	for _, r := range rs {
		if !contains(deps, r.Config.Dependency) {
			deps = append(deps, r.Config.Dependency)
		}
		if !contains(names, r.Config.Strategy.Name) {
			names = append(names, r.Config.Strategy.Name)
		}
	}
	const (
		width, left, gap, right = 1640, 84, 96, 24
		zoomW                   = 420 // the right-hand plots
		legendH, panelH         = 96, 372
		legendRow               = 26 // a further row of the legend
		plotTop, plotH          = 34, 290
	)
	// The legend: a swatch and a name per strategy, in rows as wide as
	// the image, then what the axes are.
	type entry struct{ x, row int }
	entries := make([]entry, len(names))
	x, row := left, 0
	for i, n := range names {
		w := 46 + textWidth(n, 2)
		if x > left && x+w > width-right {
			x, row = left, row+1
		}
		entries[i] = entry{x, row}
		x += w + 40
	}
	extra := row * legendRow
	img := image.NewPaletted(image.Rect(0, 0, width, legendH+extra+panelH*len(deps)), palette)
	fill(img, img.Rect, cWhite)
	for i, n := range names {
		c, e := lineColor(i), entries[i]
		y := e.row * legendRow
		fill(img, image.Rect(e.x, 18+y, e.x+36, 22+y), c)
		text(img, e.x+46, 13+y, n, 2, c)
	}
	text(img, left, 44+extra, "attempts per second reaching the failing dependency, × steady state (log scale, 100 ms bins)", 2, cText)
	text(img, left, 70+extra, "shaded: the outage. time in seconds of virtual time.", 2, cText)

	for pi, d := range deps {
		var c Config
		var runs []*Result
		for _, r := range rs {
			if r.Config.Dependency == d {
				c = r.Config
				runs = append(runs, r)
			}
		}
		top := legendH + extra + pi*panelH + plotTop
		t1 := c.OutageStart + c.Outage
		full := image.Rect(left, top, width-right-zoomW-gap, top+plotH)
		zoom := image.Rect(width-right-zoomW, top, width-right, top+plotH)
		text(img, full.Min.X, top-26, fmt.Sprintf("%s down from %.0f s to %.0f s, %d pods", d,
			c.OutageStart.Seconds(), t1.Seconds(), c.Pods), 2, cBlack)
		text(img, zoom.Min.X, top-26, fmt.Sprintf("around its return at %.0f s", t1.Seconds()), 2, cBlack)
		panel(img, full, runs, names, 0, t1+c.After, 10*time.Second)
		panel(img, zoom, runs, names, t1-time.Second, t1+5*time.Second, time.Second)
	}
	return img
}

// panel draws the runs' load from one time to another in plot.
func panel(img *image.Paletted, plot image.Rectangle, runs []*Result, names []string, from, to, tick time.Duration) {
	const lo, hi = 0.5, 500.0 // the y range, ×steady
	c := runs[0].Config
	xOf := func(t time.Duration) int {
		return plot.Min.X + int(float64(t-from)/float64(to-from)*float64(plot.Dx()-1))
	}
	yOf := func(v float64) int {
		v = math.Max(lo, math.Min(hi, v))
		f := (math.Log10(v) - math.Log10(lo)) / (math.Log10(hi) - math.Log10(lo))
		return plot.Max.Y - 1 - int(f*float64(plot.Dy()-1))
	}
	fill(img, image.Rect(max(xOf(c.OutageStart), plot.Min.X), plot.Min.Y, min(xOf(c.OutageStart+c.Outage), plot.Max.X), plot.Max.Y), cShade)
	for _, v := range []float64{1, 10, 100} {
		y := yOf(v)
		fill(img, image.Rect(plot.Min.X, y, plot.Max.X, y+1), cGrid)
		label := fmt.Sprintf("%g×", v)
		text(img, plot.Min.X-10-textWidth(label, 2), y-7, label, 2, cText)
	}
	for t := from; t <= to; t += tick {
		x := xOf(t)
		fill(img, image.Rect(x, plot.Max.Y, x+1, plot.Max.Y+6), cBlack)
		label := fmt.Sprintf("%.0f", t.Seconds())
		text(img, x-textWidth(label, 2)/2, plot.Max.Y+10, label, 2, cText)
	}
	for i, n := range names {
		for _, r := range runs {
			if r.Config.Strategy.Name != n {
				continue
			}
			bin := r.Config.Bin
			perSecond := float64(time.Second / bin)
			px, py := -1, -1
			for b := int(from / bin); b < len(r.First) && time.Duration(b+1)*bin <= to; b++ {
				x, y := xOf(time.Duration(b)*bin+bin/2), yOf(float64(r.Load(b))*perSecond/r.Steady)
				if px >= 0 {
					line(img, px, py, x, y, lineColor(i))
				}
				px, py = x, y
			}
		}
	}
	box(img, plot, cBlack)
}

func contains[T comparable](s []T, v T) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// The palette: a few colours keep the PNG small.
const (
	cWhite uint8 = iota
	cBlack
	cText
	cGrid
	cShade
	cLine0 // one per strategy, in order
)

var palette = color.Palette{
	color.RGBA{255, 255, 255, 255},
	color.RGBA{0, 0, 0, 255},
	color.RGBA{60, 60, 60, 255},
	color.RGBA{200, 200, 200, 255},
	color.RGBA{236, 236, 236, 255},
	color.RGBA{120, 120, 120, 255}, // no retry: grey
	color.RGBA{214, 39, 40, 255},   // naive: red
	color.RGBA{255, 127, 14, 255},  // backoff only: orange
	color.RGBA{31, 119, 180, 255},  // plain budget (old defaults): blue
	color.RGBA{44, 160, 44, 255},   // holdfast, demand budget: green
	color.RGBA{148, 103, 189, 255}, // holdfast defaults (a budget relative to demand, the hold, admission): purple
	color.RGBA{23, 190, 207, 255},  // holdfast defaults without the hold: teal
}

func lineColor(i int) uint8 { return cLine0 + uint8(i%(len(palette)-int(cLine0))) }

func fill(img *image.Paletted, r image.Rectangle, c uint8) {
	r = r.Intersect(img.Rect)
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			img.SetColorIndex(x, y, c)
		}
	}
}

func box(img *image.Paletted, r image.Rectangle, c uint8) {
	fill(img, image.Rect(r.Min.X, r.Min.Y, r.Max.X, r.Min.Y+1), c)
	fill(img, image.Rect(r.Min.X, r.Max.Y-1, r.Max.X, r.Max.Y), c)
	fill(img, image.Rect(r.Min.X, r.Min.Y, r.Min.X+1, r.Max.Y), c)
	fill(img, image.Rect(r.Max.X-1, r.Min.Y, r.Max.X, r.Max.Y), c)
}

// line draws a 2-pixel line from (x0, y0) to (x1, y1) (Bresenham).
func line(img *image.Paletted, x0, y0, x1, y1 int, c uint8) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := sign(x1-x0), sign(y1-y0)
	e := dx + dy
	for {
		fill(img, image.Rect(x0, y0, x0+2, y0+2), c)
		if x0 == x1 && y0 == y1 {
			return
		}
		e2 := 2 * e
		if e2 >= dy {
			e += dy
			x0 += sx
		}
		if e2 <= dx {
			e += dx
			y0 += sy
		}
	}
}

func abs(v int) int { return max(v, -v) }

func sign(v int) int {
	switch {
	case v > 0:
		return 1
	case v < 0:
		return -1
	}
	return 0
}

// text draws s, upper-cased, in a 5×7 pixel font magnified scale times,
// its top left corner at (x, y).
func text(img *image.Paletted, x, y int, s string, scale int, c uint8) {
	for _, r := range strings.ToUpper(s) {
		if g, ok := font[r]; ok {
			for row, bits := range g {
				for col := range 5 {
					if bits&(1<<(4-col)) != 0 {
						fill(img, image.Rect(x+col*scale, y+row*scale, x+(col+1)*scale, y+(row+1)*scale), c)
					}
				}
			}
		}
		x += 6 * scale
	}
}

func textWidth(s string, scale int) int { return len([]rune(s))*6*scale - scale }

// font is a 5×7 pixel font: seven rows of five bits, the high bit left.
// A rune it lacks is drawn as a space.
var font = map[rune][7]uint8{
	'A': {0x0e, 0x11, 0x11, 0x1f, 0x11, 0x11, 0x11},
	'B': {0x1e, 0x11, 0x11, 0x1e, 0x11, 0x11, 0x1e},
	'C': {0x0e, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0e},
	'D': {0x1e, 0x11, 0x11, 0x11, 0x11, 0x11, 0x1e},
	'E': {0x1f, 0x10, 0x10, 0x1e, 0x10, 0x10, 0x1f},
	'F': {0x1f, 0x10, 0x10, 0x1e, 0x10, 0x10, 0x10},
	'G': {0x0e, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0f},
	'H': {0x11, 0x11, 0x11, 0x1f, 0x11, 0x11, 0x11},
	'I': {0x0e, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0e},
	'J': {0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0c},
	'K': {0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11},
	'L': {0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1f},
	'M': {0x11, 0x1b, 0x15, 0x15, 0x11, 0x11, 0x11},
	'N': {0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11},
	'O': {0x0e, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0e},
	'P': {0x1e, 0x11, 0x11, 0x1e, 0x10, 0x10, 0x10},
	'Q': {0x0e, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0d},
	'R': {0x1e, 0x11, 0x11, 0x1e, 0x14, 0x12, 0x11},
	'S': {0x0f, 0x10, 0x10, 0x0e, 0x01, 0x01, 0x1e},
	'T': {0x1f, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04},
	'U': {0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0e},
	'V': {0x11, 0x11, 0x11, 0x11, 0x11, 0x0a, 0x04},
	'W': {0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0a},
	'X': {0x11, 0x11, 0x0a, 0x04, 0x0a, 0x11, 0x11},
	'Y': {0x11, 0x11, 0x0a, 0x04, 0x04, 0x04, 0x04},
	'Z': {0x1f, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1f},
	'0': {0x0e, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0e},
	'1': {0x04, 0x0c, 0x04, 0x04, 0x04, 0x04, 0x0e},
	'2': {0x0e, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1f},
	'3': {0x1f, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0e},
	'4': {0x02, 0x06, 0x0a, 0x12, 0x1f, 0x02, 0x02},
	'5': {0x1f, 0x10, 0x1e, 0x01, 0x01, 0x11, 0x0e},
	'6': {0x06, 0x08, 0x10, 0x1e, 0x11, 0x11, 0x0e},
	'7': {0x1f, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08},
	'8': {0x0e, 0x11, 0x11, 0x0e, 0x11, 0x11, 0x0e},
	'9': {0x0e, 0x11, 0x11, 0x0f, 0x01, 0x02, 0x0c},
	'.': {0x00, 0x00, 0x00, 0x00, 0x00, 0x0c, 0x0c},
	',': {0x00, 0x00, 0x00, 0x00, 0x0c, 0x04, 0x08},
	'-': {0x00, 0x00, 0x00, 0x1f, 0x00, 0x00, 0x00},
	'/': {0x00, 0x01, 0x02, 0x04, 0x08, 0x10, 0x00},
	'(': {0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02},
	')': {0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08},
	':': {0x00, 0x0c, 0x0c, 0x00, 0x0c, 0x0c, 0x00},
	'%': {0x18, 0x19, 0x02, 0x04, 0x08, 0x13, 0x03},
	'×': {0x00, 0x11, 0x0a, 0x04, 0x0a, 0x11, 0x00},
	'+': {0x00, 0x04, 0x04, 0x1f, 0x04, 0x04, 0x00},
	'=': {0x00, 0x00, 0x1f, 0x00, 0x1f, 0x00, 0x00},
}
