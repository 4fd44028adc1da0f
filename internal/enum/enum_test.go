package enum

import "testing"

type color int

const (
	red color = iota + 1
	green
)

var colorNames = [...]string{red: "red", green: "green"}

func TestName(t *testing.T) {
	for v, want := range map[color]string{
		red:   "red",
		green: "green",
		0:     "color(0)", // no name: the enum starts at 1
		3:     "color(3)",
		-1:    "color(-1)",
	} {
		if got := Name("color", v, colorNames[:]); got != want {
			t.Errorf("Name(%d) = %q, want %q", int(v), got, want)
		}
	}
}
