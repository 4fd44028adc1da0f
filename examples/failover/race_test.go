//go:build race

package main

// raceEnabled: the race detector slows holdfast's monitor and client several
// times over while plain pgxpool's pause, set by the DNS lag, stays the same;
// the speed goals are then checked with a looser bound (speedBounds).
const raceEnabled = true
