// Package readiness tells orchestrators and load balancers the truth about a
// service's databases, and takes the service out of traffic with proof
// that the traffic is gone.
//
// A [Checker] is made by [New] over the service's databases, its targets:
// pgxpools built through a holdfast.Factory ([Pool]) and *sql.DBs of
// package sqldb ([DB]). It provides a startup gate ([Checker.Start]), a
// readiness probe that checks every target ([Checker.ReadyHandler], for
// /readyz), a liveness probe that never touches a database
// ([Checker.LiveHandler], for /livez), a drain with a lock
// ([Checker.Drain], [Checker.DrainHandler]) that waits for the connections
// acquired from every target's pool and the requests counted by
// [Checker.Middleware], the details of every target for operators
// ([Checker.AdminHandler]), and [Checker.Serve], which on SIGTERM drains,
// shuts the HTTP servers down and closes the targets. The probes go on the
// service's port; the drain and the details on an admin listener of
// their own, here on loopback:
//
//	c, err := readiness.New(readiness.Config{Factory: f}, readiness.Pool(pool))
//	mux := http.NewServeMux()
//	mux.Handle("/readyz", c.ReadyHandler()) // 200 or 503, status and reason only; cached, bounded
//	mux.Handle("/livez", c.LiveHandler())   // 200 while the process serves
//	mux.Handle("/", c.Middleware(app))      // counts requests in flight for the drain
//	admin := http.NewServeMux()
//	admin.Handle("/readyz", c.AdminHandler()) // targets, blue/green mapping, writer, drain
//	admin.Handle("/drain", c.DrainHandler())  // POST drains, DELETE enables
//	err = c.Serve(ctx, &http.Server{Addr: ":8080", Handler: mux}, readiness.ServeConfig{
//		Admin: &http.Server{Addr: "127.0.0.1:8081", Handler: admin},
//	})
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
