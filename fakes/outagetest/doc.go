// Package outagetest plays, on one machine and with real PostgreSQL
// servers, the outages of the database shapes that publish no topology:
// an RDS Multi-AZ DB instance failing over by DNS alone, a primary
// behind a DNS name or a VIP demoted to a read-only standby (Patroni, a
// self-managed pair), and an Aurora Serverless v2 instance that pauses
// when idle; a restart of one PostgreSQL is fakes/pgtest's
// [pgtest.Server.Shutdown] and [pgtest.Server.Restart]. They are for
// tests and demos of riding through those outages, with plain pgxpool as
// the control (the package's tests show each fault biting it).
//
// It is fakes/failovertest's sibling rather than a part of it: those
// shapes have no cluster, no topology and no reader endpoint, which
// failovertest's Cluster is made of, and their faults happen before the
// server (an address that drops packets, a VIP, an instance that holds a
// connection while it resumes). The servers are failovertest's
// (fakes/internal/pgnode: initdb through pgtest, pg_basebackup,
// synchronous streaming replication, promotion, TLS with a throwaway
// CA), the names live in fakes/bluegreentest's fake DNS with a
// client-side TTL cache, and the [Event] of each step is failovertest's.
// The servers run as the postgres OS user when the process is root.
//
// # Multi-AZ DB instance
//
// [StartMultiAZ] starts a [MultiAZ]: a primary (initdb) and a standby
// (pg_basebackup) in synchronous mode (a commit returns once the standby
// flushed it, so an acknowledged write survives a failover). The standby
// is not readable, as RDS's: hot_standby is off, and a connection to it
// is refused with 57P03. No server has a topology function
// (aurora_replica_status, rds_tools): the instance is known by one name,
// the endpoint NAME.ACCOUNT.REGION.rds.amazonaws.com, in the fake DNS
// ([MultiAZ].Resolver), read through a cache with a TTL ([MultiAZ].Cache,
// the LookupFunc of [MultiAZ.PoolConfig]). The servers' ids are their
// availability zones, REGIONa and REGIONb. With MultiAZConfig.TLS both
// present a certificate for the endpoint, and PoolConfig verifies it
// (verify-full by the name, whatever address it resolves to).
//
// Each server is reached through a front: a TCP forwarder in the test
// process, on the server's loopback address (127.0.0.11 and 127.0.0.21
// by default) and a port of its own, which the DNS answers
// ([MultiAZ.Addr]). [MultiAZ.Failover] plays a [FailoverScenario]:
//
//  1. The primary's address goes silent (EventSilent) and its server
//     shuts down unseen.
//  2. After Detect the standby is promoted (EventPromoted).
//  3. DNSLag after the promotion the endpoint's record moves to it
//     (EventDNS); RDS moves it 60 to 120 s after the failure.
//     [DemoFailover] moves it after 20 s.
//  4. With Rejoin the old primary comes back as the new standby
//     (EventRejoined), its address answering again.
//
// # Silent, not refused
//
// RDS drops the traffic to the old primary's address: a new connection's
// SYN is never answered (the client's dial hangs until its own timeout),
// and an open connection's reads hang until TCP gives up. Three ways to
// play that were weighed:
//
//   - SIGSTOP of the server (failovertest's Hang): the kernel still
//     completes the TCP handshake (while the listen backlog has room), so
//     a dial succeeds and the startup hangs.
//   - A toxiproxy in front with a timeout toxic of 0: the proxy accepts
//     too (the handshake completes, then nothing), and it discards what
//     passes, so the connection could not be resumed.
//   - A front that stops accepting and sets its listen backlog to 0 with
//     one connection of its own in the accept queue: Linux drops the SYN
//     of any connection to a listener whose accept queue is full. The
//     client's dial times out ("i/o timeout"), exactly as against an
//     address that drops packets; nothing is refused.
//
// The front is the one chosen: it is the only one whose new connections
// see what RDS's clients see. Its open connections are frozen: no byte
// passes either way and nothing is closed, the server's shutdown
// included; they end when the client closes them, and are reset when the
// address answers again (Rejoin) or at Close.
//
// # A demoted primary
//
// [StartPair] starts a [Pair]: a primary and a readable hot standby in
// synchronous mode, the primary known by a host name (PairConfig.Name,
// default DefaultPairName), the servers' ids "pg-1" and "pg-2".
// [Pair.Demote] plays a [DemoteScenario], a switchover as Patroni does
// one:
//
//  1. The primary shuts down fast (EventStopped): its clients get 57P01.
//  2. The standby is promoted (EventPromoted).
//  3. The old primary starts again as a hot standby of the new one
//     (EventRejoined; it follows the new timeline without a rewind, its
//     last WAL having reached the standby): new connections to it answer
//     reads, and writes fail with 25006.
//  4. NameLag after the promotion, never before step 3, the name moves to
//     the new primary (EventDNS). With Hold it stays on the demoted
//     server until [Pair.MoveName]: a pool that keeps its connections to
//     it fails every write with 25006, for days if nothing resets it
//     (gpustack #6105).
//
// With PairConfig.VIP the name resolves to a VIP instead: a TCP forwarder
// on one fixed address (127.0.0.31 by default, [Pair].VIP) that leads to
// the primary. It moves in step 4 (EventVIP): new connections go to the
// new primary, and those it relayed to the old one are reset, as when
// another host takes the address over. So a plain pool behind a VIP
// recovers after one failed request, and one behind a DNS name does not:
// the library needs both to show that evicting a demoted primary's
// connections works with and without a move of the name.
//
// # Aurora Serverless v2
//
// [StartServerless] starts a [Serverless] instance: a real server behind
// a front on the instance's address, its endpoint
// NAME.cluster-ACCOUNT.REGION.rds.amazonaws.com in the fake DNS. The
// instance pauses after AutoPause with no client connection (EventPaused;
// its server shuts down): the front counts its connections, and any of
// them keeps the instance awake, a monitor's or one still in its login
// too. A connection attempt to the paused instance is accepted and held,
// answered nothing (EventResuming, at the attempt), while the server
// starts again; once it accepts and Resume has passed since the first
// attempt, the held connections are relayed (EventResumed): the client
// sees a delay, not an error. With StartingUp each attempt during the
// resume is refused at once with FATAL 57P03 "the database system is
// starting up" instead, as some clients saw; an attempt after the resume
// connects. [Serverless.Paused], [Serverless.Pauses],
// [Serverless.Resumes], [Serverless.Conns], [Serverless.Events] and
// [Serverless.Changed] show its state.
//
// # Timings
//
// Measured on two shared cores at a load of 12 to 15 (other tests
// running). A start takes 5 to 9 s for a MultiAZ or a Pair (initdb and a
// base backup; TLS adds its check) and about 5 s for a Serverless
// instance when it runs alone, 7 to 15 s when the package's five tests
// start theirs at once; failovertest measured 1.8 to 3.5 s for the same
// work at a load of 1 to 2.
//
// A Multi-AZ failover with Detect 300 ms and DNSLag 1 s: silent at 0,
// the standby promoted at 0.55 to 1.2 s, the record moved 1 s later, the
// old primary back as the standby 0.8 to 1.4 s after that (started again
// as a standby: no base backup). A dial to the silent address ends with
// the client's own timeout (300 ms in the test). A demote: the primary
// down 0.2 to 1.1 s after the call (a fast shutdown), the standby
// promoted 0.15 to 0.7 s later, the old primary back as a hot standby 0.5
// to 1.7 s after that. A Serverless pause ends (its server down)
// AutoPause and 0.2 to 0.5 s after the last connection closed; a resume
// takes Resume, or the server's start when that is longer (1.0 to 1.8 s
// with Resume 1 s); a 57P03 refusal while paused takes 0 to 3 ms.
//
// Plain pgxpool, the control, in the package's tests: during a Multi-AZ
// failover each of its 3 to 5 requests (deadline 500 ms) from the silence
// to the DNS move hung until its deadline, and writes went through again
// 0.37 to 0.66 s after the move (a TTL of 200 ms). After a demote with
// the name held, its writes failed with 25006 (reads went through); once
// the name moved and the cache expired, 10 writes of 10 still failed on
// the connection it keeps, while a new pool wrote. Behind a VIP, one
// request failed on the reset connection after the move and the next
// went through, 0.1 to 0.25 s after it. A Serverless instance did not
// pause in 5 times AutoPause while the pool held an idle connection;
// once the pool closed, it paused, and a new pool's first request took
// 1.1 to 2.2 s with Resume 1 s, and succeeded.
//
// The package's tests take 33 to 39 s there (the race detector
// included), most of it the servers' starts.
//
// # Limits
//
//   - Linux: the silence relies on Linux's handling of a full accept
//     queue and of listen(2) on a listening socket, and pgnode signals
//     servers through /proc.
//   - The fronts and the VIP run in the test process: their connections
//     cost two goroutines each, and what passes through them is copied.
//     A server refused behind a front or the VIP is a reset connection
//     to the client (the front accepted it first), not a refusal.
//   - A frozen connection is acknowledged by the loopback kernel: unlike
//     a real dropped one, TCP keepalive and TCP_USER_TIMEOUT do not end
//     it; the client's own deadlines do.
//   - One standby, as on RDS (a Multi-AZ DB instance) or in a two-node
//     Patroni; a commit waits for it while it streams. After a Multi-AZ
//     failover without Rejoin the new primary commits alone and a second
//     failover fails.
//   - The Multi-AZ failover's steps are RDS's as clients see them; its
//     detection, and the events and reboot notices RDS publishes, are
//     not simulated. The demote is Patroni's switchover, not its
//     failover: the old primary shuts down cleanly and no write is lost;
//     no leader lock, no fencing, no pg_rewind.
//   - A Serverless instance pauses with no client connection at all,
//     where Aurora counts only the connections "initiated by user
//     activity"; it has no ACU scaling, no Data API and no TLS. Its
//     server resumes with a fresh start (shared buffers empty), as
//     Aurora's does.
//   - No IAM: the superuser with trust authentication.
package outagetest
