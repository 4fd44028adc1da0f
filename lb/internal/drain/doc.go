// Package drain waits, with proof, until work in progress has gone: it
// polls a counter every interval until it reads zero, within a bound, and
// when the bound passes it says what was still in use.
//
// It is the lb module's copy of the root module's internal/drain, the
// algorithm holdfast's readiness package drains with, so that a load
// balancer member drains exactly like a service does, while the lb module
// builds without the root module (go install of holdfast-lb resolves lb
// alone). sync_test.go fails when the two copies differ in anything but
// the comments saying where they live.
package drain
