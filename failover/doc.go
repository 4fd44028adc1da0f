// Package failover keeps a pgxpool writing through an Aurora PostgreSQL or
// RDS Multi-AZ DB cluster writer failover: a replica is promoted in seconds,
// but the old writer's connections die or hang, and the writer (cluster)
// endpoint's DNS follows the promotion 5 to 30 s late (AWS documents 60–120 s
// of downtime without a topology-aware client). holdfast routes the pool to
// the new writer as soon as the cluster's topology names it.
//
// # Enabling it
//
// Give the zero Config (every field has a default) to the factory:
//
//	f, err := holdfast.New(holdfast.WithFailover(failover.Config{}))
//	// ...
//	defer f.Close() // stops the monitors
//	pool, err := f.NewPool(ctx, cfg) // cfg on the cluster endpoint
//	// ...
//	st := f.Failover(pool).Status()
//
// It needs holdfast's factory: the routing lives in the factory's hooks
// (dial, handshake, acquire), and pgxpool alone has no hook for some of it.
// Every pool path gets it (Query, Exec, Begin, sqlc code), and so does
// database/sql through package sqldb.
// It works alongside holdfast.WithBlueGreen on the same pool: a failover
// while no switchover is under way (no deployment, or CREATED) is handled
// as without it. While a switchover routes the pool (from PREPARATION until
// the blue/green routing is normal again), the monitor stands down: it
// closes its connections, probes nothing and holds, redirects, refuses and
// cuts nothing, since the switchover makes blue read-only and moves its
// names to green on purpose. Once the blue/green routing is normal again
// it forgets the cluster it knew (the switchover renamed its instances)
// and reads the topology afresh by the pool's endpoint, as at its start;
// a writer it finds so is adopted without a cut. A writer failover in the
// middle of a switchover is left to the blue/green routing and its bounds
// (bluegreen.Config.ConnectTimeout for a held caller, SwitchoverTimeout
// for the switchover): bounded, not handled faster.
// go run ./examples/switchover -failover plays a switchover with both on
// (TestSwitchoverFailover: 0 failed, the longest pause within IN_PROGRESS +
// 150 ms).
//
// # Which endpoints are routed
//
// By the shape of the pool's host (after Config.Aliases):
//
//	endpoint                                   monitor                     routing
//	name.cluster-ID.REGION.rds.amazonaws.com   the cluster's (its name,    held, redirected, refused on a reader,
//	                                           domain and port)            cut (all of the table below)
//	name.cluster-ro-ID...                      the cluster's               to the readers by address (Reader
//	                                                                       routing), cut
//	name.ID.REGION... (instance), an IP or a   one of its own, by host     cut only (Pinned, the default); with
//	name of your own with InstanceTemplate                                 FollowWriter, as the cluster endpoint's,
//	                                                                       to the writer by address
//	name.cluster-custom-ID... (custom)         one of its own, by host     cut only (its name names no cluster)
//	name.proxy-ID... (RDS Proxy)               none                        none: the proxy follows the writer
//	name.global-ID.global.rds.amazonaws.com    none                        none: a DNS name of the primary
//	(Aurora global database)                                               cluster's writer; use the primary
//	                                                                       region's cluster endpoint to route
//
// Two clusters in one account and region share the instance endpoints'
// domain and differ by name: each has its own monitor, and no connection
// of one pool reaches the other cluster (TestTwoClustersOneRegion). A pool
// with no routing logs one Info line saying why and keeps holdfast's
// retries (TestProxyEndpoint: an RDS Proxy through a failover writes again
// about 1.7 s after the writer went down, nothing held or left active).
//
// A monitor that cannot read the topology — a role without EXECUTE on
// aurora_replica_status(), without USAGE on the schema rds_tools, a server
// without the functions — turns routing off: it says why once at WARN
// (naming the grant it needs), sets Status.Off and Status.Error (the
// readiness JSON's failover check shows both, and warns), and looks again
// every RefreshInterval instead of reconnecting (TestTopologyUnreadable:
// one monitor connection in 5 s).
//
// # The topology monitor
//
// One monitor per cluster, shared by the factory's pools on it (the writer
// endpoint's and the reader endpoint's), on one goroutine that starts with
// the first connection and that Factory.Close joins (or ClosePool of the
// last pool on it). It
// connects with a copy of the first pool's config (credentials, TLS, the
// integration's dial without the retry loop, a fresh password per connect,
// application_name "holdfast-failover-monitor") and reads:
//
//   - Aurora: pg_catalog.aurora_replica_status() (server_id; session_id
//     MASTER_SESSION_ID marks the writer; last_update_timestamp picks the
//     newest when several rows claim it), and aurora_db_instance_identifier();
//   - RDS Multi-AZ DB clusters: rds_tools.show_topology('holdfast') (id,
//     endpoint, port), rds_tools.dbi_resource_id() and
//     rds_tools.multi_az_db_cluster_source_dbi_resource_id();
//
// plus pg_is_in_recovery() and transaction_read_only, so that a server is
// the writer only when it says so and takes writes. The instance endpoints
// are "<server_id>.<cluster suffix>" (orders.cluster-abc123.us-east-1.rds.amazonaws.com
// gives orders-1.abc123.us-east-1.rds.amazonaws.com), or
// Config.InstanceTemplate for a pool on an IP address or a name of your
// own; Multi-AZ clusters name their endpoints. A name of your own that
// stands for an RDS endpoint (a CNAME, a Route 53 alias) is best given in
// Config.Aliases: the pool is then routed as a pool on that endpoint. A
// pool on a name of your own that Aliases does not list logs a warning
// (once) when a write by it reaches a standby (25006): the name may be one
// for the writer endpoint, which holdfast cannot tell from the outside.
//
// The monitor keeps its own connection on the writer's instance endpoint,
// pings it every HeartbeatInterval (200 ms) bounded by FailureTimeout
// (400 ms), and reads the topology every RefreshInterval (30 s).
//
// Its first connection goes to the pool's host. When that does not answer
// before the first topology read — a service started, or its monitor
// started, during a failover, while the writer endpoint's DNS still leads
// to a writer that is down — the monitor reads the topology by the
// cluster's other endpoint (the reader endpoint of a writer endpoint, and
// the reverse) and probes from there as in any failover: such a service
// writes within milliseconds of the promotion instead of after DNS
// (TestStartDuringFailover: 62 ms, plain pgxpool 4.9 s with a 4 s DNS lag).
//
// From the first sign of trouble — its ping fails or times out, or a pool
// reports a network error, 57P01/57P02/57P03, 25006 on a connection by the
// writer endpoint, a refused connect — it probes every instance in parallel
// on connections of its own, every FastInterval (100 ms) for FastFor (30 s),
// each probe bounded by FailureTimeout. A probe that does not answer is
// abandoned at once: no cancel request, no 15 s drain against a hung server.
// A host whose dial fails is dialed again after FastInterval, doubling up to
// once a second, so that a writer that is down costs about one dial and one
// password or token fetch a second.
//
// # Detection bound
//
// A writer that refuses or resets connections (a crash, a restart) is
// seen at once, with the next ping or the pool's own error. A writer that
// stops answering (a hang, a black hole) is seen when a ping times out:
// at most HeartbeatInterval + FailureTimeout (600 ms) after it stops, and
// declared down when a fresh connection to it also fails within
// FailureTimeout: HeartbeatInterval + 2×FailureTimeout, 1 s with the
// defaults. A suspicion alone changes no routing and cuts nothing: only a
// writer confirmed down holds new connects, and only another instance
// confirmed as the writer (it says so and takes writes) moves traffic. On
// two loaded cores (busy loops on every core and a write workload) the
// defaults raised no false failover in the tests.
//
// # Routing
//
// The routing is an immutable Snapshot swapped atomically; the hooks read
// it with one atomic load and do nothing else while nothing is wrong.
//
//	when                           connections by the writer endpoint           pooled connections
//	-----------------------------  -------------------------------------------  --------------------------------------
//	writer confirmed down, none    held before each dial, retries included       to the down writer: destroyed on
//	known yet                      (HoldTimeout, 30 s, and the caller's          Acquire
//	                               context): *HoldError
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
// Reader-endpoint pools are routed to the readers (see "Reader
// routing"). Instance-endpoint pools with Pinned (the default) are not
// redirected; their connections to an old writer or a departed instance
// are cut (see "Instance-endpoint pools" for FollowWriter). A pool on
// an alias of the writer endpoint (Config.Aliases) is routed as the writer
// endpoint's (TestAlias: writes again 131 ms after the promotion; without
// the alias, after DNS moved, 3.6 s); a pool on several hosts (pgx's
// fallbacks) is not, since pgx chooses among them.
//
// # Reader routing
//
// Aurora's reader endpoint answers each DNS lookup with one reader at
// random, cached 5 s: a pool that opens its connections at once piles
// them on one reader, a reader added later gets none until connections
// are recycled (MaxConnLifetime), and a removed reader's connections fail
// until pgx notices. A pool on the reader endpoint (or an alias of it)
// dials instead, for each new connection, a reader of the monitor's
// topology, by address: TLS verify-full still checks, and an IAM token is
// still issued for, the endpoint name, as for the writer's redirects.
// Config.Readers (a ReaderConfig) chooses how:
//
//   - Strategy: LeastConnections (the default) picks the reader with the
//     fewest of the pool's connections, dials under way included, at
//     random among ties; Random picks one uniformly; ByDNS turns reader
//     routing off (the DNS answer, as before; departed readers are still
//     cut).
//   - MaxLag: a reader whose replica_lag_in_msec (Aurora) exceeds it gets
//     no new connection until it catches up, and the reader pools retire
//     their connections to it: the idle ones are closed at once, the ones
//     in use when next acquired (what runs on them finishes; nothing
//     fails), so that no read is served there after one topology read.
//     The lag is the writer's topology row of the monitor's last read
//     (Readers.RefreshInterval); the timeline says "reader lagging" and
//     "reader caught up", and a reader that caught up gets its share back
//     as a reader that joins. RDS Multi-AZ DB clusters publish no lag in
//     their topology: MaxLag does not apply to them.
//   - WhenNoReader: with no usable reader (none in the topology, or every
//     one lagging), UseWriter (the default, as the reader endpoint does
//     with no replica) dials the writer; Hold waits for one, at most
//     HoldTimeout (5 s) and the caller's context, then fails the dial with
//     a *NoReaderError.
//
// A new pool's first dials wait for the monitor's first topology read (at
// most 3 s, then by DNS); with the topology unreadable (Status.Off) they
// go by DNS. When readers join the topology, each reader pool closes its
// surplus idle connections beyond the fair share (rounded up) of the
// busiest readers, once, and retires the surplus in use when next
// acquired: the pool's new ones (MinConns, or the Acquire that needs one)
// go to the new readers, without waiting for MaxConnLifetime. A reader
// that leaves has its connections cut at once, as every instance that
// leaves. Both are seen at the monitor's next
// topology read: while it serves a reader pool, it reads the topology
// every Readers.RefreshInterval (5 s, the reader endpoint's TTL; the
// cluster's RefreshInterval, 30 s, when that is shorter or no reader pool
// is open), or every FastInterval while probing. The choice is made per
// dial, not per Acquire: a reader pool's Acquire + Release costs what
// plain pgxpool's does (BenchmarkReaderPaired, 3 real readers, pools of
// 6: 1.016–1.020×, 0 allocations; through Factory.Acquire 1.03×;
// HOLDFAST_REQUIRE_PG=1 go test -run '^$' -bench ReaderPaired -count 3
// ./failover/).
//
// Measured (TestReaderRouting, 3 readers, 12 connections opened at once,
// RefreshInterval 500 ms, two shared cores): holdfast 4/4/4 (max/min 1.00),
// plain pgxpool 12/0/0 through the simulator's 5 s DNS cache; a fourth
// reader added holds its 3 connections 1 s after AddReader returns (3/3/3/3);
// a reader removed under a read load of 4 workers: its connections cut,
// 0 reads failed. TestReaderMaxLag: a reader lagging 3 s with MaxLag 1 s
// gets none of 6 new connections; with both lagging, UseWriter connects to
// the writer and Hold fails with a *NoReaderError.
//
// Reader health. A crashed or hung reader stays in the topology and
// behind the reader endpoint until Aurora detects it. While the monitor
// serves a pool with reader routing (on the reader endpoint, Strategy not
// ByDNS), it pings every reader each HeartbeatInterval on a connection of
// its own per reader (one more connection per reader, as the pool's
// user), in parallel, each ping bounded by FailureTimeout; while probing a
// failover (after a pool's network error, a reader pool's included) its
// probes read every reader instead, each FastInterval. A reader whose
// ping or read fails is dialed again at once: it is down when that fresh
// connection is refused, reset or times out (FailureTimeout), or fails
// with SQLSTATE class 57 (shutting down, cannot connect now) — not for an
// authentication error or a role refused the topology. A crashed reader
// is so found down at once (refused), a hung one within HeartbeatInterval
// + 2×FailureTimeout (1 s) after it stops answering, the bound of a hung
// writer. A reader down gets no new connection (with none left,
// WhenNoReader applies), every pool of the cluster cuts its connections to
// it at once — the statements in flight there fail with a *CutError that
// names it ("reader orders-2 down (timeout)"), Transient like every cut,
// rather than at their own timeout — and Status's timeline says "reader
// down". Once a fresh connection and a ping to it succeed again (tried
// about once a second), it is back ("reader back"): new connections go
// to it again and the reader pools rebalance onto it, as when a reader
// joins.
//
// Measured (TestReaderHealth: 3 readers, a pool of 9 on the reader
// endpoint, 4 workers reading, each read tried once with a 5 s timeout,
// default timings, two shared cores, -race; HOLDFAST_REQUIRE_PG=1 go test
// -race -run TestReaderHealth -v ./failover/; three runs, times from the
// call of the simulator's crash or hang): a crashed reader found down
// 51–217 ms after the crash (a read's EOF woke the monitor, its fresh
// connection was refused), no worker paused more than 60–209 ms, 1 of
// 5,000–29,000 reads failed (in flight on it: EOF); a hung reader found
// down 0.90–1.05 s after the hang, its 1–2 reads in flight ended then with
// the CutError (not at their 5 s timeout), no worker paused more than
// 0.90–0.98 s, 0 other reads failed of 17,000–31,000; after either, none
// of the pool's connections on it, the new ones on the other two. A plain
// pgxpool under the same hang: its reads on the hung reader stuck until
// their timeout (2 s in the test).
//
// The surplus connections in use when a reader joins (or comes back, or
// catches up) are retired when next acquired, within 30 s. pgxpool dials
// their replacements, which go to the readers with the fewest, when the
// load needs one or at its next health check, which restores MinConns
// (HealthCheckPeriod, 1 min by default): a pool whose load fits in fewer
// connections than MinConns may run on fewer until then. And connections
// are not reads: pgxpool hands out the idle connection released last, so
// a pool larger than its concurrency serves most reads from a few of its
// connections; size MaxConns near the concurrency for reads as even as
// the connections.
//
// # Instance-endpoint pools
//
// A pool on an instance endpoint (orders-1.abc123.us-east-1.rds.amazonaws.com,
// an IP address, a name of your own that Aliases does not list) asks for a
// server, not a role. Config.InstancePools, or holdfast.PoolInstanceMode
// for one pool, says what it does when the writer changes:
//
//   - Pinned (the default) keeps it on its instance: its connections are
//     cut when the instance stops being the writer or leaves the
//     topology, and it reconnects to the instance, a reader after a
//     failover, where writes fail with 25006 (TestInstancePools/pinned:
//     the control).
//   - FollowWriter routes it as a pool on the cluster endpoint, by
//     address: once the monitor knows the writer, every dial goes to the
//     writer of the moment (TLS still verifies, and IAM tokens are for,
//     the instance endpoint's name, as writer redirects do), a new
//     connection is held while the writer is down, a connection that
//     reaches a reader is refused and retried to the writer, and the
//     pool's connections to the old writer are cut when it changes. The
//     instance endpoint's DNS is not checked: it never names the writer
//     of the moment, so the redirect is permanent and Status.Routing
//     says "normal". A pool on a reader's instance endpoint goes to the
//     writer too: the mode names the role asked for, as the AWS wrappers'
//     strict-writer does. TestInstancePools/follow-writer: a crash under 4
//     writers on the writer's instance endpoint (three runs): writes again
//     37–116 ms after the promotion, the longest pause 0.57–0.63 s, 1–4
//     of 24,000–32,000 failed (in flight on the old writer: outcome
//     unknown or EOF), none with 25006, none lost,
//     every row written after the promotion on the new writer, and new
//     connections after a Reset on it too while the instance endpoint
//     names the old writer, back as a reader.
//
// The AWS wrappers' failoverMode (JDBC wrapper, failover2 plugin) against
// holdfast; the wrappers act when a connection fails, holdfast when the
// topology changes (and on a pool's first connection to a reader):
//
//	failoverMode      wrapper: after a failure, reconnect to     holdfast
//	----------------  -----------------------------------------  ----------------------------------------------
//	strict-writer     the new writer (default, but on the        the cluster endpoint, always; an instance
//	                  reader endpoint)                           endpoint with FollowWriter
//	reader-or-writer  a reader, else the writer (default on      the reader endpoint: reader routing with
//	                  the reader endpoint)                       WhenNoReader UseWriter (the default); a reader
//	                                                             down, departed or lagging is left, its
//	                                                             connections cut (or retired, when lagging)
//	strict-reader     a reader, else an error                    the reader endpoint with WhenNoReader Hold:
//	                                                             a bounded wait, then a *NoReaderError
//	(no failover)     -                                          an instance endpoint with Pinned (the default)
//
// Nothing is resent. A transaction open on a connection that is cut is
// rolled back: Rule classifies *HoldError, *NotWriterError and *CutError
// as Transient, and holdfast's transaction runner (Factory.BeginTxFunc,
// sqldb.BeginTxFunc) runs the whole transaction again, on the new writer.
// A COMMIT or an autocommit statement in flight on it may or may not have
// been applied by the old writer before it went down, as with any broken
// connection: the caller gets a *holdfast.OutcomeUnknownError wrapping the
// CutError (Fatal "outcome-unknown"), and the runner does not run it
// again. The factory's connect layer retries a refused connect
// (*NotWriterError) itself, under the retry policy.
//
// # Status and readiness
//
// Factory.Failover(pool) returns the pool's [Monitor]. Its Status gives the
// writer, the routing ("normal", "redirect", "held"), counters, why routing
// is off (Off, Error) and a timeline: "suspect", "writer down", "new
// writer", "writer back", "DNS agrees", "instance left", "reader down",
// "reader back", "reader lagging", "reader caught up". Active is true
// while the routing is not normal and for FastFor after a change of the
// writer's routing or of the instances (the reader events leave it as it
// is); package readiness answers Warn (reason "failover"), never Fail,
// while it is.
// Changed wakes a caller at the next change of Status.
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
// Multi-AZ DB cluster are alike
// (BENCHMARKS.md).
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
// addresses, at no round trip.
//
// pgx's target_session_attrs=read-write (or primary) over a host list
// refuses a connection that lands on a reader but knows no other writer: it
// retries the same stale DNS answer until the cache expires, and it costs a
// round trip per connection. It does nothing for connections already
// pooled to the old writer.
//
// # Readers compared with the AWS JDBC wrapper's read/write splitting
//
// Point by point, against the JDBC wrapper's readWriteSplitting plugin and
// its host selection strategies (and the AWS Go wrapper's port, PR #198):
//
//   - Where reads go. JDBC: setReadOnly(true) on a connection swaps its
//     physical connection for a reader's (refused inside a transaction;
//     session state is not carried over); the Go wrapper switches by a
//     context value (awsctx.SetReadOnly) or sql.TxOptions{ReadOnly: true},
//     for database/sql only. holdfast: two pools of one cluster — a
//     writer pool on the cluster endpoint and a reader pool on the reader
//     endpoint, sharing one monitor (holdfast.Factory.NewReadWrite, or
//     two NewPool calls); a connection never changes server under the
//     caller, and no session state is copied.
//   - Strategies. JDBC: random (the default), leastConnections (only with
//     its internal pools), roundRobin (a concurrent pool prefill lands on
//     one reader, issue #1968), fastestResponse, weightedRandom,
//     lowestLoad/highestLoad by CPU and lag (4.2.0). Go wrapper: random and
//     roundRobin. holdfast: LeastConnections (the default; the pool's own
//     connections, dials under way counted, so a prefill of 12 spreads 4/4/4),
//     Random, ByDNS (off). No CPU- or response-time-weighted strategy.
//   - Lag. JDBC: lag only as a weight (lag×100 + CPU in lowestLoad*), no
//     cut-off, and a connection already on a lagging reader stays there.
//     holdfast: MaxLag, a cut-off on replica_lag_in_msec (Aurora) read at
//     each topology refresh (5 s while a reader pool is open): a lagging
//     reader gets no new connection and the pool's connections to it are
//     retired, so no read is served there once the lag is read
//     (TestReaderLagRetires; examples/readers: 0 reads after MaxLag + one
//     refresh, against plain pgxpool's hundreds). Multi-AZ DB clusters
//     publish no lag in their topology: MaxLag does not apply there.
//   - No usable reader. JDBC falls back to the writer (PR #356; a strict
//     mode without fallback is an open request, #1324); the Go wrapper
//     too. holdfast: WhenNoReader UseWriter (the default) or Hold, bounded
//     by HoldTimeout and the caller's context, then a *NoReaderError.
//   - A reader that joins. JDBC: chosen at the next setReadOnly once the
//     topology is refreshed; a cached reader connection stays where it is
//     (cachedReaderKeepAliveTimeoutMs 0: forever). holdfast: at the
//     refresh that lists it, the busiest readers' surplus connections are
//     retired (idle ones at once, the others when next acquired) and the
//     pool's new ones go to it (its full share about a second after it is
//     listed, TestReaderRouting and examples/readers).
//   - A reader that leaves, crashes or hangs. JDBC: a failed connection
//     fails over (strict-reader or reader-or-writer) and its enhanced
//     failure monitoring finds a hung host in about 40 s with the
//     defaults. holdfast: connections to a reader that leaves the topology
//     are cut at once; reader health (above) finds a crashed reader at
//     once and a hung one within 1 s, cuts its connections and routes new
//     ones elsewhere.
//   - Read-your-writes. Neither wrapper promises it: a reader trails the
//     writer by its lag. holdfast documents it and its ReadWrite helper
//     sends a read that must see the caller's own writes to the writer.
//   - Instance endpoints. The wrappers' failoverMode strict-writer follows
//     the writer role; holdfast's InstancePools FollowWriter does the same,
//     Pinned (the default) keeps the pool on its instance.
package failover
