// Package drain waits, with proof, until work in progress has gone: it
// polls a counter every interval until it reads zero, within a bound, and
// when the bound passes it says what was still in use.
//
// It is the procedure of taking a node out of service safely, shared by
// holdfast's readiness package (an HTTP service drains its pool and its
// in-flight requests) and by load-balancer drains (a node forced offline
// drains its current connections; the lb module, which cannot import this
// one, keeps an identical copy of drain.go in lb/internal/drain):
//
//  1. the caller stops sending new work (readiness answers 503, the load
//     balancer node goes forced-offline);
//  2. [Wait] polls a [Probe] at once and then every [Config.Interval]
//     (default 1 s) until the [Usage] it reports is zero;
//  3. past [Config.Timeout] (default 2 min) it gives up with a
//     [*TimeoutError] naming what was still in use, so that the caller can
//     abort the deploy instead of cutting live traffic.
//
// # Bounds
//
// The last poll happens exactly at the bound, so work that finishes just in
// time counts as drained. The caller's context bounds the wait too: when it
// ends, Wait returns a *TimeoutError whose Cause is context.Cause(ctx). A
// failing probe ends the wait at once with a [*ProbeError]: a drain that
// cannot see its counter cannot prove anything.
//
// # Concurrency
//
// Wait owns no goroutine: it polls on the caller's goroutine, which it
// returns to when it is done. It may be called concurrently; each call is
// independent.
package drain
