// Package failover keeps a pgxpool writing through an Aurora PostgreSQL or
// RDS Multi-AZ DB cluster writer failover: a replica is promoted in seconds,
// but the old writer's connections die or hang, and the writer (cluster)
// endpoint's DNS follows the promotion 5 to 30 s late (AWS documents 60–120 s
// of downtime without a topology-aware client). holdfast routes the pool to
// the new writer as soon as the cluster's topology names it.
//
// Give the zero [Config] (every field has a default) to the factory:
//
//	f, err := holdfast.New(holdfast.WithFailover(failover.Config{}))
//	// ...
//	defer f.Close() // stops the monitors
//	pool, err := f.NewPool(ctx, cfg) // cfg on the cluster endpoint
//	// ...
//	st := f.Failover(pool).Status()
//
// The routing lives in the factory's hooks (dial, handshake, acquire), so
// every pool path gets it (Query, Exec, Begin, sqlc code), and so does
// database/sql through package sqldb.
//
// One monitor per cluster, shared by the factory's pools on it, reads the
// cluster's topology and watches its writer (see [Monitor] for what it
// reads, how it detects trouble, and what it needs to be granted);
// [Config] holds its timings, and their defaults bound detection to 1 s.
//
// # Which endpoints are routed
//
// By the shape of the pool's host (after Config.Aliases):
//
//	endpoint                                   monitor                     routing
//	name.cluster-ID.REGION.rds.amazonaws.com   the cluster's (its name,    held, redirected, refused on a reader,
//	                                           domain and port)            cut (all of the table below)
//	name.cluster-ro-ID...                      the cluster's               to the readers by address
//	                                                                       (ReaderConfig), cut
//	name.ID.REGION... (instance), an IP or a   one of its own, by host     cut only (Pinned, the default); with
//	name of your own with InstanceTemplate                                 FollowWriter, as the cluster
//	                                                                       endpoint's, to the writer by address
//	name.cluster-custom-ID... (custom)         one of its own, by host     cut only (its name names no cluster)
//	name.proxy-ID... (RDS Proxy)               none                        none: the proxy follows the writer
//	name.global-ID.global.rds.amazonaws.com    none                        none: a DNS name of the primary
//	(Aurora global database)                                               cluster's writer; use the primary
//	                                                                       region's cluster endpoint to route
//
// Two clusters in one account and region each have their own monitor, and
// no connection of one pool reaches the other cluster
// (TestTwoClustersOneRegion). A pool with no routing logs one Info line
// saying why and keeps holdfast's retries (TestProxyEndpoint: an RDS Proxy
// through a failover writes again about 1.7 s after the writer went down,
// nothing held or left active). A pool on several hosts (pgx's
// fallbacks) is not routed, since pgx chooses among them.
//
// # What holdfast trusts
//
// The configuration (the pool's host, Config.Aliases, Config.InstanceTemplate)
// and the CAs the pool's TLS configuration trusts; not the topology's
// rows. An instance the topology names is resolved, probed, routed to or
// given a password or token only when its endpoint lies in the cluster's
// domain: the instance domain of the pool's endpoint (its account and
// Region suffix, "*.abc123.us-east-1.rds.amazonaws.com") or the
// template's ("?.domain"). A row naming any other host
// (rds_tools.show_topology lists endpoints) is dropped, with one WARN
// naming it; an Aurora row carries only a server id, which must be an
// instance identifier. The topology functions are used only when a
// superuser or rdsadmin owns them, or they belong to the rds_tools
// extension, as RDS's and Aurora's own do: a function that a database
// owner created is not trusted, and routing is
// off (Status.Off "untrusted", one WARN) as when the functions do not
// exist. A read uses at most 64 rows, and a probe round logs in to at
// most 16 instances at once.
//
// # Through a failover
//
// The routing is an immutable snapshot swapped atomically; the hooks read
// it with one atomic load and do nothing else while nothing is wrong.
//
//	when                           connections by the writer endpoint           pooled connections
//	-----------------------------  -------------------------------------------  --------------------------------------
//	writer confirmed down, none    held before each dial, retries included       to the down writer: destroyed on
//	known yet                      (HoldTimeout and the caller's context):       Acquire
//	                               *HoldError
//	new writer confirmed           dialed to the new writer's address while      to the old writer: cut — idle ones
//	                               the endpoint's DNS disagrees (TLS still       closed at once, in-use ones fail
//	                               verifies the endpoint's name; the IAM token   their next read or write at once
//	                               is for it, and the writer answers to it)      with a *CutError, before sending
//	DNS (the pool's LookupFunc)    as asked; a dial to an address the topology   -
//	agrees                         lists as a reader goes to the writer
//	any time                       a connection that reaches a server in hot     a 25006 by the writer endpoint from a
//	                               standby or read-only is refused               server in hot standby or read-only by
//	                               (*NotWriterError) and retried, to the writer  default closes the connection (not one
//	                                                                             of a read-only transaction)
//	an instance leaves the         -                                             to it: cut, in every pool
//	topology
//
// Nothing is resent. [Rule] classifies the holds, refusals and cuts as
// Transient, and holdfast's transaction runner (Factory.BeginTxFunc,
// sqldb.BeginTxFunc) runs a transaction cut before its COMMIT again, on
// the new writer; a COMMIT in flight on a cut connection is a
// *holdfast.OutcomeUnknownError, never run again.
//
// With holdfast.WithBlueGreen on the same pool, a failover while no
// switchover is under way is handled as without it. While a switchover
// routes the pool (from PREPARATION until the blue/green routing is normal
// again) the monitor stands down (Status.Off "switchover"): it holds,
// redirects, refuses and cuts nothing, since the switchover makes blue
// read-only and moves its names on purpose; then it reads the topology
// afresh and adopts the writer it finds without a cut. A writer failover
// in the middle of a switchover is left to the blue/green routing and its
// bounds. go run ./examples/switchover -failover plays a switchover with
// both on (TestSwitchoverFailover: 0 failed, the longest pause within
// IN_PROGRESS + 150 ms).
//
// # Status and readiness
//
// Factory.Failover(pool) returns the pool's [Monitor]: its [Status] gives
// the writer, the routing, counters, why routing is off and a timeline of
// [Event]s; Active is true while a failover is under way and for FastFor
// after it, and package readiness answers Warn (reason "failover"), never
// Fail, meanwhile; Changed wakes a caller at the next change.
//
// # Measured
//
// In the simulator (fakes/failovertest: real PostgreSQL servers, a
// synchronous physical standby, the cluster endpoint's DNS moved after a
// lag), go test ./failover/ -run TestFailover -v: after a crash, the
// monitor suspects the writer within a few ms (the ping fails), finds the
// new writer within 10–20 ms of the topology naming it, and writes resume
// at once, 3 s before DNS moves; the requests in flight on the old writer
// fail (3–4 of 100,000), none is lost; the longest pause is 0.5–0.8 s. A hung
// writer is suspected 0.6 s after it stops and replaced 1.0 s after (its
// in-flight statements cut).
//
// go run ./examples/failover (default timings: promotion 2 s after the
// writer goes down, DNS 10 s after that, a 5 s client DNS cache; 4 workers
// per pool, each write transaction retried whole by the application): in a
// crash, plain pgxpool failed 32 of 2,484 requests (refused connects; in
// other runs also hundreds of 25006 on the old writer back as a reader),
// paused 13.1 s and wrote again 10.9 s after the promotion; holdfast failed
// none of 6,373, paused 2.3 s (the promotion's own 2 s), wrote again 53 ms
// after the promotion, and its readiness answered warn, never fail. No
// acknowledged write was lost by either. Graceful, hang, failback and a
// Multi-AZ DB cluster are alike (BENCHMARKS.md).
//
// # Compared with the AWS wrappers and pgx
//
// The AWS Advanced JDBC Wrapper's failover2 plugin and its Go port (for
// database/sql only) read the same topology, refresh it every 30 s and every
// 100 ms in "panic mode", and reconnect a failed connection to the new
// writer, returning 08S02 ("failover succeeded, re-run your statement")
// inside the connection object. Their enhanced failure monitoring detects a
// hung host in about 40 s with the defaults (failureDetectionTime 30 s +
// interval 5 s × (count 3 − 1)); holdfast's monitor in 1 s, because it probes
// the writer and not each query. holdfast keeps pgx's contract instead of
// swapping connections underneath: a broken connection is an error the
// caller's retry handles, and the pool's next connections go to the new
// writer. The stale-DNS plugin checks each new connection's role with a
// query; holdfast reads in_hot_standby and default_transaction_read_only,
// which PostgreSQL 14+ reports at connect time, and the topology's
// addresses, at no round trip. [Config] maps the wrappers' failoverMode
// onto holdfast's settings, and [ReaderConfig] compares reader routing
// with their read/write splitting.
//
// pgx's target_session_attrs=read-write (or primary) over a host list
// refuses a connection that lands on a reader but knows no other writer: it
// retries the same stale DNS answer until the cache expires, and it costs a
// round trip per connection. It does nothing for connections already
// pooled to the old writer.
package failover
