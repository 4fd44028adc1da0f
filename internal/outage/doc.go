// Package outage is the outage layer of a pool (holdfast.WithOutage): it
// tells a database that is down from a blip, holds the requests that need
// a new connection while it is down instead of letting each retry on its
// own, follows the database to a new address, and keeps a pool meant for
// writes off a server that is read-only (a demoted primary).
//
// # States
//
//	up       nothing held. Until the pool's first connection it stays up
//	         whatever fails: a pool that never connected is startup's
//	         (the startup policy bounds it), not an outage's.
//	suspect  a sign came (a failed dial or handshake, a server that shut
//	         a connection down, a reset, a 25006 from a server read-only
//	         by default, a retryable failure to get a token or a
//	         certificate, from the password function or an
//	         integration's dialer: the token source down): the prober
//	         checks at once; new connections and the connector's
//	         retries (of a dial, of a token fetch) wait for its verdict.
//	         A token source that is down is an outage too
//	         (CredentialsError): no new connection can be made, while
//	         the pool's connections, which need no new token, stay and
//	         serve.
//	down     the check failed too: "database down" is logged once
//	         ("token source down" when no token could be fetched), the
//	         pool's connections to the failed addresses are retired (idle
//	         ones closed, busy ones destroyed when next acquired), new
//	         connections wait for "back" within HoldFor and their context,
//	         and the prober checks with backoff: one connect per step,
//	         its own or, while a connect of the pool waits, that
//	         connect's (Config.Lead: see The prober).
//	waking   (WakeFor: holdfast.WithServerlessV2) a new connection of a
//	         pool that holds none, once armed: the database may have
//	         paused. The prober makes the one dial in flight, bounded by
//	         what is left of WakeFor rather than ProbeTimeout, and checks
//	         again at its pace while the database refuses (57P03, a refused
//	         or reset connect); new connections wait for it within WakeFor
//	         and their context. A check that connects ends it (up, nothing
//	         logged); at WakeFor the database is down.
//	back     a check connected (to a writable server, for a pool meant
//	         for writes): "database back" is logged with the downtime,
//	         every waiting connection goes on at once, the prober ends.
//	         An address the name no longer resolves to is left behind:
//	         its connections cut at once, those in use too (what they
//	         had in flight ends: compose.Cut), and a dial that a stale cache
//	         still sends there goes to the address that answered
//	         (Route), for a minute.
//
// # The prober
//
// One goroutine per pool, started when a sign comes and ended at the
// verdict "up" or at "back" (Close joins it); it runs one check at a time
// on a goroutine of its own, which it joins. A check resolves the pool's
// host afresh (the config's LookupFunc, else a resolver that caches
// nothing), then connects once through the pool's own dial (its TLS, its
// password or token, an integration's dialer, the user's DialFunc),
// bounded by the retry policy's AttemptTimeout, and, for a pool meant for
// writes, reads the server's role. While a check hangs (an address whose
// packets are dropped) the name is resolved again at each step, and a
// check to the new address starts at once.
//
// While the database is down and a connect of the pool waits
// (Config.Lead, the engine's), the step is that connect's instead: the
// first to wait at the step takes it and dials for real, through the
// connector (one dial in flight per pool: the others wait on it, and the
// prober waits for its result, within ProbeTimeout and a second). It ends
// the step at its handshake (Validate: back, or, for a read-only server,
// still down), at its connector's next Hold (its attempt failed: no
// verdict, the prober's last cause stays; it waits on, its HoldFor counted
// from its first wait), or when its socket closes with no sign of the
// database down (a server that answered with a refusal) or its connect
// ends with no retry to follow (compose.Layer.Ended: a failure its
// connector does not retry, its bounds spent): the next check is then the
// prober's own, which counts a server that answers as up. At back its
// connection is the pool's at once: the first resumed request makes one
// handshake, not the prober's and then its own. A connect whose attempt
// reached a server and failed there takes no more steps in that wait (each
// such failure uses one of the retry rounds of its pgx config). The prober
// checks itself when nothing waits (readiness and "database back" need no
// request), at the first sign (suspect), and when the name leads elsewhere
// while a step's connect is in flight.
//
// Its pace (internal/pace's Engine, the code the storm simulation's model
// of holdfast's defaults runs too, so that the fleet figures of
// internal/storm/RESULTS.md are this pace's) follows the demand (issue
// 30, item 5: polite by default):
//
//	while requests wait     1.1 checks per connect the pool was asked for
//	                        over the last 2 s, between every 100 ms and
//	                        every 2 s, ±20 %; after the outage's first
//	                        10 s, doubling to every 3 s, ±50 %
//	while nothing waits     doubling from 1 s to every 5 s, ±20 %
//
// The demand is what no retry would have dialed: each Acquire that starts
// while the database is not up and finds no idle connection (a pool-level
// tracer: compose.Layer.AcquireStart, one atomic load while up), each
// connect that begins waiting, and each request still waiting, counted
// as asking again every 2 s (the larger of the Acquires counted and the
// connects held: pgxpool queues Acquires behind the connects held, which
// ask for nothing new). A request that starts waiting asks the pace again
// (the sleep ends when it is now shorter, with the jitter drawn for it).
// So a fleet's checks stay within 1.3× the peak that no retry makes at 2
// requests a second per pod (RESULTS.md), where a steady check every
// 100 ms (pace.Steady, the engine's before) made 4.2×; a service of 4
// requests a second whose requests wait checks every 100 ms within a
// second or two (the waiting requests count), and resumes within about
// 120 ms of the server accepting again (TestOutageRestart); a service of
// a few workers that each wait for their request (a closed loop, which
// asks for nothing while it waits) is checked every 0.5 to 2 s, and
// resumes within that of the server accepting. A long outage costs a
// connect every 3 s per pool, and an idle pool's prober at most one
// every 5 s. A check of an address whose packets are dropped lasts its
// bound (3 s with the default policy): one connect at a time.
//
// # A pool meant for writes
//
// A pool is meant for writes unless its connection string says
// target_session_attrs=read-only, standby or prefer-standby, it is a
// reader pool of failover routing or one that failover routing keeps on
// its instance (failover.Pinned) while the cluster publishes a topology
// (without one, routing is off and the pool is this layer's to check, as
// without WithFailover), or its first connection reached a
// server in hot standby or read-only by default (a pool on a replica's
// own address). Such a pool refuses a new connection to a read-only server
// (Validate, like target_session_attrs=read-write, from the server's
// in_hot_standby and default_transaction_read_only, which PostgreSQL 14
// and later report at connect; one SHOW transaction_read_only round trip
// before 14) and holds until a writable server answers at its name. A
// 25006 on one of its connections from a server that reports itself read-
// only by default (not a transaction the application made read-only)
// retires the pool's connections to that server and checks the name. A
// server that reports no role (before 14) starts a suspicion instead: each
// connection to it made before the suspicion is checked once when next
// acquired (one SHOW transaction_read_only round trip, within a second),
// for a minute, at most one suspicion a second. A pool with
// target_session_attrs=standby or read-only retires, when next acquired, a
// connection whose server reported that it no longer is one (a map lookup
// per Acquire, for those pools only).
package outage
