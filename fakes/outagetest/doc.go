// Package outagetest plays, on one machine and with real PostgreSQL
// servers, the outages of the database shapes that publish no topology,
// for tests and demos of riding through them with plain pgxpool as the
// control (the package's tests show each fault biting it):
//
//   - [MultiAZ]: an RDS Multi-AZ DB instance whose [MultiAZ.Failover]
//     makes the primary's address silent, promotes the standby (not
//     readable: 57P03) and moves the endpoint's DNS record after a lag.
//   - [Pair]: a primary behind a DNS name or a VIP whose [Pair.Demote]
//     restarts it as a read-only standby (writes fail with 25006) and
//     moves the name after a lag, or only at [Pair.MoveName].
//   - [Serverless]: an Aurora Serverless v2 instance that pauses with no
//     client connection and holds a connection attempt while it resumes.
//
// A restart of one PostgreSQL is [pgtest.Server.Shutdown] and
// [pgtest.Server.Restart]. The servers are fakes/failovertest's
// (synchronous streaming replication, promotion, TLS with a throwaway
// CA), the names live in fakes/bluegreentest's fake DNS with a
// client-side TTL cache, and each step is an [Event] with its time.
// The servers run as the postgres OS user when the process is root.
//
// Silent, not refused: RDS drops the traffic to a failed primary's
// address, so a dial hangs until the client's own timeout. Each server
// of a MultiAZ sits behind a front (a TCP forwarder in the test process)
// that, to go silent, stops accepting with a full accept queue and a
// backlog of 0: Linux then drops every new SYN. SIGSTOP of the server or
// a toxiproxy timeout toxic would both complete the TCP handshake, which
// RDS's clients do not see.
//
// Measured on two shared cores at a load of 12 to 15: a start takes 5 to
// 9 s (initdb and a base backup); a Multi-AZ failover with Detect 300 ms
// and DNSLag 1 s promotes the standby at 0.55 to 1.2 s; a demote takes
// 0.4 to 3.5 s to the old primary back as a standby; a Serverless resume
// takes Resume or the server's start, whichever is longer (1.0 to 1.8 s
// with Resume 1 s). The package's tests take 33 to 39 s there.
//
// Limits: Linux only (the silence relies on its accept queue); the fronts
// run in the test process and a frozen connection is acknowledged by the
// loopback kernel (TCP keepalive and TCP_USER_TIMEOUT do not end it, the
// client's deadlines do); one standby; the failover's detection and RDS's
// events are not simulated, and the demote is a clean switchover (no
// fencing, no pg_rewind); a Serverless instance counts every connection,
// where Aurora counts only those of user activity, and has no TLS; no
// IAM (trust authentication).
package outagetest
