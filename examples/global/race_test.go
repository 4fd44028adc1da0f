//go:build race

package main

// raceEnabled: the race detector slows holdfast's monitor and the workload
// several times over; the resume goal is then checked with a looser bound
// (resumeBound).
const raceEnabled = true
