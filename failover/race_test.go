//go:build race

package failover_test

// raceEnabled: the race detector slows holdfast's connects and the
// monitor's probes several times over; the tests that hold a speed figure
// (writes resume within 250 ms) check it with a looser bound under it, and
// the figure itself is measured without it.
const raceEnabled = true
