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
//	pool, err := f.NewPoolFromDSN(ctx, dsn) // dsn on the cluster endpoint
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
//	name.global-ID.global.rds.amazonaws.com    its own, every Region's     with GlobalConfig.Regions, as the cluster
//	(Aurora global database writer endpoint)   instances                   endpoint's across Regions: [GlobalConfig]
//
// Two clusters in one account and region never share a monitor or a
// connection. A pool with no routing logs one Info line saying why and
// keeps holdfast's retries; one on several hosts (pgx's fallbacks) is not
// routed. Which hosts the monitor trusts: [Monitor].
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
// Transient, and holdfast's transaction runner (Factory.RunTx,
// sqldb.RunTx) runs a transaction cut before its COMMIT again, on
// the new writer; a COMMIT in flight on a cut connection is a
// *holdfast.OutcomeUnknownError, never run again.
//
// With holdfast.WithBlueGreen on the same pool, the monitor stands down
// while a switchover routes the pool (Status.Off "switchover"), since the
// switchover makes blue read-only and moves its names on purpose; then it
// reads the topology afresh and adopts the writer it finds without a cut.
//
// # Status and readiness
//
// Factory.Failover(pool) returns the pool's [Monitor]: its [Status] gives
// the writer, the routing, counters, why routing is off and a timeline
// ([Event]); Active is true while a failover is under way and for FastFor
// after it, and package readiness answers Warn (reason "failover"), never
// Fail, meanwhile; Changed wakes a caller at the next change.
//
// # Measured
//
// In the simulator (package failovertest), writes resume within a few
// milliseconds of the topology naming the new writer, seconds before DNS
// moves; a hung writer is replaced 1.0 s after it stops. The figures, and
// the comparison with the AWS JDBC wrapper's failover2 and with pgx's
// target_session_attrs: [measured and compared].
//
// [measured and compared]: https://github.com/holdfast-db/holdfast/blob/main/docs/failover.md
package failover
