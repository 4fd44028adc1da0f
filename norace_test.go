//go:build !race

package holdfast_test

const raceEnabled = false
