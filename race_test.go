//go:build race

package holdfast_test

// raceEnabled: the race detector slows holdfast's connects several times
// over; the tests that hold a speed figure (a resume within 200 ms) check it
// with a looser bound under it (resumeBound), and the figure itself is
// measured without it (BENCHMARKS.md).
const raceEnabled = true
