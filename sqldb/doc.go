// Package sqldb gives database/sql code (sqlx, Bun, GORM, ent, goose, plain
// database/sql) the same protection as a holdfast pool: a *sql.DB whose
// every connection is a connection of a pgxpool configured by a
// holdfast.Factory, through pgx's stdlib.
//
//	f, err := holdfast.New(...)             // WithPasswordFunc, cloudsql.With, WithBlueGreen, ...
//	pool, err := f.NewPoolFromDSN(ctx, dsn) // the pool's first connection under the startup policy
//	db := sqldb.OpenDB(pool)                // pgx and database/sql code share one pool
//	defer db.Close()                        // leaves the pool open
//
// A service with database/sql code only builds both at once with [Open]
// (whose DB.Close closes the pool too).
//
// Every connection of the *sql.DB is acquired from the pool (as with
// pgx's stdlib.OpenDBFromPool), so everything holdfast does for the pool
// applies unchanged: a new connection's dial, password fetch and startup
// handshake are retried under the factory's policy and budget, fatal
// mistakes fail at once, and blue/green and failover routing hold,
// reroute and refuse before anything is sent. What Factory.Acquire adds —
// one request-scope retry of a 28P01 with a fresh password or token,
// which pgx does not try again inside a connect — applies too, to every
// *sql.DB of sqldb: the factory is found from the pool's config.
// database/sql itself retries an operation whose error is
// driver.ErrBadConn, which pgx's stdlib returns only when nothing was sent
// (pgconn.SafeToRetry): a statement refused on an old-blue connection
// outside a transaction runs again on another connection; inside a
// transaction, or on a held *sql.Conn, the caller gets the error and
// retries the transaction.
//
// [OpenReadWrite] is holdfast's read/write splitting (holdfast.ReadWrite)
// for database/sql: a *sql.DB on the cluster's writer endpoint and one on
// its reader endpoint, with Read, and holdfast.ReadYourWrites for a read
// that must see the caller's writes. [RunTx] is the factory's transaction
// runner over a *sql.DB.
//
// For tools that only take a driver name and a DSN, [RegisterDriver]
// registers a driver whose connection strings open holdfast pools.
//
// The driver connection of every sqldb *sql.DB is pgx's own *stdlib.Conn
// (the one pgx's stdlib.GetPoolConnector returns), over a connection
// acquired from the pool: in *sql.Conn.Raw, driverConn.(*stdlib.Conn).Conn()
// is the *pgx.Conn, as with pgx's driver.
//
// # Idle connections
//
// database/sql keeps the connections it is given idle, up to
// SetMaxIdleConns, and while it keeps one the pool counts it acquired: out
// of the pool's idle connections, its health checks and its Stat's idle
// count, and of what a drain (package readiness) waits for. So:
//
//   - A *sql.DB of [Open], [OpenDB] or [OpenReadWrite] keeps none
//     (SetMaxIdleConns(0), as pgx's stdlib.OpenDBFromPool sets): a
//     connection the application is done with goes back to the pool at
//     once, which keeps the idle ones and checks their health (MaxConnLifetime,
//     MaxConnIdleTime, HealthCheckPeriod, a ping after a second idle).
//   - One of sql.Open with a [RegisterDriver] driver, or of sql.OpenDB over a
//     [Connector], keeps database/sql's default of 2, since sqldb cannot set
//     it there: call db.SetMaxIdleConns(0) for the behaviour above.
//
// Whichever it is, a connection database/sql reuses — one it kept idle, or
// one it hands from an operation to another waiting for one under
// SetMaxOpenConns — is checked first as pgxpool's Acquire checks one: pgx's
// stdlib pings it if it was idle over a second (stdlib.OptionShouldPing
// decides otherwise), a connection older than the pool's MaxConnLifetime
// (counted from sqldb's first acquire of it) is destroyed, and the pool's
// PrepareConn runs — holdfast's (a connection to a server that just failed
// another, a cut writer, a reader to retire, the old blue instance: all
// destroyed) and then the application's own. A connection destroyed there
// is closed, and database/sql takes another (driver.ErrBadConn: it tries
// its idle connections, then a new one from the pool; like any bad
// connection, each takes one of database/sql's retries). When PrepareConn
// returns an error, the connection goes back to the pool and database/sql
// takes another: the operation fails with that error when the pool's
// Acquire returns it too. sqldb's check takes
// the place of stdlib.OptionResetSession, which is not called: reset a
// session in the pool's PrepareConn instead, which runs on every acquire
// and every reuse.
//
// # Closing
//
// DB.Close never waits for a connection the application still holds (a
// Rows, a Tx, a *sql.Conn), as database/sql does not. The pool that [Open],
// [NewConnector] or [RegisterDriver] built is closed before DB.Close
// returns when nothing is held; else its idle connections are closed at
// once, it acquires nothing more and its health check stops, and one
// goroutine of the Connector's finishes the close (pgxpool.Close, and
// Factory.ClosePool's stop of the pool's monitors) when the application
// releases the last connection it holds, and then ends.
//
// [PoolOf] returns the pgxpool under a *sql.DB of [Open] or [OpenDB] (nil
// once the DB is closed), so that code given only the *sql.DB can reach
// the pool: package readiness checks and drains a *sql.DB through it
// (readiness.DB). [Connector.Pool] returns a Connector's.
//
// With sqlx, pass "pgx" as the driver name to sqlx.NewDb so that it binds
// $1 placeholders; with ent, entsql.OpenDB(dialect.Postgres, db); with Bun,
// bun.NewDB(db, pgdialect.New()); with GORM, postgres.New(postgres.Config{
// Conn: db}); with goose, goose.UpContext(ctx, db, dir).
package sqldb
