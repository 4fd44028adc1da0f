// Package readiness tells orchestrators and load balancers the truth about a
// service's databases, and takes the service out of traffic with proof
// that the traffic is gone.
//
// A [Checker] is made by [New] over the service's databases, its targets:
// pgxpools built through a holdfast.Factory ([Pool]) and *sql.DBs of
// package sqldb ([DB]); a pgxpool and a *sql.DB over it (sqldb.OpenDB)
// are one database, one target. It provides a startup gate
// ([Checker.Start]), a readiness probe that checks every target
// ([Checker.ReadyHandler], for
// /readyz), a liveness probe that never touches a database
// ([Checker.LiveHandler], for /livez), a drain with a lock
// ([Checker.Drain], [Checker.DrainHandler]) that waits for the connections
// acquired from every target's pool and the requests counted by
// [Checker.Middleware], the details of every target for operators
// ([Checker.AdminHandler]), and [Checker.Serve], which on SIGTERM drains,
// keeps serving while load balancers learn it is leaving, shuts the HTTP
// servers down and closes the targets. The probes go on the service's
// port; the drain and the details on an admin listener of their own, on
// loopback. The package's service example wires a service so, and
// [Checker.Serve]'s example shuts one down as on SIGTERM; both run in the
// package's tests.
//
// The admin handlers fail closed: they answer local callers only
// ([Checker.DrainHandler] gives the rule), or those [Config].Authorize
// admits, the owner of a drain being the one it names.
//
// Readiness answers pass (200) when every gate is open and the last check
// of every target succeeded; warn (200) below FailureThreshold failed
// checks, with a saturated pool, during a failover, or when a target
// marked Optional fails; fail (503) while a required target is starting,
// failed to start or failed FailureThreshold checks, and while draining
// ([Status].Reason lists the reasons). A database that is down at boot
// makes the service not ready, never a crash loop: the first successful
// check opens the gate. A probe is told the status and the reason, and
// nothing else; the admin body is JSON in the shape of the IETF draft
// "Health Check Response Format for HTTP APIs", one entry per target named
// by Target.Name, with the classified cause of each failure. Error texts
// go to the log only, through the factory's redactor.
//
// [Checker.Serve] documents the Kubernetes settings that fit its
// defaults; the Config and ServeConfig docs list the defaults;
// examples/service is a complete service with a pgxpool and a *sql.DB
// under one Checker. Package lb (module github.com/holdfast-db/holdfast/lb)
// runs the same drain at an F5 or A10 load balancer.
//
// A Checker records its transitions, checks and drains through the
// telemetry of the factory that configured its pools (see [Checker]).
package readiness
