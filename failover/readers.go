package failover

import (
	"time"
)

// ReaderConfig configures reader routing: how the pools on the cluster's
// reader endpoint (NAME.cluster-ro-…, or an alias of it in Config.Aliases)
// spread their connections over the readers of the topology.
//
// Aurora's reader endpoint answers each DNS lookup with one reader at
// random, cached 5 s: a pool that opens its connections at once piles
// them on one reader, a reader added later gets none until connections
// are recycled (MaxConnLifetime), and a removed reader's connections fail
// until pgx notices. A pool on the reader endpoint dials instead, for each
// new connection, a reader of the monitor's topology, by address: TLS
// verify-full still checks, and an IAM token is still issued for, the
// endpoint name. A new pool's first dials wait for the monitor's first
// topology read (at most 3 s, then by DNS); with the topology unreadable
// (Status.Off) they go by DNS.
//
// When readers join the topology (or one comes back, or catches up), each
// reader pool closes its surplus idle connections beyond the fair share
// (rounded up) of the busiest readers, once, and retires the surplus in
// use when next acquired (within 30 s): the pool's new ones go to the new
// readers, without waiting for MaxConnLifetime. pgxpool dials them when
// the load needs one or at its next health check, which restores MinConns
// (HealthCheckPeriod, 1 min by default): a pool whose load fits in fewer
// connections than MinConns may run on fewer until then. A
// reader that leaves has its connections cut at once, as every instance
// that leaves. Both are seen at the monitor's next topology read, every
// RefreshInterval while a reader pool is open. Connections are not reads:
// pgxpool hands out the idle connection released last, so size MaxConns
// near the concurrency for reads as even as the connections.
//
// Reader health: a crashed or hung reader stays in the topology and behind
// the reader endpoint until Aurora detects it. While the monitor serves a
// pool with reader routing (Strategy not ByDNS), it pings every reader
// each Config.HeartbeatInterval on a connection of its own per reader (as
// the pool's user), each ping bounded by Config.FailureTimeout; while
// probing a failover, its probes read every reader instead, each
// FastInterval. A reader
// whose ping fails is dialed again at once: it is down when that fresh
// connection is refused, reset or times out, or fails with SQLSTATE class
// 57 — not for an authentication error. A crashed reader is so found down
// at once, a hung one within HeartbeatInterval + 2×FailureTimeout (1 s).
// A reader down gets no new connection, and every pool of the cluster cuts
// its connections to it at once: the statements in flight there fail with
// a *CutError that names it, Transient like every cut, rather than at
// their own timeout. Once a fresh connection and a ping to it succeed
// again (tried about once a second), it is back: new connections go to it
// again and the reader pools rebalance onto it.
//
// The choice is made per dial, not per Acquire: a reader pool's Acquire +
// Release costs what plain pgxpool's does (BenchmarkReaderPaired, 3 real
// readers, pools of 6: 1.016–1.020×, 0 allocations; through
// Factory.Acquire 1.03×; HOLDFAST_REQUIRE_PG=1 go test -run '^$' -bench
// ReaderPaired -count 3 ./failover/).
//
// Measured (two shared cores): TestReaderRouting, 3 readers, 12
// connections opened at once, RefreshInterval 500 ms: holdfast 4/4/4
// (max/min 1.00), plain pgxpool 12/0/0 through the simulator's 5 s DNS
// cache; a fourth reader added holds its 3 connections 1 s after AddReader
// returns (3/3/3/3); a reader removed under a read load of 4 workers: its
// connections cut, 0 reads failed. TestReaderMaxLag: a reader lagging 3 s
// with MaxLag 1 s gets none of 6 new connections; with both lagging, the
// pool connects to the writer, and with Hold fails with a *HoldError
// (Reader true).
// TestReaderHealth (3 readers, a pool of 9, 4 workers reading, each read
// tried once with a 5 s timeout, default timings, -race, three runs, times
// from the call of the simulator's crash or hang;
// HOLDFAST_REQUIRE_PG=1 go test -race -run TestReaderHealth -v ./failover/): a
// crashed reader found down 51–217 ms after the crash, no worker paused
// more than 60–209 ms, 1 of 5,000–29,000 reads failed (in flight on it:
// EOF); a hung reader found down 0.90–1.05 s after the hang, its 1–2 reads
// in flight ended then with the CutError (not at their 5 s timeout), no
// worker paused more than 0.90–0.98 s, 0 other reads failed of
// 17,000–31,000. A plain pgxpool under the same hang: its reads on the hung
// reader stuck until their timeout (2 s in the test).
//
// Against the AWS JDBC wrapper's readWriteSplitting plugin and its host
// selection strategies (and the AWS Go wrapper's port, PR #198):
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
//     each topology refresh: a lagging reader gets no new connection and
//     the pool's connections to it are retired, so no read is served there
//     once the lag is read (TestReaderLagRetires; examples/readers: 0 reads
//     after MaxLag + one refresh, against plain pgxpool's hundreds).
//   - No usable reader. JDBC falls back to the writer (PR #356; a strict
//     mode without fallback is an open request, #1324); the Go wrapper
//     too. holdfast: the writer (the default) or Hold, bounded by
//     HoldTimeout and the caller's context, then a *HoldError (Reader true).
//   - A reader that joins. JDBC: chosen at the next setReadOnly once the
//     topology is refreshed; a cached reader connection stays where it is
//     (cachedReaderKeepAliveTimeoutMs 0: forever). holdfast: at the
//     refresh that lists it, the busiest readers' surplus connections are
//     retired and the pool's new ones go to it (its full share about a
//     second after it is listed, TestReaderRouting and examples/readers).
//   - A reader that leaves, crashes or hangs. JDBC: a failed connection
//     fails over (strict-reader or reader-or-writer) and its enhanced
//     failure monitoring finds a hung host in about 40 s with the
//     defaults. holdfast: connections to a reader that leaves the topology
//     are cut at once; reader health finds a crashed reader at once and a
//     hung one within 1 s, cuts its connections and routes new ones
//     elsewhere.
//   - Read-your-writes. Neither wrapper promises it: a reader trails the
//     writer by its lag. holdfast's ReadWrite helper sends a read that
//     must see the caller's own writes to the writer.
type ReaderConfig struct {
	// Strategy chooses the reader of each new connection:
	// LeastConnections (the default) or Random; ByDNS turns reader
	// routing off (the reader endpoint's DNS answer, as before).
	Strategy ReaderStrategy
	// MaxLag, when positive, leaves out of the choice a reader whose
	// replication lag (Aurora: replica_lag_in_msec) exceeds it, until it
	// catches up, and retires the reader pools' connections to it: idle
	// ones are closed at once, the others when next acquired (those in
	// use finish what they run; nothing fails). The lag is the one of the
	// monitor's last topology read (RefreshInterval below); the timeline
	// says "reader lagging" and "reader caught up". 0: lag is not
	// considered. RDS Multi-AZ DB clusters publish no lag in their
	// topology: MaxLag does not apply to them.
	MaxLag time.Duration
	// Hold is what a new connection does when the topology names no
	// usable reader (none, or every one lagging or down): false (the
	// default) connects it to the writer, as the reader endpoint itself
	// does with no replica; true holds it until a reader is usable, at
	// most HoldTimeout and the caller's context, then fails it with a
	// *HoldError (Reader true).
	Hold bool
	// RefreshInterval is how often the monitor reads the topology while
	// it serves a pool with reader routing, when shorter than
	// Config.RefreshInterval: a reader that joins, or starts or stops
	// lagging, is seen within it. Default 5 s, the reader endpoint's TTL.
	RefreshInterval time.Duration
	// HoldTimeout bounds the hold of Hold (the caller's context bounds it
	// too); then the connect fails with a *HoldError (Reader true).
	// Default 5 s.
	HoldTimeout time.Duration
}

// ReaderStrategy is how a reader pool's new connection chooses its reader.
type ReaderStrategy int

// The reader strategies.
const (
	// LeastConnections picks the reader with the fewest of this pool's
	// connections (those being dialed included), at random among ties.
	LeastConnections ReaderStrategy = iota
	// Random picks a reader uniformly at random.
	Random
	// ByDNS leaves the choice to the reader endpoint's DNS: no reader
	// routing (connections to a reader that leaves are still cut).
	ByDNS
)
