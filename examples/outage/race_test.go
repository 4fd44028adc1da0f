//go:build race

package main

// raceEnabled: the race detector slows holdfast's prober and the workload
// several times over; the resume goals are then checked with a looser
// bound (speedBounds).
const raceEnabled = true
