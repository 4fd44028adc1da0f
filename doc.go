// Package holdfast keeps pgx v5 pools — pgxpool, and database/sql through
// package sqldb — working through what managed PostgreSQL (Cloud SQL, RDS,
// Aurora) does to them: an IAM token fetch that answers 503 for a moment, a
// restart, dropped connections, a blue/green switchover. Real mistakes (no
// permission, no such database, bad SQL) still fail at once.
//
// Every connection error is classified Transient or Fatal from its type and
// code, never from its text (package classify). Only transient failures of
// a connection being built are retried, with a bounded, jittered backoff
// (package retry) under a retry budget. No statement is ever sent twice.
//
// # Switching a service over
//
// Only the pool's constructor changes. A pgxpool service:
//
//	f, err := holdfast.New()             // options below; the defaults are safe
//	cfg, err := pgxpool.ParseConfig(dsn) // your own hooks on cfg, as before
//	pool, err := f.NewPool(ctx, cfg)     // was: pgxpool.NewWithConfig(ctx, cfg)
//	// pool.Query, QueryRow, Exec, Begin, SendBatch, CopyFrom, Ping, Acquire
//	// and sqlc code on the pool are unchanged, and all of them are protected.
//
// A database/sql service (plain database/sql, sqlx, GORM, Bun, ent, goose):
//
//	db, err := sqldb.Open(ctx, f, cfg) // was: sql.Open("pgx", dsn)
//
// [Factory.NewPool] configures cfg ([Factory.Configure]), builds the pool
// and makes its first connection under the startup policy. If that fails it
// returns a [*ConnectError] of Layer "startup". Code that builds its pools
// itself calls Configure before pgxpool.NewWithConfig and [Factory.Start]
// after it.
//
// # What happens on every pool path
//
// Configure composes holdfast's layers with the hooks already on the
// config. Each layer is one concern; they compose in one declared order,
// outermost first, and your hooks run after holdfast's; none is replaced.
// A layer that is off adds nothing:
//
//	layer      BeforeConnect                    PrepareConn (every Acquire)       where
//	telemetry  connect span and metrics         —                                 internal/conn, internal/obs
//	bluegreen  hold, refuse, substitute names   hold during IN_PROGRESS, drop     internal/bgroute
//	failover   hold by the writer endpoint      drop a connection to a dead       internal/failovermon
//	                                            writer
//	eviction   —                                drop connections to a server      internal/evict
//	                                            that just failed or was left
//	connect    a fresh password; the connector  —                                 internal/conn
//	           builds every dial of the
//	           connection
//	user       your BeforeConnect               your PrepareConn (or the          your config
//	                                            deprecated BeforeAcquire)
//
// The tracers nest in the same order (telemetry's around blue/green's
// around yours); AfterRelease gets blue/green's check before yours, and
// only when you set one (pgxpool starts a goroutine per Release when one
// is set). Blue/green outranks failover: while a switchover routes the
// pool, failover routing stands down. Where each part lives:
//
//	holdfast                  the face: Factory, options, errors, RunTx, DBTX, ReadWrite
//	└─ internal/conn          the engine: a factory's pools, their bindings, the connector
//	   └─ internal/compose    the one composer: the layer contract, the order, the precedence
//	      ├─ internal/bgroute      the blue/green router and monitors  (public: package bluegreen)
//	      ├─ internal/failovermon  the failover monitor, writer and reader routing  (public: package failover)
//	      └─ internal/evict        the eviction
//	classify, retry           the ground floor: verdicts from types and codes, bounded retry
//
// The connector gives each connection its dial, wrapping the
// integration's (Integration.Dial, cloudsql.With), else the config's
// DialFunc, else pgx's; the layers learn of the connection's dials,
// handshake and failures through their hooks, and act on it through a
// narrow handle (its server, when it was made, abort it), never its state.
// A pool finds its layers again from its config ([Factory.BlueGreen],
// [Factory.Failover]), however it was built.
//
// pgxpool builds every connection through these hooks, whatever asked for
// it, so a new connection is protected on every path:
//
//   - a password or token fetch that fails transiently is fetched again;
//   - a dial is retried after a refused or reset connection, a timeout, or
//     a transient error of the integration's dialer (a token endpoint or
//     Admin API answering 503);
//   - the startup handshake is retried on a fresh dial after a transient
//     answer from the server (53300 too many connections, 57P03 starting
//     up, 57P01 and 57P02 shutdown, 08xxx) or a reset in mid-handshake;
//   - an authentication failure (28000) gets one more attempt, with a fresh
//     token (WithPasswordFunc, rdsiam.With; during a blue/green
//     switchover, signed for the other of the green and blue names) or on a
//     fresh dial (cloudsql.With). A second failure is Fatal;
//   - a host name whose lookup fails transiently (a DNS timeout) is looked
//     up again;
//   - a Fatal failure (a missing role, 3D000, 42501, a TLS verification
//     failure, anything unknown) is tried once.
//
// All the dials of one connection share one allowance of the retry
// policy's MaxAttempts: pgx dials twice with sslmode=prefer, once per
// address of a host name, and again for each handshake retry. The policy's
// MaxElapsed bounds all of them together. Each attempt (dial, TLS and the
// handshake) is bounded by the policy's AttemptTimeout. pgxpool builds
// connections detached from the caller's cancellation, so without that
// bound a silent server would hold a pool slot. A connection whose retries
// ran out fails with a [*ConnectError] that wraps a *retry.Error.
//
// [Factory.Acquire] is pool.Acquire plus a request-scope retry of what the
// connection layer leaves over. With a password function, it retries an
// authentication failure 28P01 once with a fresh token (pgx reports 28P01
// without trying again). It retries any other transient failure that
// reaches it unretried. A failure
// already retried below it is returned as it is, so retries never multiply
// across layers. [Factory.Start], and so NewPool and sqldb.Open, retries the
// first connection under the more patient startup policy. It does retry a
// connection whose own retries ran out. A *sql.DB from package sqldb
// acquires its connections from the pool, so it has the same protection,
// and every one of package sqldb retries a failed acquire
// as Factory.Acquire does. Code that runs
// statements on the pool itself (sqlc's generated code through its DBTX
// interface, pool.Query) gets the connect layer's retries but not that
// request-scope one: give it [Factory.DBTX] instead of the pool
// (db.New(f.DBTX(pool))), whose Exec, Query, QueryRow, CopyFrom,
// SendBatch and BeginTx take their connection through Factory.Acquire.
// database/sql also runs a statement again after driver.ErrBadConn, which
// pgx's stdlib returns only when nothing was sent.
//
// A hook replaced after Configure is reported, not silently bypassed.
// Start and NewPool return a [*ConfigError] when the factory's connect
// layer did not run for the pool's connection: BeforeConnect was replaced,
// or the factory never configured the pool. A DialFunc replaced after
// Configure fails the connect with a *ConfigError. Set your hooks before
// Configure.
//
// # Dead connections
//
// A connection whose server vanished without closing it (a failover, a
// NAT or load-balancer idle timeout, a security-group change) is found in
// seconds, not the kernel's 15 minutes:
//
//   - every TCP socket a pool dials gets keepalive probes after 5 s of
//     silence, every second, 3 of them (an idle dead connection fails
//     within 8 s), and, on Linux, TCP_USER_TIMEOUT of 5 s (a request whose
//     data is not acknowledged fails within 5 s);
//   - a connection closed after a failed or canceled query spends at most
//     1 s on its cancel request and on draining the socket, where pgx
//     spends up to 15 s while the pool keeps its slot;
//   - a network failure of one connection (a reset, a broken pipe, a
//     timeout of unacknowledged data, the server closing), or a cancel
//     request its server does not answer, presumes the pool's older
//     connections to that server dead: they are destroyed when next
//     acquired, and new ones are made instead.
//
// Measured by the fault suite (a real proxy that silently stops passing
// data of established connections while new ones reach the server): the
// first request succeeds again 2.0 s after the drop through holdfast, 16.0
// s through plain pgxpool.
//
// A server that stops answering without breaking its sockets (a hung
// writer: the kernel still acknowledges the data) is found only by asking
// it: on Aurora and RDS Multi-AZ DB clusters, WithFailover's monitor pings
// the writer and finds it down within 1 s, then cuts the pool's
// connections to it as soon as another instance is confirmed as the writer
// (package failover).
//
// # Transactions, and what was in flight
//
// holdfast never sends a statement twice. When a connection fails, what it
// had in flight decides what the caller gets, on every pool path (pool.Exec,
// a pgx.Tx, a batch, CopyFrom, database/sql through sqldb) and whatever
// broke it (a reset, a server that closed, a *failover.CutError, a
// bluegreen drop):
//
//	in flight when the connection failed   the caller gets                        safe to run again        AWS JDBC wrapper
//	nothing: refused before it was sent     the cause, Transient (SafeToRetry,     yes                      08S02
//	                                        *bluegreen.DroppedError)
//	a statement of an open transaction      the cause, Transient (conn-closed,     the whole transaction:   08S02
//	  (BEGIN sent, COMMIT not)              eof, failover-cut, sqlstate-57P01)     the server rolled it back
//	COMMIT, its answer lost                 *OutcomeUnknownError, Fatal            no: it may have          08007
//	                                        "outcome-unknown"                      committed; find out first
//	a statement outside a transaction       *OutcomeUnknownError, Fatal            no (a SELECT too: it may 08007
//	  (autocommit), a batch, CopyFrom       "outcome-unknown"                      call a function that writes)
//	COMMIT answered FATAL 57P01             the *pgconn.PgError                    the whole transaction:
//	                                                                               it did not commit
//	a server's refusal: 40001, 40P01        the *pgconn.PgError, Transient         the whole transaction
//
// The AWS JDBC wrapper throws 08S02 when it failed over and no transaction
// was open, 08007 ("transaction resolution unknown") when one was; holdfast
// looks at what was on the wire instead, so an autocommit INSERT whose
// answer was lost is unknown too, and a transaction cut before its COMMIT
// is safe. errors.Is(err, ErrOutcomeUnknown) tells it apart; errors.As
// still reaches the cause. The outcome rule runs before every rule of
// WithClassifier, an integration or package classify. One gap: pgx drops
// the connection's error after a simple-protocol statement
// (QueryExecModeSimpleProtocol, or an Exec without arguments) whose answer
// is lost and returns pgconn's ErrConnClosed; Classify says Fatal
// "outcome-unknown" for it, but errors.Is(err, ErrOutcomeUnknown) is false.
//
// [Factory.RunTx] (over a pool, a DBTX, ReadWrite.Write() or Read(ctx), a
// connection; sqldb.RunTx over a *sql.DB) runs a transaction as
// pgx.BeginTxFunc does and runs the whole of it again only
// when its failure proves that nothing committed: the rows marked "the
// whole transaction" above, a BEGIN that could not connect, 25006 from a
// server holdfast's routing has since left, and holdfast's own holds and
// refusals. It never runs it again after the function's own error, nor
// after COMMIT was sent without an answer. Its re-runs follow
// WithTxPolicy (default: 3 runs, 20 ms doubling to 200 ms with 50 %
// jitter, 10 s), the caller's deadline and the retry budget, and are
// counted like the connect retries, with holdfast.layer "transaction".
// What to do with ErrOutcomeUnknown: look the transaction's own key
// up on a new connection (an idempotency key under a unique constraint),
// done if it is there, run again if it is not; examples/failover does that.
//
// # Read/write splitting
//
// [Factory.NewReadWrite] builds a [ReadWrite] from the cluster (writer)
// endpoint's config: a pool on it and one on the cluster's reader
// endpoint (derived, NAME.cluster-ID… → NAME.cluster-ro-ID…, or given),
// both of one factory, so that with WithFailover they share the cluster's
// monitor. Writes go to the writer (rw.Write(), a [DBTX]; RunTx on it, the
// transaction runner), reads that may trail by the replica lag to the
// readers (rw.Read(ctx); RunTx on it with pgx.ReadOnly, a read-only
// transaction whose writes fail with 25006, never re-run).
// sqldb.OpenReadWrite does the same with two *sql.DB.
//
// Read-your-writes: a reader applies a commit after the writer made it (on
// Aurora usually under 100 ms behind, more under load), so a read
// right after a write may not see it on a reader. A read that must see the
// caller's own writes goes to the writer: mark its context with
// [ReadYourWrites] and Read returns the writer pool's runner
// (TestReadWrite/read-your-writes: readers lagging 2 s, a read a few ms
// after the write misses the row on a reader and sees it under
// ReadYourWrites).
//
// The AWS JDBC wrapper's readWriteSplitting plugin switches one logical
// connection to a reader on setReadOnly(true) and back to the writer on
// setReadOnly(false), transferring the session's state to the connection
// it switches to; the AWS Go wrapper's plugin does the same per context
// (awsctx.SetReadOnly, or sql.TxOptions{ReadOnly: true}) and refuses a
// switch inside a transaction. holdfast keeps two pools instead: a
// connection never changes server mid-session, no session state is
// copied, and the choice is made where the statement is sent (which
// pool), visible in the code and in each pool's metrics. Through a writer
// crash (TestReadWrite/failover: two writing and two reading workers, DNS
// moved 3 s after the promotion) writes reached the new writer 0.1–0.2 s
// after the promotion (two runs); the 2 writes in flight on the old
// writer failed (outcome unknown), none was lost, and no read failed.
// How the reader pool spreads, follows and drops readers, point by point
// against the JDBC wrapper's reader strategies: the failover package's
// doc, "Readers compared with the AWS JDBC wrapper's read/write
// splitting".
//
// # Options
//
//	option                       default                                        governs
//	WithRetryPolicy(p)           retry.Default(): 3 attempts, 100ms doubling    each connection's dials, password
//	                             to 1s, ±20% jitter, 3s per attempt, 10s        fetches and handshakes;
//	                             overall                                        Factory.Acquire
//	WithStartupPolicy(p)         5 attempts, 200ms doubling to 2s, ±20%,        the first connection (NewPool,
//	                             30s overall                                    Start, sqldb.Open)
//	WithTxPolicy(p)              3 runs, 20ms doubling to 200ms, ±50%, 10s      the transaction runner's re-runs
//	                             overall                                        (RunTx, sqldb.RunTx)
//	WithRetryBudget(b)           a budget of the factory's own,                 every retry of the factory's
//	                             retry.DefaultBudget()                          pools; nil: no budget
//	WithPasswordFunc(fn)         none: the connection string's password         a fresh password or IAM token
//	                                                                            per new connection, issued for the
//	                                                                            name of the server reached
//	WithIntegration(in)          none (cloudsql.With, rdsiam.With and           the dial holdfast wraps (else the
//	                             rdssecrets.With build one)                     config's DialFunc, else pgx's), a
//	                                                                            password or credentials function,
//	                                                                            rules, policies
//	WithClassifier(rules...)     none                                           rules tried before the
//	                                                                            integration's and the built-in ones
//	WithBlueGreen(c)             off                                            RDS/Aurora switchover routing
//	WithFailover(c)              off                                            Aurora/RDS writer failover routing (package failover)
//	WithLogger(l)                discard                                        the log lines below
//	WithMeterProvider(mp)        the global provider                            metrics
//	WithTracerProvider(tp)       the global provider                            spans
//	WithConnectLimit(l)          max(2, MaxConns/4) connects in flight per      new connections of each pool
//	                             pool, no rate; InFlight < 0: off               (see Admission)
//
// An integration's policies replace the defaults. An explicit
// WithRetryPolicy or WithStartupPolicy still wins, in any order. A factory
// takes one dial function and one password function. Two options that
// both set one make New return a *ConfigError.
//
// Each pool is named with the pool option [PoolName] (holdfast.pool in log
// lines, pool.name in metrics, componentId in readiness); without one, log
// lines and metrics say "host:port/database".
//
// Integration.Credentials is the password function for secrets that rotate:
// one call returns the user and the password, so that an
// alternating-users rotation works, and the factory caches the answer for
// the TTL it carries, with one call in flight at a time (concurrent
// connects wait for it, each within its context). Credentials the server
// refuses (28P01, 28000) are dropped from the cache, and the one retry
// with a fresh token that such a failure gets calls the function again,
// which RefusedCredentials tells what was refused. Package rdssecrets
// builds one on AWS Secrets Manager, with AWSPENDING during a rotation's
// window; its doc compares the strategies.
//
// # Admission
//
// Each pool admits at most [ConnectLimit].InFlight connects at once
// (default max(2, MaxConns/4)) and, with PerSecond, at most that many new
// connects per second ([WithConnectLimit]). A connect is admitted at its
// first dial and keeps its slot through its retries, until its handshake
// completes or its retries end; its password is fetched before, and the
// blue/green and failover monitors' connections are never queued. A
// connect that finds no slot waits, FIFO, at most until the caller's
// deadline (Factory.Acquire passes it down), the retry policy's
// MaxElapsed (else AttemptTimeout) or pgx's ConnectTimeout; it is counted
// in holdfast.connect.queued and holdfast.connect.queue.duration
// (target, holdfast.outcome admitted|refused) and recorded as a
// holdfast.connect.queued event of its connect span. One not admitted
// fails with an error that matches [ErrQueued]: Transient
// "connect-queued", returned by Factory.Acquire as it is. When a slot is free, admission costs one
// compare-and-swap. pgxpool makes the Acquire that started a connect wait
// for that connect, so a connect queued behind another one's slot waits
// for its own even when the other's connection comes first: keep
// InFlight at 2 or more where latency matters.
//
// Sizing. The database refuses connections beyond max_connections (and a
// role's CONNECTION LIMIT) with 53300, and a connect being built counts.
// Size MaxConns so that the sum over every pod and every pool of MaxConns
// stays within max_connections less the reserved ones
// (superuser_reserved_connections, rds_superuser_reserved_connections,
// replication, admin tools); InFlight then bounds the wave a fleet sends
// when every pod reconnects at once (pods × pools × InFlight attempts in
// flight), which the limit turns from a storm of 53300 into a queue.
// With IAM database authentication AWS advises staying below about 200
// new connections per second per database: PerSecond × pods (× pools of
// that database) ≤ 200, e.g. 100 pods at PerSecond 1, or 400 pods at
// 0.5 with Burst 2. The rate's tokens come at jittered intervals (0.5 to
// 1.5 of 1/PerSecond), so that pods whose buckets an outage drained
// together do not refill together. A rate below the pool's steady need
// (MaxConns ÷ MaxConnLifetime, plus the connections health checks
// replace) lengthens every refill; the storm simulation
// (internal/storm/RESULTS.md) shows the trade: a lower rate lowers the
// fleet's peak and delays the median pod's reconnect.
//
// # Retries and the budget
//
// A retry waits the backoff of its [retry.Policy]: the formula and a table
// of the waits are in that type's documentation. It never waits past the
// caller's deadline. When the next wait would overrun it, the loop stops at
// once.
//
// A retry budget caps retries when many operations fail together. The
// default is a token bucket ([retry.Budget], [retry.DefaultBudget]) in the
// style of the AWS SDK retry quota. First attempts never spend from it.
// Each retry costs 5 of its 100 tokens. Each connection that completes its
// handshake refunds 1 (a dial a front end accepts, or a token fetched,
// while the database is down, refunds nothing), and time refunds 1 per
// second. During a sustained outage a factory's pools therefore make about
// 20 retries at once, then one every 5 seconds, however many goroutines
// fail.
//
// What a sustained outage costs, measured by the fault suite
// (internal/faults, 1,000 callers of Factory.Acquire with the default
// policy and budget): against a refused port, 1,020 dials — the 1,000 first
// attempts and 20 retries — where 3,000 would be made without a budget;
// behind a front end that accepts connections while the database behind it
// is down (a proxy, a pooler, a load balancer, a Kubernetes Service), the
// same 1,020: a dial the front end accepts refunds nothing (only a
// completed handshake does), so it cannot keep the budget full. Every
// further 5 seconds of outage allows one more retry. First attempts are
// not capped: each request that finds no connection makes one, as with
// pgxpool alone (see BENCHMARKS.md for a fleet-scale simulation).
//
// That allowance is the same whatever the demand, so it is a large share
// of a quiet pod's first attempts: in the storm simulation of
// BENCHMARKS.md, a fleet whose every pod serves 2 requests per second
// retries 41 % of its first attempts through a 30 s outage, one at 20
// requests per second 4 %. [retry.DemandBudget] is a budget relative to
// demand, gRPC's retry throttling: every failed attempt, a first one
// too, takes one of 5 tokens, and a retry runs only while more than 2.5
// are left. A lone failure in a healthy pool is still retried at once and
// a lone connect keeps its three attempts, but after three failures in a
// row retries stop until successes and time (0.2 tokens a second) refill
// the bucket: under 4 % of first attempts at every rate from 2 to 20
// requests per second per pod. It is not the default, because it also
// cuts short the startup policy's retries of a first connection (each
// connect's dials are failures too). For a fleet of small pools, give
// each factory a budget of retry.NewBudget(retry.DemandBudget()) with
// WithRetryBudget.
//
// By default each Factory has its own budget. gRPC's retry throttling
// belongs to a client connection in the same way: a dead database spends
// its factory's budget and no other. Build one factory per database. For
// one cap on the whole process, build one budget with retry.NewBudget and
// pass it to WithRetryBudget in every factory.
//
// A retry loop that gives up returns a *retry.Error. It holds the Attempts,
// the Verdict of the last failure and why the loop stopped, and errors.Is
// and errors.As reach the last failure through it. It matches
// retry.ErrExhausted (attempts or time ran out), retry.ErrBudgetExhausted
// or retry.ErrNotRetryable (a Fatal failure).
//
// # Errors
//
// Failures are error types, for errors.As. Most of them have a sentinel for
// errors.Is and an Unwrap to their cause, and each type's doc says whether
// it is retryable. A configuration mistake has the same shape in holdfast,
// bluegreen, cloudsql, rdsiam, readiness and sqldb (package retry has its
// *InvalidPolicyError instead): a *ConfigError of that package. Its Field
// is what is wrong, Why says how, and Err is the error of a lower check,
// when there is one. Its message reads "<package>: invalid <Field>:
// <Why>[: <Err>]", and Unwrap returns Err. It is one type in every
// package, so one errors.As finds the outermost, whose Err holds the
// package's own:
//
//	_, err := holdfast.New(holdfast.WithBlueGreen(bluegreen.Config{HighInterval: -1}))
//	// holdfast: invalid WithBlueGreen: invalid bluegreen.Config: bluegreen: invalid HighInterval: must not be negative (zero means the default 100ms)
//	var ce *holdfast.ConfigError
//	errors.As(err, &ce) // true: ce.Field "WithBlueGreen", ce.Err the bluegreen one
//
// A ConfigError is never retryable: fix the configuration.
//
// A password function that panics would end the process, because it runs
// on pgxpool's connect goroutine. holdfast recovers the panic into a Fatal
// error (reason "panic"), which is not retried, and logs the panic's type
// and its stack at ERROR, never its value (it may hold what the function
// was minting).
//
// # Telemetry
//
// holdfast reports through OpenTelemetry and log/slog. By default it uses
// the global providers, so an application that installs its SDK gets
// everything without an option:
//
//	otel.SetMeterProvider(mp) // the application's SDK
//	otel.SetTracerProvider(tp)
//	f, err := holdfast.New(holdfast.WithLogger(logger))
//	pool, err := f.NewPool(ctx, cfg, holdfast.PoolName("orders"))
//
// With no-op providers holdfast installs nothing on the pool, and Acquire
// costs exactly what it costs in pgxpool. The global providers are
// resolved lazily. If the SDK is installed after Configure, the
// connections made from then on get their connect span, their connect
// metrics, statement durations and connection counts. The acquire and
// release metrics need a tracer on the pool config, which only Configure
// can install, so install the SDK first where you can. The instrumentation
// scope is "github.com/holdfast-db/holdfast", versioned with the module.
//
// Metrics use the OpenTelemetry database semantic conventions (v1.43.0).
// pool.name is db.client.connection.pool.name: the pool's own name
// ([PoolName], an option of Configure and NewPool), else
// "host:port/database" of the configured host; two
// pools of one factory never share one (the second is "name-2"). Every
// holdfast.* metric of a pool carries its target: pool.name,
// server.address, server.port and db.namespace (the configured host, never
// an address per connection), so that a service with several databases
// sees which one fails; "target" below stands for those four.
//
//	instrument                            unit          attributes                              what
//	db.client.connection.count            {connection}  pool.name, state idle|used              from pgxpool Stat() at each collection
//	db.client.connection.max              {connection}  pool.name                               MaxConns
//	db.client.connection.pending_requests {request}     pool.name                               Acquires waiting for a connection
//	db.client.connection.create_time      s             pool.name [, error.type]                from BeforeConnect (token fetch, dial
//	                                                                                            retries, blue/green waits) to the end
//	                                                                                            of pgx's connect; failures too
//	db.client.connection.wait_time        s             pool.name                               a successful Acquire's wait
//	db.client.connection.use_time         s             pool.name                               from Acquire to Release
//	db.client.connection.timeouts         {timeout}     pool.name                               Acquires ended by DeadlineExceeded
//	db.client.operation.duration          s             db.system.name, db.namespace,           each statement, batch and COPY FROM
//	                                                    server.address, server.port [,          (with another tracer recording it,
//	                                                    error.type, db.response.status_code]    such as otelpgx, drop one with a view)
//	holdfast.connect.attempts             {attempt}     target, holdfast.stage,                 connections a pool tried to open, one
//	                                                    holdfast.outcome [, error.type,         per connection however many dials
//	                                                    holdfast.error.class]
//	holdfast.retries                      {retry}       target, holdfast.layer,                 retries after a transient failure
//	                                                    holdfast.stage, error.type
//	holdfast.recoveries                   {operation}   target, holdfast.layer,                 operations that failed first and then
//	                                                    holdfast.stage, error.type (of the      succeeded on a retry
//	                                                    first failure)
//	holdfast.retry.exhausted              {operation}   target, holdfast.layer,                 operations that gave up on a transient
//	                                                    holdfast.stage, error.type,             failure (attempts|deadline)
//	                                                    holdfast.retry.stop
//	holdfast.retry.budget.rejections      {retry}       target, holdfast.layer,                 retries the budget refused
//	                                                    holdfast.stage, error.type
//	holdfast.connect.queued               {connect}     target, holdfast.outcome                connects that waited for admission
//	                                                    (admitted|refused)                      (WithConnectLimit)
//	holdfast.connect.queue.duration       s             target, holdfast.outcome                their wait
//	holdfast.bluegreen.phase              {phase}       target, holdfast.bluegreen.id           0 NOT_CREATED … 5 COMPLETED (0 from
//	                                                                                            Configure on)
//	holdfast.failover.events              {event}       server.address, server.port (the        the failover monitor's events (suspect,
//	                                                    cluster endpoint), holdfast.failover.   writer down, new writer, …)
//	                                                    event
//	holdfast.bluegreen.suspended.duration s             target, holdfast.bluegreen.id,          time a connect, Acquire or statement
//	                                                    holdfast.bluegreen.suspend.point,       was held by a switchover
//	                                                    holdfast.outcome (resumed|failed)
//	holdfast.readiness.ready              1             — (the whole service)                   1 while /readyz answers 200
//	holdfast.readiness.transitions        {transition}  holdfast.readiness.health,              readiness changes
//	                                                    holdfast.readiness.reason
//	holdfast.readiness.drain.duration     s             holdfast.outcome                        readiness drains
//	holdfast.readiness.check.ready        1             holdfast.readiness.check, pool.name,    1 unless that target's check fails
//	                                                    server.address, server.port,            (an optional target's too); one
//	                                                    db.namespace                            series per readiness target
//	holdfast.readiness.check.transitions  {transition}  the target's, holdfast.readiness.       changes of one target's health
//	                                                    health, holdfast.readiness.reason
//	holdfast.readiness.check.duration     s             the target's, holdfast.outcome          one target's database checks
//
// holdfast.stage is the service stage: "startup" (the first connection,
// made by Start or NewPool), "pool-growth" (a connection opened while the
// service runs) or "request" (Factory.Acquire's retry). holdfast.layer is
// the retry layer: "connect" (one connection's dials and handshakes),
// "password" (a password fetch), "acquire" (Factory.Acquire), "startup" or
// "transaction" (the transaction runner's re-runs).
// error.type is always a classified reason (classify.Verdict.Reason, such
// as "token-fetch-503" or "sqlstate-53300"), or a SQLSTATE for
// db.client.operation.duration: never error text.
//
// # Prometheus names
//
// Through OpenTelemetry's Prometheus exporter (or a Collector's), with its
// default translation, the metrics are scraped under these names, each
// series also labelled otel_scope_name, otel_scope_version and
// otel_scope_schema_url; dots in attribute names become underscores
// ("target" is db_client_connection_pool_name, server_address,
// server_port, db_namespace). A histogram has _bucket, _sum and _count
// series. The dashboard in the repository's dashboards directory (package
// dashboards embeds it) queries them; a test scrapes a real pool through
// faults and checks this list, the labels and every query of the
// dashboard.
//
//	Prometheus name                                    type       labels
//	db_client_connection_count                         gauge      db_client_connection_pool_name, db_client_connection_state
//	db_client_connection_max                           gauge      db_client_connection_pool_name
//	db_client_connection_pending_requests              gauge      db_client_connection_pool_name
//	db_client_connection_create_time_seconds           histogram  db_client_connection_pool_name [, error_type]
//	db_client_connection_wait_time_seconds             histogram  db_client_connection_pool_name
//	db_client_connection_use_time_seconds              histogram  db_client_connection_pool_name
//	db_client_connection_timeouts_total                counter    db_client_connection_pool_name
//	db_client_operation_duration_seconds               histogram  db_system_name, db_namespace, server_address, server_port [, error_type, db_response_status_code]
//	holdfast_connect_attempts_total                    counter    target, holdfast_stage, holdfast_outcome [, error_type, holdfast_error_class]
//	holdfast_retries_total                             counter    target, holdfast_layer, holdfast_stage, error_type
//	holdfast_recoveries_total                          counter    target, holdfast_layer, holdfast_stage, error_type
//	holdfast_retry_exhausted_total                     counter    target, holdfast_layer, holdfast_stage, error_type, holdfast_retry_stop
//	holdfast_retry_budget_rejections_total             counter    target, holdfast_layer, holdfast_stage, error_type
//	holdfast_connect_queued_total                      counter    target, holdfast_outcome
//	holdfast_connect_queue_duration_seconds            histogram  target, holdfast_outcome
//	holdfast_bluegreen_phase                           gauge      target, holdfast_bluegreen_id
//	holdfast_bluegreen_suspended_duration_seconds      histogram  target, holdfast_bluegreen_id, holdfast_bluegreen_suspend_point, holdfast_outcome
//	holdfast_failover_events_total                     counter    server_address, server_port, holdfast_failover_event
//	holdfast_readiness_ready_ratio                     gauge      —
//	holdfast_readiness_transitions_total               counter    holdfast_readiness_health, holdfast_readiness_reason
//	holdfast_readiness_drain_duration_seconds          histogram  holdfast_outcome
//	holdfast_readiness_check_ready_ratio               gauge      target, holdfast_readiness_check
//	holdfast_readiness_check_transitions_total         counter    target, holdfast_readiness_check, holdfast_readiness_health, holdfast_readiness_reason
//	holdfast_readiness_check_duration_seconds          histogram  target, holdfast_readiness_check, holdfast_outcome
//
// For example, the connections failing now, by pool, server and reason:
//
//	sum by (db_client_connection_pool_name, server_address, error_type)
//	  (rate(holdfast_connect_attempts_total{holdfast_outcome="failure"}[5m]))
//
// Spans:
//
//	span                            covers
//	holdfast.connect (client)       one connection a pool opens, from BeforeConnect to the end of pgx's
//	                                connect, a child of the span of the Acquire that caused it. It has
//	                                server.address (the configured host), network.peer.address (the
//	                                address reached, after DNS or a blue/green substitution), one
//	                                holdfast.attempt event per password fetch and dial (holdfast.layer,
//	                                holdfast.attempt, holdfast.outcome, error.type, holdfast.error.class,
//	                                holdfast.retry.delay in seconds), and status Error with the verdict
//	                                ("transient/conn-refused") on failure
//	holdfast.acquire                Factory.Acquire's retry, from the first failure; one event per attempt
//	holdfast.startup                Start and NewPool; one event per attempt
//	holdfast.bluegreen.switchover   a switchover, from PREPARATION to its end; one event per phase
//
// A connect, Acquire or statement held by a switchover gets
// holdfast.bluegreen.suspended.duration and .reason on its own span, a
// holdfast.bluegreen.suspended event, and a link to the switchover span.
//
// The questions an operator asks during an incident, and where to look:
//
//	failures at startup or while the pool grew?   holdfast.connect.attempts{holdfast.outcome="failure"} by holdfast.stage
//	first attempts that a retry recovered?        holdfast.recoveries by layer, stage and error.type
//	requests whose retries ran out?               holdfast.retry.exhausted and holdfast.retry.budget.rejections
//	pool wait and connections in use?             db.client.connection.wait_time, db.client.connection.count{state="used"}
//	readiness failures against user-facing 5xx?   holdfast.readiness.ready and .transitions against the server's 5xx
//
// # Logs
//
// The logger of [WithLogger] receives these lines, with the caller's
// context, so that a trace-aware handler ties them to the request's trace:
//
//	WARN  "holdfast: retrying after a transient failure"  holdfast.layer, attempt, delay_s, error.class,
//	                                                      error.reason, holdfast.stage, error
//	WARN  "holdfast: giving up after transient failures"  holdfast.layer, attempts, stop, error.class,
//	                                                      error.reason, holdfast.stage, error
//	INFO  "holdfast: recovered"                           holdfast.layer, attempts, took_s, error.reason
//	                                                      (of the first failure), holdfast.stage
//	ERROR "holdfast: cannot connect"                      holdfast.layer (connect|password), attempts,
//	                                                      error.class, error.reason, fresh_credential,
//	                                                      hint, holdfast.stage, error
//	ERROR "holdfast: giving up on a failure that is not   holdfast.layer (acquire|startup), attempts,
//	      retryable"                                      error.class, error.reason, fresh_credential,
//	                                                      hint, holdfast.stage, error
//	DEBUG "holdfast: suspended by a blue/green            bluegreen.id, point, reason, waited_s, outcome
//	      switchover"
//	ERROR "holdfast: the password function panicked"      panic (its type), stack
//
// Every line about a connection names its target: server.address,
// server.port, db.namespace and holdfast.pool (the pool's name, as in
// metrics). The lines of packages bluegreen and failover carry them too
// (a failover monitor's: the cluster endpoint it watches, without a pool:
// it serves every pool of the cluster).
//
// "recovered" is written only when the operation succeeded; a connection
// whose retries ran out writes "giving up" instead. stop is "attempts
// exhausted", "deadline too close for another attempt" or "retry budget
// exhausted". A connection that failed for a reason no retry fixes (a
// revoked CONNECT grant, a wrong password, a missing database, a password
// function that failed for good, a configuration error) writes one ERROR
// line "cannot connect", retried or not, whatever pool path asked for it,
// with a hint of what to check, for example
//
//	"hint":"permission denied for database: GRANT CONNECT ON DATABASE \"orders\" TO \"app\" (or to PUBLIC)"
//
// An authentication refused (28P01, 28000) is retried once with a freshly
// fetched password on the paths that can: Factory.Acquire, Start, sqldb.
// When the fresh one is refused too, the request's "giving up … not
// retryable" line says fresh_credential true: the secret itself is wrong
// (or a rotation has not finished), not a stale token.
//
// Durations are seconds, as floats, in keys ending in _s (delay_s, took_s,
// waited_s; readiness' drain lines too); metrics and span attributes use
// seconds as well. Lines of one kind (message, layer, stage, reason and
// target) are sampled to one per second. The next line written carries
// "suppressed", the number of lines dropped since the last one. With
// WithBlueGreen, package bluegreen logs its phase changes, events and
// switchover summary to the same logger, unless its Config.Logger is set.
//
// # Secrets
//
// Metrics and spans never carry error text, only classified reasons,
// SQLSTATEs and the configured host, port, database and pool name. The
// error text in log lines is redacted. The passwords of the configured
// pools, the tokens the factory fetched (the last 16), and any password in
// a connection string (password=…, postgres://user:…@) become
// "[redacted]". Errors that holdfast returns (from a dial, BeforeConnect,
// Acquire or Start) are redacted the same way, while errors.Is and
// errors.As still reach the cause. A test runs every scenario with a
// distinctive password and token, and fails if either appears in a log
// line, a span, a metric attribute or a returned error.
//
// # Cost
//
// When nothing fails, the factory adds one atomic load to the hot path:
// Acquire is pool.Acquire plus a PrepareConn that checks whether a server
// just failed (about 3.5 ns, no allocation, no lock). A successful dial is one call of the dial function plus
// one atomic load, with no allocation when the retry policy has no
// AttemptTimeout. With one (the default policy has 3s), a dial also
// allocates the timeout context that bounds it: four allocations, next to
// the ~160 of pgx's connect. It skips that when the connect's context
// already ends sooner. TestHotPathAllocations and TestDialAllocations pin
// these figures. A whole new connection makes about 48 more allocations
// through holdfast than through plain pgx (211 against 163, in a connect
// of about 2 ms): the retry state of the connection layer and the socket
// tuning.
// BENCHMARKS.md in the repository has the measurements and the commands.
package holdfast
