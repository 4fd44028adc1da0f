// Package readiness tells orchestrators and load balancers the truth about a
// service's database path, and takes the service out of traffic with proof
// that the traffic is gone.
//
// A [Checker] wraps a *pgxpool.Pool (built through a holdfast.Factory) and
// provides:
//
//   - a startup gate ([Checker.Start]): the first connection is made under
//     the factory's bounded startup retry; until it succeeds, readiness
//     fails with reason "starting" or "startup-failed" and the classified
//     cause;
//   - a readiness probe ([Checker.ReadyHandler], for /readyz) and a
//     liveness probe that never touches the database ([Checker.LiveHandler],
//     for /livez);
//   - a drain ([Checker.Drain], [Checker.DrainHandler] for /drain) with a
//     lock, and [Checker.Enable];
//   - an in-flight counter ([Checker.Middleware], [Checker.Begin]) that the
//     drain waits on, with the pool's acquired connections;
//   - [Checker.Serve], which on SIGTERM drains, shuts the HTTP server down
//     and closes the pool, so that a rolling deploy loses no request.
//
// # Startup success is not request success
//
// The first connection is retried a bounded number of times
// (holdfast.DefaultStartupPolicy). If it still fails, the service neither
// goes Ready with a dead database nor exits: readiness answers 503
// "startup-failed" with the classified cause (for example
// "transient/conn-refused" or "fatal/permission-denied"), probes keep
// checking the database at most once per CheckInterval, and the first
// success opens the gate. Once open, transient failures of new connections
// are absorbed by request-scope retry (holdfast.Factory.Acquire); a
// persistent failure shows in readiness after FailureThreshold consecutive
// failed checks, never as an endless loop.
//
// # The readiness check
//
// The database check acquires a connection from the pool (never a
// connection of its own, so it sees pool exhaustion) and runs one query,
// within CheckTimeout. Its result is cached for CheckInterval, and
// concurrent probes share one running check, so a fleet of probers cannot
// stampede the database. A probe waits for a running check at most
// ProbeTimeout, then answers from the last known result. Readiness answers:
//
//	status  HTTP  when
//	pass    200   the gate is open and the last check succeeded
//	warn    200   1 to FailureThreshold-1 consecutive failed checks, or every pool connection acquired
//	fail    503   starting, startup-failed, FailureThreshold failed checks, draining, or closed
//
// The body is plain text, or with ?verbose or "Accept: application/health+json"
// a JSON body in the application/health+json shape (see
// [Checker.ReadyHandler]) with the classified reason of each failed check,
// the time of the last success, pool occupancy and the drain state, owner
// and time. Error texts go to the log only.
//
// # Drain
//
// Flipping a health page between 200 and 503 is blind: it cannot see
// whether traffic has gone. [Checker.Drain] follows the safe L4 procedure
// instead, because the service can see its own work:
//
//  1. the state becomes Disabling and readiness answers 503 "draining" at
//     once (optionally, [Config].RefuseWhileDraining refuses new requests);
//  2. every DrainInterval (default 1s) the drain polls the pool's acquired
//     connections and the in-flight requests;
//  3. when both are zero the state becomes Disabled and Drain returns the
//     time it took; past DrainTimeout (default 2m) it returns a
//     [*DrainTimeoutError] naming what was still in use, and the service
//     stays Disabling so that the deploy can be aborted;
//  4. [Checker.Enable] puts the service back in service.
//
// The state, who asked for the drain (an owner string) and since when are
// in the probe's JSON. A drain by another owner while one is held is
// refused with a [*LockedError] naming the holder; the holder may drain
// again. Every drain, refusal and enable is logged with its owner.
//
// # Kubernetes
//
// Mount ReadyHandler as the readinessProbe and LiveHandler as the
// livenessProbe; keep ProbeTimeout (default 800ms) below the probe's
// timeoutSeconds (default 1). The checker already damps flapping with
// FailureThreshold, so the probe's own failureThreshold can stay low. Keep
// preStop sleep + ServeConfig.ShutdownDelay + ServeConfig.DrainTimeout +
// ServeConfig.ShutdownTimeout below terminationGracePeriodSeconds
// (default 30s); the Serve defaults (0 + 20s + 5s) fit.
//
// # Concurrency and lifetime
//
// A Checker is safe for concurrent use. Its only goroutine is the running
// database check; [Checker.Close] stops and joins it, interrupts waiting
// drains, and leaves the pool open. [Checker.Serve] owns and joins the
// goroutines it starts, and closes both the Checker and the pool.
package readiness
