// Package sqldb gives database/sql code (sqlx, Bun, GORM, ent, goose, plain
// database/sql) the same protection as a holdfast pool: a *sql.DB whose
// every connection is a connection of a pgxpool configured by a
// holdfast.Factory, through pgx's stdlib.
//
//	f, err := holdfast.New(...)           // WithPasswordFunc, cloudsql.With, WithBlueGreen, ...
//	cfg, err := pgxpool.ParseConfig(dsn)
//	db, err := sqldb.Open(ctx, f, cfg)    // the pool's first connection under the startup policy
//	defer db.Close()                      // closes the pool too
//
// Every database/sql operation acquires a connection from the pool (as
// pgx's stdlib.OpenDBFromPool does), so everything holdfast does for the
// pool applies unchanged: a new
// connection's dial, password fetch and startup handshake are retried
// under the factory's policy and budget (a 503 from a token endpoint, 53300,
// 57P03, a reset mid-handshake; a 28000 once with a fresh token or dial),
// fatal mistakes fail at once, and blue/green routing holds and reroutes
// connects and refuses statements on connections to the old blue instance
// before anything is sent. database/sql
// itself retries an operation whose error is driver.ErrBadConn, which pgx's
// stdlib returns only when nothing was sent (pgconn.SafeToRetry): a
// statement refused on an old-blue connection outside a transaction runs
// again on another connection; inside a transaction, or on a held *sql.Conn,
// the caller gets the error and retries the transaction.
//
// What Factory.Acquire adds — one request-scope retry of a 28P01 with a
// fresh password or token, which pgx does not try again inside a connect —
// applies too, to a *sql.DB from [Open] or [RegisterDriver]
// (Factory.Reacquire); [OpenDB] and [NewConnector], which are given a pool
// and no factory, have every other retry.
//
// [OpenReadWrite] is holdfast's read/write splitting (holdfast.ReadWrite)
// for database/sql: a *sql.DB on the cluster's writer endpoint and one on
// its reader endpoint, with Read, ReadTx and WriteTx, and
// holdfast.ReadYourWrites for a read that must see the caller's writes.
//
// For tools that only take a driver name and a DSN, [RegisterDriver]
// registers a driver whose connection strings open holdfast pools.
//
// database/sql keeps no idle connection of a sqldb *sql.DB, whatever its
// constructor and SetMaxIdleConns: a connection the application is done
// with goes back to the pool, which keeps the idle ones and checks their
// health (the driver connection, a [Conn], reports itself not valid for
// reuse). So database/sql never reuses a connection and stdlib's
// OptionResetSession and OptionShouldPing are not called; in
// *sql.Conn.Raw the driver connection is a *[Conn] (its Conn method
// returns the *pgx.Conn), not a *stdlib.Conn.
//
// DB.Close never waits for a connection the application still holds (a
// Rows, a Tx, a *sql.Conn), as database/sql does not: the pool's idle
// connections are closed at once, and the pool that [Open],
// [NewConnector] or [RegisterDriver] built is closed when the last held
// connection is released.
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
