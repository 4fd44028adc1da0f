// Package holdfast keeps pgx v5 pools — pgxpool, and database/sql over
// them — working through what managed PostgreSQL (Cloud SQL, RDS, Aurora)
// does to them: an IAM token fetch that answers 503 for a moment, a
// restart, dropped connections, a writer failover, a blue/green
// switchover. Real mistakes (no permission, no such database, bad SQL)
// still fail at once.
//
// Every connection error is classified Transient or Fatal from its type
// and code, never from its text. Only transient failures of a connection
// being built are retried, with a bounded, jittered backoff under a retry
// budget; no statement is ever sent twice. When nothing fails, holdfast
// adds one atomic load to an Acquire.
//
// # Wiring
//
// Only the constructor changes:
//
//	f, err := holdfast.New()                // one factory per database; the defaults are safe
//	defer f.Close()
//	pool, err := f.NewPoolFromDSN(ctx, dsn) // was: pgxpool.New(ctx, dsn)
//	db := sqldb.OpenDB(pool)                // was: stdlib.OpenDBFromPool(pool)
//
// Code on the pool (Query, Exec, Begin, SendBatch, CopyFrom, sqlc) and on
// db is unchanged and protected. For hooks of your own, parse the config
// and call [Factory.NewPool] (was: pgxpool.NewWithConfig). A first
// connection that fails is a [*ConnectError]; [Factory.Classify] says
// whether to try again.
//
// # Where each concern lives
//
//   - Pools: [Factory.NewPoolFromDSN], [Factory.NewPool] (or
//     [Factory.Configure] and [Factory.Start] around pgxpool.NewWithConfig);
//     [PoolName] names one in logs, metrics and readiness.
//   - A password the server refused, retried with a fresh one:
//     [Factory.Acquire], and [Factory.DBTX] for sqlc (db.New(f.DBTX(pool))).
//   - Transactions run again only when nothing committed: [Factory.RunTx];
//     [ErrOutcomeUnknown] when a COMMIT's answer was lost.
//   - Read/write splitting: [Factory.NewReadWrite], [ReadYourWrites].
//   - database/sql, sqlx, GORM, Bun, ent, goose: package [sqldb].
//   - What is retried: package [classify]; backoff and budget: [retry].
//   - Cloud SQL, RDS IAM, AWS Secrets Manager: an [Integration] from
//     package [cloudsql], [rdsiam] or [rdssecrets].
//   - Blue/green switchovers: [WithBlueGreen] and package [bluegreen];
//     writer failover and reader pools: [WithFailover] and [failover].
//   - A database that is down (a restart, a DNS-only failover, a demoted
//     primary): [WithOutage], on by default; [ErrDatabaseDown].
//   - An Aurora Serverless v2 instance that pauses when idle:
//     [WithServerlessV2].
//   - Readiness probes, drains and graceful shutdown: package [readiness].
//   - Tests: package [fakes] (scripted failures, throwaway servers).
//
// The repository's [guide] says what happens on each pool path, and
// covers retries, pool sizing, metrics, spans and log lines.
//
// # Options
//
//	option              default                                  governs
//	WithRetryPolicy     retry.Default(): 3 attempts, 100ms→1s    a connection's dials and handshakes; Acquire
//	WithStartupPolicy   5 attempts, 200ms→2s, 30s overall        a pool's first connection
//	WithTxPolicy        3 runs, 20ms→200ms, 10s overall          RunTx's re-runs
//	WithRetryBudget     relative to demand, 20 tokens, per factory every retry of the factory's pools but startup's
//	WithConnectLimit    max(2, MaxConns/4) connects in flight    a pool's new connections
//	WithOutage          on, HoldFor 30s                          a pool whose database is down: hold, follow, leave a demoted primary
//	WithServerlessV2    off                                      Aurora Serverless v2 at 0 ACU: idle pools let go, a single-flight wake
//	WithPasswordFunc    the connection string's password         a fresh password or IAM token per connection
//	WithIntegration     none (cloudsql.With, rdsiam.With, ...)   a dial, credentials, rules, policies
//	WithClassifier      none                                     rules before the built-in ones
//	WithBlueGreen       off                                      RDS/Aurora blue/green switchover routing
//	WithFailover        off                                      Aurora/RDS writer failover, reader routing
//	WithLogger          discard                                  the log lines
//	WithMeterProvider   the global provider                      metrics
//	WithTracerProvider  the global provider                      spans
//	PoolName            "host:port/database"                     one pool's name (a PoolOption)
//	PoolInstanceMode    failover.Config.InstancePools            one pool on an instance endpoint
//
// [guide]: https://github.com/holdfast-db/holdfast/blob/main/docs/guide.md
// [sqldb]: https://pkg.go.dev/github.com/holdfast-db/holdfast/sqldb
// [cloudsql]: https://pkg.go.dev/github.com/holdfast-db/holdfast/cloudsql
// [rdsiam]: https://pkg.go.dev/github.com/holdfast-db/holdfast/rdsiam
// [rdssecrets]: https://pkg.go.dev/github.com/holdfast-db/holdfast/rdssecrets
// [readiness]: https://pkg.go.dev/github.com/holdfast-db/holdfast/readiness
// [fakes]: https://pkg.go.dev/github.com/holdfast-db/holdfast/fakes
package holdfast
