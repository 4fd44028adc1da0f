//go:build race

package storm_test

// raceEnabled: the race detector slows the simulation about tenfold, so
// the full-fleet test runs a tenth of the fleet under it.
const raceEnabled = true
