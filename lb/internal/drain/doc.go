// Package drain waits, with proof, until work in progress has gone: it
// polls a counter every interval until it reads zero, within a bound, and
// when the bound passes it says what was still in use.
//
// It is the lb module's copy of the root module's internal/drain, the
// algorithm holdfast's readiness package drains with, so that a load
// balancer member drains exactly like a service does. See drain.go for how
// the copies are kept equal.
package drain
