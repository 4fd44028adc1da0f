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
// [Checker.Middleware], and [Checker.Serve], which on SIGTERM drains,
// shuts the HTTP server down and closes the targets:
//
//	c, err := readiness.New(readiness.Config{Factory: f}, readiness.Pool(pool))
//	mux := http.NewServeMux()
//	mux.Handle("/readyz", c.ReadyHandler()) // 200 or 503; cached, bounded
//	mux.Handle("/livez", c.LiveHandler())   // 200 while the process serves
//	mux.Handle("/drain", c.DrainHandler())  // operators only: an admin port or authentication
//	mux.Handle("/", c.Middleware(app))      // counts requests in flight for the drain
//	err = c.Serve(ctx, &http.Server{Addr: ":8080", Handler: mux}, readiness.ServeConfig{})
//
// Readiness answers pass (200) when every gate is open and the last check
// of every target succeeded; warn (200) below FailureThreshold failed
// checks, with a saturated pool, during a failover, or when a target
// marked Optional fails; fail (503) while a required target is starting,
// failed to start or failed FailureThreshold checks, and while draining
// ([Status].Reason lists the reasons). A database that is down at boot
// makes the service not ready, never a crash loop: the first successful
// check opens the gate. The body is plain text, or JSON in the shape of
// the IETF draft "Health Check Response Format for HTTP APIs" with one
// entry per target, each named by Target.Name: a name the operator chose
// or "database", never an address. Error texts go to the log only.
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
