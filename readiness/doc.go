// Package readiness tells orchestrators and load balancers the truth about a
// service's database path, and takes the service out of traffic with proof
// that the traffic is gone.
//
// A [Checker] wraps the service's databases, its targets: a *pgxpool.Pool
// (built through a holdfast.Factory), or several pgxpools and *sql.DBs of
// package sqldb ([NewChecker]), and provides:
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
//     drain waits on, with the connections acquired from every target's
//     pool;
//   - [Checker.Serve], which on SIGTERM drains, shuts the HTTP server down
//     and closes the pools, so that a rolling deploy loses no request.
//
// Wiring a service:
//
//	f, err := holdfast.New()
//	cfg, err := pgxpool.ParseConfig(os.Getenv("DATABASE_URL"))
//	err = f.Configure(cfg)
//	pool, err := pgxpool.NewWithConfig(ctx, cfg) // no connection yet: Serve opens the startup gate
//
//	c, err := readiness.New(pool, readiness.Config{Factory: f})
//	mux := http.NewServeMux()
//	mux.Handle("/readyz", c.ReadyHandler()) // 200 or 503, checks the database, cached
//	mux.Handle("/livez", c.LiveHandler())   // 200 while the process serves; never touches the database
//	mux.Handle("/drain", c.DrainHandler())  // operators only: an admin port or authentication
//	mux.Handle("/", c.Middleware(app))      // counts requests in flight for the drain
//
//	// Opens the startup gate in the background, serves, and on SIGTERM
//	// drains, shuts the server down and closes the pool.
//	// readiness.NewChecker(cfg, readiness.Pool(pool), readiness.DB(db))
//	// gates on several databases: see "Several databases".
//	err = c.Serve(ctx, &http.Server{Addr: ":8080", Handler: mux}, readiness.ServeConfig{})
//
// examples/service is a complete service with a pgxpool and a *sql.DB
// under one Checker; with no DATABASE_URL it starts a throwaway
// PostgreSQL.
//
// # Several databases
//
// A service that uses more than one database — a pgxpool and a *sql.DB for
// its database/sql code, a primary and a reporting replica, two services'
// databases — gates on all of them with one Checker:
//
//	orders, err := f.NewPool(ctx, ordersCfg, holdfast.PoolName("orders"))
//	reports, err := sqldb.Open(ctx, f, reportsCfg)  // or sqldb.OpenDB(pool)
//	c, err := readiness.NewChecker(readiness.Config{Factory: f},
//		readiness.Pool(orders),
//		readiness.Target{DB: reports, Name: "reports", Optional: true})
//
// Each [Target] is checked on its own (concurrently, within CheckTimeout
// each) and has its own startup gate, failure count and status, named by
// Target.Name, by default the pool's holdfast name
// (holdfast.Factory.PoolName: "orders" above, or "host:port/database").
// Two targets with one name are a [*ConfigError]. A *sql.DB is checked
// through database/sql, as the application's code reaches it, and drained
// and started through the pgxpool under it, which [sqldb.PoolOf] finds for
// a *sql.DB of sqldb.Open or sqldb.OpenDB (give Target.Pool otherwise).
//
// Readiness answers the worst of the targets: it fails when a required
// target fails, and only warns (200, "warn") when a target marked
// Optional fails or has not started, for a database the service can
// serve without for a while. The plain-text answer names the target
// ("not ready: database (reports: fatal/sqlstate-42501, 3 consecutive
// failures)"); the JSON body has one entry per target in "startup",
// "postgres:responseTime" and "postgres:connections", each with its name
// as "componentId" and its own status and reason; [Status].Targets has the
// same. [Checker.Start] opens every target's gate, a drain waits for the
// connections acquired from every target's pool, and [Checker.Serve]
// closes every *sql.DB and pool. [New] is NewChecker with one target.
//
// # Startup success is not request success
//
// The first connection is retried a bounded number of times
// (holdfast.DefaultStartupPolicy). If it still fails, the service neither
// goes Ready with a dead database nor exits: readiness answers 503
// "startup-failed" with the classified cause (for example
// "transient/conn-refused" or "fatal/permission-denied"), probes keep
// checking the database at most once per CheckInterval, and the first
// success opens the gate, with no restart. Once it is open, transient
// failures of new connections are retried by the pool's holdfast layers,
// on every pool path; a persistent failure shows in readiness after
// FailureThreshold consecutive failed checks, never as an endless loop.
//
// # The readiness check
//
// The database check acquires a connection from the pool (never a
// connection of its own, so it sees pool exhaustion) and runs one query,
// within CheckTimeout; for a *sql.DB it runs the query through
// database/sql, which acquires from the pool under it. Its result is
// cached for CheckInterval, and concurrent probes share one running check
// (of every target), so that a fleet of probers cannot
// stampede the database. A probe waits for a running check at most
// ProbeTimeout, then answers from the last known result. Readiness answers:
//
//	status  HTTP  when
//	pass    200   every gate is open and the last check of every target succeeded
//	warn    200   1 to FailureThreshold-1 consecutive failed checks, every pool connection acquired,
//	              or an optional target failing (starting, startup-failed, FailureThreshold failed checks)
//	fail    503   a required target starting, startup-failed or at FailureThreshold failed checks;
//	              draining, or closed
//
// The body is plain text, or with ?verbose or "Accept: application/health+json"
// a JSON body in the application/health+json shape (see
// [Checker.ReadyHandler]) with the classified reason of each failed check,
// the time of the last success, pool occupancy and the drain state, owner
// and time, per target. Error texts go to the log only.
//
// # Drain
//
// Flipping a health page between 200 and 503 is blind: it cannot see
// whether traffic has gone. [Checker.Drain] follows the safe L4 procedure
// instead, because the service can see its own work:
//
//  1. the state becomes Disabling and readiness answers 503 "draining" at
//     once (optionally, [Config].RefuseWhileDraining refuses new requests);
//  2. every DrainInterval (default 1s) the drain polls the connections
//     acquired from every target's pool (for a *sql.DB: its open Rows, Tx
//     and *sql.Conn) and the in-flight requests;
//  3. when both are zero the state becomes Disabled and Drain returns the
//     time it took; past DrainTimeout (default 2m) it returns a
//     [*DrainTimeoutError] naming what was still in use, and the service
//     stays Disabling so that the deploy can be aborted;
//  4. [Checker.Enable] puts the service back in service.
//
// The state, who asked for the drain (an owner string) and since when are
// in the probe's JSON. A drain by another owner while one is held is
// refused with a [*LockedError] naming the holder, so that two operators
// cannot drive the same node; the holder may drain again. Every drain,
// refusal and enable is logged with its owner.
//
// From a deploy pipeline, through [Checker.DrainHandler]:
//
//	curl -fsS -X POST -H 'X-Drain-Owner: deploy-1234' 'http://node:8080/drain?timeout=2m'  # 200 drained | 409 locked | 503 not drained: abort
//	# ... deploy ...
//	curl -fsS -X DELETE -H 'X-Drain-Owner: deploy-1234' http://node:8080/drain
//
// Package lb (module github.com/holdfast-db/holdfast/lb) runs the same
// drain algorithm at an F5 or A10 load balancer.
//
// # Kubernetes
//
//	spec:
//	  terminationGracePeriodSeconds: 40   # >= preStop + DrainTimeout + ShutdownTimeout, with a margin
//	  containers:
//	    - name: app
//	      ports: [{containerPort: 8080}]
//	      readinessProbe:
//	        httpGet: {path: /readyz, port: 8080}
//	        periodSeconds: 5
//	        timeoutSeconds: 1        # ProbeTimeout (800ms) answers before this
//	        failureThreshold: 1      # the checker already waits for 3 consecutive failed checks
//	      livenessProbe:
//	        httpGet: {path: /livez, port: 8080}   # never depends on the database
//	        periodSeconds: 10
//	        timeoutSeconds: 1
//	        failureThreshold: 3
//	      lifecycle:
//	        preStop:
//	          sleep: {seconds: 5}    # Kubernetes >= 1.30; older: exec: {command: ["sleep", "5"]}
//
// Probes:
//
//   - Point the readinessProbe at /readyz and the livenessProbe at /livez.
//     Never point the liveness probe at the database: a database outage
//     would become a restart storm.
//   - No startupProbe is needed: readiness covers startup. If you add one,
//     point it at /livez, so that a database that is down at boot does not
//     restart the pod.
//   - Damp flapping in one place: either keep the checker's
//     FailureThreshold (3) with failureThreshold: 1, or set
//     FailureThreshold to 1 and let Kubernetes count. Both multiply the
//     time to notice an outage.
//
// Termination:
//
//   - When a pod is deleted, Kubernetes runs preStop, then sends SIGTERM.
//     It removes the pod from its endpoints at the same time, but
//     asynchronously, so requests keep arriving for a few seconds; the
//     preStop sleep covers that.
//   - On SIGTERM, [Checker.Serve] drains with ServeConfig.DrainTimeout
//     (20s), taking over any operator's lock since the process is leaving,
//     then calls http.Server.Shutdown (ShutdownTimeout, 5s) and closes the
//     pool. A second SIGTERM or SIGINT skips the rest of the drain.
//   - Keep preStop + ShutdownDelay + DrainTimeout + ShutdownTimeout below
//     terminationGracePeriodSeconds (default 30s, preStop included), or the
//     kubelet sends SIGKILL in mid-drain. The Serve defaults (0 + 20s + 5s)
//     fit.
//   - Load balancers that probe pods themselves (F5 or A10 monitors, cloud
//     NEG or ALB target groups) need longer to see the 503: set
//     ServeConfig.ShutdownDelay to at least their health-check interval
//     times their unhealthy threshold, and raise the grace period to
//     match.
//
// # Telemetry
//
// Through the meter provider of Config.Factory (and of each
// Target.Factory for its own series), a Checker records, as the
// OpenTelemetry Prometheus exporter names them:
//
//	instrument                            Prometheus                                  attributes
//	holdfast.readiness.ready              holdfast_readiness_ready_ratio              — (the whole service: 1 while /readyz answers 200)
//	holdfast.readiness.transitions        holdfast_readiness_transitions_total        holdfast.readiness.health, holdfast.readiness.reason
//	holdfast.readiness.drain.duration     holdfast_readiness_drain_duration_seconds   holdfast.outcome
//	holdfast.readiness.check.ready        holdfast_readiness_check_ready_ratio        per target: holdfast.readiness.check,
//	                                                                                  db.client.connection.pool.name, server.address,
//	                                                                                  server.port, db.namespace (1 unless its check fails)
//	holdfast.readiness.check.transitions  holdfast_readiness_check_transitions_total  the target's, holdfast.readiness.health and .reason
//	holdfast.readiness.check.duration     holdfast_readiness_check_duration_seconds   the target's, holdfast.outcome (success|failure)
//
// The per-target series carry the target's pool name, as the pool's own
// db.client.connection.* series do, and its configured host, so that a
// dashboard can tell which database fails: for example
// min by (db_client_connection_pool_name) (holdfast_readiness_check_ready_ratio).
// An optional target's check.ready reads 0 while it fails, though the
// service stays ready. Log lines about a target carry
// holdfast.readiness.check, holdfast.pool, server.address, server.port and
// db.namespace.
//
// # Concurrency and lifetime
//
// A Checker is safe for concurrent use. Its goroutines are the running
// database check, one per target while it runs; [Checker.Close] stops and
// joins them, interrupts waiting drains, and leaves the targets open.
// [Checker.Serve] owns and joins the goroutines it starts, and closes the
// Checker, every *sql.DB and every pool.
package readiness
