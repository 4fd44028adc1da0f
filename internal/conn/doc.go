// Package conn is the engine of holdfast's factory: it builds the
// connections of a factory's pools — everything one connection goes
// through, from its password to the end of its handshake, whatever path
// of the pool asked for it (pool.Query, QueryRow, Exec, Begin, SendBatch,
// CopyFrom, Ping, Acquire, sqlc code, database/sql through sqldb) — and
// binds each pool config to its layers (pool.go), composed by
// internal/compose. The layers (blue/green and failover routing,
// eviction, the telemetry) learn what happens to a connection through
// their compose.Layer hooks and act on it through its handle
// (compose.Conn), and never reach into its state: they live in other
// packages, so the compiler keeps it so.
//
// How a connect is retried without wrapping the pool. pgxpool gives
// BeforeConnect a per-connection copy of the config, and pgconn's
// ConnectConfig (pgx v5.13, pinned by TestConnectOrder) works the
// config's Fallbacks like this:
//
//  1. it resolves every entry first — cc.Host, then each Fallbacks entry,
//     in order — with one LookupFunc call per entry that is not a Unix
//     socket directory, and builds one dial per address;
//  2. it then dials those in order through the config's DialFunc, one at a
//     time, each followed by its handshake; the first handshake that
//     completes ends the connect;
//  3. after a failure it goes on to the next dial, unless the failure was
//     28P01, 3D000 or 42501 (it stops), and its error joins the failure of
//     every dial, one line each: "address (host): cause".
//
// So the connector appends retry rounds to the connection's Fallbacks
// (copies of the entries there were) and gives it a DialFunc that knows,
// by counting its calls, which entry of which round it is dialing. At the
// start of each retry round it looks at why the previous round failed and
// either backs off and dials again (a transient failure of the handshake:
// 53300, 57P03, 57P01, a reset mid-handshake) or refuses without dialing
// (a fatal one). A last entry, on the connection's own host and never
// dialed, reports the retries' end when the last round's handshake
// failed, so that Factory.Acquire does not retry the connection again.
//
// Entries that will never be dialed would each be a line of pgx's error.
// So the connector makes the connection's first dial before pgconn starts
// (predial, at the end of BeforeConnect, after the user's hooks): it
// resolves every entry as pgconn will (and answers pgconn's lookups with
// the same results), dials the first address through the same path as
// any dial (admission, routing, the dial's retries), and hands the
// connection to pgconn's first dial. When that dial fails for good (a
// refused port, a missing socket, a timeout), no later entry is dialed,
// since every dial of a connection shares one allowance: the rounds are
// left out of the Fallbacks, and pgx's error is one line, the dial's
// cause with holdfast's clause (failure.go). Each attempt that reached a
// server is one line of the error; the number of attempts is said once,
// in the clause of the line that ends the retries; entries after the end
// say only that they were not dialed (a handshake's failure that pgconn
// does not stop at: a 28000, a TLS failure).
//
// Nothing is resent: no statement has been sent on a connection that is
// still being built.
package conn
