//go:build race

package main

// pauseSlack is what a holdfast pause may exceed the IN_PROGRESS window
// by in TestSwitchoverFailover: under the race detector, which slows the
// monitors' polls and the client several times over on a loaded machine,
// 600 ms (CI measured 164 ms over once); 150 ms without it.
const pauseSlack = 600
