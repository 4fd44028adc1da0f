// Package failovertest plays an Aurora (or RDS Multi-AZ DB cluster) writer
// failover on one machine, with real PostgreSQL servers, for tests and demos
// of failover routing.
//
// # Model
//
// [Start] starts a [Cluster]: a writer (initdb, through fakes/pgtest) and 1
// to [MaxReplicas] replicas (Config.Replicas) made from it with
// pg_basebackup (-R: standby.signal and primary_conninfo; several in
// parallel), streaming physically in synchronous mode
// (synchronous_standby_names 'ANY 1 (*)', synchronous_commit on). A commit
// returns only once a replica has flushed it, and a failover promotes the
// replica that received the most WAL (the others follow it: their
// primary_conninfo is rewritten and reloaded), so an acknowledged write survives
// the writer's death, as Aurora's shared storage guarantees;
// [Cluster.CommittedIDs] lists a table's ids on the writer of the moment,
// for the audit. The servers run as the postgres OS user when the process is
// root, on 127.0.0.11, 127.0.0.21, 127.0.0.31, … ([DefaultHost]; 127.0.0.1
// and a port each where those cannot be bound). Measured on two shared
// cores (load 1 to 2): one replica starts in 1.8 to 3.5 s, three in 3.7 to
// 4.3 s, four in 4.6 to 5 s, most of it initdb and pg_basebackup (one
// base backup takes about 1 s there; under a load of 6 the figures
// double).
//
// The names are Aurora's (an RDS Multi-AZ DB cluster's have the same
// shapes), in a fake DNS ([Cluster.Resolver], from fakes/bluegreentest)
// read through a client-side cache with a TTL ([Cluster.Cache], what
// [Cluster.PoolConfig] uses): the cluster (writer) endpoint
// NAME.cluster-ACCOUNT.REGION.rds.amazonaws.com, the reader endpoint
// NAME.cluster-ro-…, and the instance endpoints NAME-1.ACCOUNT… and
// NAME-2.ACCOUNT… (NAME-3 with a second replica, and so on), which never
// move. The resolver answers "ip:port".
//
// # Readers
//
// The reader endpoint answers like Aurora's: each lookup answers one
// reader at random among the readers in the topology
// ([bluegreentest.Resolver.Pick]; Config.Seed makes the sequence
// reproducible), the writer when there is none. [Cluster.Cache] keeps one
// answer per name for Config.TTL (5 s by default, as Aurora's), so a pool
// that opens its connections within one TTL piles them on one reader; a
// negative TTL turns the cache off and each connection draws again.
// [Cluster.Resolver].Addrs lists every reader behind the endpoint.
//
// At run time:
//
//   - [Cluster.AddReader] makes a new standby by pg_basebackup from the
//     current writer and returns once it streams and replays the topology
//     that lists it, with its instance endpoint in the DNS and its address
//     behind the reader endpoint.
//   - [Cluster.RemoveReader] takes a reader out of the topology, the reader
//     endpoint and the DNS, then stops it (fast: its clients get 57P01).
//   - [Cluster.CrashReader] kills one (immediate shutdown) and
//     [Cluster.HangReader] stops its processes (SIGSTOP; resumed by
//     RemoveReader or Close). Both leave it in the topology, its row
//     unchanged, and behind the reader endpoint, as Aurora does until it
//     detects the failure; the simulator detects nothing: RemoveReader is
//     the detection. [Cluster.RecoverReader] brings it back (started
//     again, or resumed), a streaming standby of the current writer, as
//     Aurora restarts a failed reader.
//   - [Cluster.SetLag] makes a reader lag: replica_lag_in_msec reports the
//     lag (Aurora) and the reader applies each commit that late
//     (recovery_min_apply_delay), so its reads are really stale. It still
//     flushes WAL at once, so it still counts for synchronous commits, and
//     its promotion applies what it holds: an acknowledged commit survives
//     a failover whichever standby is promoted.
//   - [Cluster.Readers] lists the readers in the topology and
//     [Cluster.Connections] counts a user's client backends on a server
//     (pg_stat_activity), to see how a pool spreads.
//
// A reader that crashed, hung or was removed is no longer a standby: the
// simulator's topology changes do not wait for it, and when no standby is
// left the writer stops waiting for one (synchronous_standby_names
// emptied) and commits alone until AddReader gives it one again; a
// failover then has none to promote.
//
// # TLS
//
// With Config.TLS every server presents a certificate from a throwaway CA
// ([Cluster.CAFile]) naming the cluster's endpoints, and [Cluster.DSN]
// verifies endpoint names; see Config.TLS.
//
// # Topology
//
// Config.Engine chooses what the servers publish about the cluster. With
// [Aurora] (the default) every server has pg_catalog.aurora_replica_status()
// (server_id, session_id — MASTER_SESSION_ID for the writer —,
// last_update_timestamp, replica_lag_in_msec, cpu) and
// aurora_db_instance_identifier(); with [MultiAZ], instead, an RDS
// Multi-AZ DB cluster's schema rds_tools (see MultiAZ). Both engines read
// one control table the simulator writes on the writer; the standbys, read-only, read the same rows, replicated
// physically like any others (a file or a setting would need the simulator
// to write every server, and a table is what survives a promotion). After
// each write the simulator waits until every standby has replayed it, so
// that the writer and its standbys name the same writer. A server's own ids
// are the settings holdfast.server_id and holdfast.dbi_resource_id in its
// own configuration file, which is not replicated.
//
// # Failover
//
// [Cluster.Failover] plays a [Scenario]: the writer goes down ([Crash],
// [Graceful], [Hang]), the replica is promoted after Scenario.Detect, the
// topology names it, the cluster endpoint moves to it Scenario.DNSLag after
// the promotion, and with Scenario.Rejoin the old writer comes back as a
// synchronous standby (a fresh pg_basebackup; pg_rewind would need
// full_page_writes, which the harness turns off for speed), behind the
// reader endpoint, refusing writes with 25006. [Failback] fails over and
// back. Each step is an [Event] with its time, for a timeline.
//
// Measured on two shared cores with Detect 200 ms and DNSLag 1 s: the
// writer is down 0 to 0.1 s after the start, the replica takes writes 0.3 s
// later, the DNS moves at 1.4 s and the old writer is back as a reader at
// 2.0 to 2.5 s (a pg_basebackup of an almost empty cluster). [DemoScenario]
// scales the waits to a demo: 2 s to detect, 10 s of DNS lag.
//
// The simulation bites a plain pgxpool on the cluster endpoint: during the
// DNS lag its connections are refused (crash, graceful) or hang (hang), and
// when the old writer is back as a reader before the client's cached DNS
// answer expires, the pool connects to it and its writes fail with 25006
// for as long as it keeps those connections (see the Example).
//
// # Global database
//
// [StartGlobal] starts a [Global]: an Aurora Global Database of two
// Regions, each a cluster of its own names and hash, the secondary
// replicating asynchronously with a real lag, Aurora's global status
// functions on every server, and a global writer endpoint;
// [Global.Switchover] and [Global.Failover] (with data loss) play
// Aurora's two operations. See Global.
//
// # Limits
//
//   - At most MaxReplicas (8) readers at once, at Start or after AddReader.
//   - The topology's last_update_timestamp is the time of the simulator's
//     last change for every row: it does not advance on its own, and a
//     crashed reader's row does not age differently from the others.
//   - With Engine MultiAZ the lag is not in the topology (RDS publishes
//     none there); pg_stat_replication.replay_lag on the writer shows the
//     real one.
//   - A lagging reader sees the topology's changes up to its lag late;
//     SetLag(id, 0) waits until it has caught up.
//   - Engine MultiAZ publishes the three topology functions of rds_tools
//     and nothing else of it: no extension to CREATE, no blue/green columns
//     in show_topology. A real Multi-AZ DB cluster has two readers, and a
//     commit waits for either (Replicas 2 here); with Replicas 1 it waits
//     for the only one.
//   - No IAM: the superuser with trust authentication; any password is
//     accepted, so a client's IAM tokens are never checked. TLS only with
//     Config.TLS, without client certificates, and one certificate for
//     every server started by Start rather than one per instance.
//   - A hung writer is fenced by stopping it as soon as it is resumed;
//     between the two it answers reads (stale) and cannot acknowledge a
//     write, since its synchronous standby is gone. A client that cancels
//     such a wait gets PostgreSQL's warning that the transaction committed
//     locally: that write is not acknowledged, and is lost with the old
//     writer's data directory.
//   - The new writer of a failover without Rejoin runs alone and commits
//     without waiting; the next failover fails (no standby).
//   - Real Aurora restarts every instance on a failover and moves the
//     reader endpoint too; here the reader endpoint moves with the cluster
//     endpoint, to the new writer, until the old writer is back.
//   - The simulator's own connections go to the instance addresses, not
//     through the DNS; only clients see the lag.
package failovertest
