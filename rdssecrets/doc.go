// Package rdssecrets gives holdfast pools the database credentials of an
// AWS Secrets Manager secret in the RDS JSON shape (username, password,
// and optionally host, port, dbname, engine), as RDS-managed master
// passwords and the rotation templates store them, and keeps new
// connections logging in while the secret rotates.
//
// [With] gives a factory a credentials function (holdfast.WithCredentialsFunc)
// that reads the secret with the AWS SDK for Go v2
// (github.com/aws/aws-sdk-go-v2/service/secretsmanager), and [Rules], which
// classify the failures of reading it:
//
//	awsCfg, err := config.LoadDefaultConfig(ctx)
//	// ...
//	sm := secretsmanager.NewFromConfig(awsCfg)
//	f, err := holdfast.New(rdssecrets.With(rdssecrets.Config{Client: sm, SecretID: "prod/app/db"}))
//	// ...
//	cfg, err := pgxpool.ParseConfig("postgres://mydb.abc123.eu-west-1.rds.amazonaws.com:5432/app?sslmode=verify-full&sslrootcert=system")
//	// ...
//	pool, err := f.NewPool(ctx, cfg)
//
// The user and password of every new connection come from the secret; the
// host, port and database stay the pool config's (read them once with
// [Get] to build it). The factory caches the answer for Config.TTL (870 s
// by default, as the AWS wrappers) and reads the secret once at a time:
// 16 connects at once cause one GetSecretValue call, 20 connects in a row
// one call.
//
// # Rotation strategies
//
// A rotation runs four steps: createSecret stores new credentials as the
// AWSPENDING version, setSecret changes the database, testSecret logs in
// with AWSPENDING, finishSecret moves AWSCURRENT to it.
//
//	| Strategy          | Step that breaks logins        | What fails without holdfast                   | What holdfast does                                   |
//	|-------------------|--------------------------------|-----------------------------------------------|------------------------------------------------------|
//	| single user       | setSecret: the user's password | every new connection with the cached          | the 28P01 drops the cached credentials; the one      |
//	|                   | changes; AWSCURRENT still has  | AWSCURRENT password is refused (28P01) until  | fresh-token retry reads the secret again, sees the   |
//	|                   | the old one until finishSecret | the application reads the secret after        | refused AWSCURRENT and takes AWSPENDING (cached for  |
//	|                   | (about a minute for RDS)       | finishSecret; open connections are unharmed   | PendingTTL, 5 s, while AWSCURRENT stays the refused  |
//	|                   |                                |                                               | version); after finishSecret AWSCURRENT again        |
//	| alternating users | none in the rotation itself:   | nothing in the first rotation; in the next    | the cache keeps the old user until its TTL; when its |
//	|                   | setSecret changes the other    | one, setSecret changes the password of the    | password is changed (28P01), the retry reads the new |
//	|                   | user; the old AWSCURRENT user  | user a cached secret still names, and its new | AWSCURRENT, the other user: the connection's user is |
//	|                   | keeps working until the next   | connections are refused                       | set from the secret                                  |
//	|                   | rotation                       |                                               |                                                      |
//	| no rotation, the  | —                              | every new connection                          | AWSCURRENT refused and no AWSPENDING: a re-poll      |
//	| secret is wrong   |                                |                                               | within RotationWait (2 s), then a Fatal              |
//	|                   |                                |                                               | *RotationError instead of a retry loop               |
//
// When AWSPENDING is refused too (setSecret has not reached the database,
// or the rotation failed), the call re-polls AWSPENDING and AWSCURRENT
// every PollInterval (250 ms) within RotationWait and its context (the
// policy's AttemptTimeout, 3 s by default), and returns a Transient
// *RotationError, which the password layer's retries (3 attempts, 10 s by
// default, charged to the retry budget) retry.
//
// Measured on a real PostgreSQL with the fake Secrets Manager
// (fakes/secretsmanagertest) and the real SDK client, 4 workers each
// running SELECT 1 through a pool of 4 connections replaced every
// ~30 ms, and beside it the control: a plain pgxpool with the secret read
// once at start (go test -race ./rdssecrets/, a 2-core machine):
//
//	| Rotation                                  | holdfast, failed (of)   | control (pgxpool, secret read once), failed (of) |
//	|-------------------------------------------|-------------------------|--------------------------------------------------|
//	| single user, 1 rotation (0.7 s window)    | 0 (118 – 293) in 4 runs | 68 – 114 (98 – 257), all 28P01                   |
//	| alternating users, 2 rotations            | 0 (262 – 908) in 4 runs | 68 – 121 (254 – 823), all 28P01                  |
//
// (The counts vary with the machine's load; the control's failures start
// at setSecret and never end, since it never reads the secret again.)
// Both runs made 2 calls of the credentials function and 2 to 3
// GetSecretValue calls in all.
//
// The retry after a 28P01 comes from Factory.Acquire, Factory.Start and
// package sqldb: pgx stops a connect at 28P01, so a connection that
// pool.Query makes by itself fails that one request (the next connect
// already uses the fresh credentials); give code that runs statements on
// the pool, such as sqlc's, holdfast's Factory.DBTX(pool) instead, whose
// every method takes its connection through Factory.Acquire. A 28000 is retried inside the
// connect, on every pool path.
//
// # Failures of Secrets Manager
//
//	| Failure                                      | Seen as                                          | holdfast               |
//	|----------------------------------------------|--------------------------------------------------|------------------------|
//	| ThrottlingException (400), 429               | *SecretError, Transient secretsmanager-throttled | fetch retried (policy) |
//	| InternalServiceError (500), any 5xx          | *SecretError, Transient secretsmanager-NNN       | fetch retried          |
//	| endpoint refused or timed out                | *SecretError → network error, Transient          | fetch retried          |
//	| ResourceNotFoundException (a deleted secret) | *SecretError, Fatal secretsmanager-not-found     | fails at once (1 call) |
//	| AccessDeniedException                        | *SecretError, Fatal secretsmanager-access-denied | fails at once          |
//	| DecryptionFailure (KMS)                      | *SecretError, Fatal secretsmanager-decryption    | fails at once          |
//	| not RDS JSON, no username or password        | *SecretError, Fatal secretsmanager-format        | fails at once          |
//
// errors.Is(err, ErrNotFound), ErrAccessDenied and ErrFormat match the
// *SecretError of each. A throttled fetch is retried under the factory's
// policy: with the test's policy, two throttles then an answer connect
// after 3 calls; throttling that does not stop gives up after 3 calls, in
// about 20 ms. The SDK client retries throttling and 5xx by itself too
// (3 attempts with its standard retryer), inside each of holdfast's
// attempts, each bounded by AttemptTimeout: give the client
// aws.NopRetryer{} (or retry.AddWithMaxAttempts(.., 1)) to leave the
// retries, and their budget, to holdfast.
//
// # Compared with the AWS wrappers
//
// The AWS Advanced Go Wrapper's Secrets Manager plugin caches the secret
// per secret and region, and on a login failure refetches once, only if
// the secret came from its cache: during the rotation window the refetch
// returns the same AWSCURRENT and fails again ("retries at most once
// across a rotation window", issue #470). PR #598 adds an opt-in time
// budget (secretsManagerConnectRetryTimeoutMs, off by default) that keeps
// refetching with backoff up to 30 s; its wait cannot be interrupted by a
// context. The JDBC wrapper has the same options (PR #2097) and
// recommends RDS Proxy or alternating users. Neither reads AWSPENDING.
//
//	|                        | AWS Go wrapper (#598)        | AWS JDBC wrapper (#2097)     | rdssecrets                               |
//	|------------------------|------------------------------|------------------------------|------------------------------------------|
//	| login failure in the   | refetch AWSCURRENT until the | the same                     | AWSPENDING at once; re-poll of           |
//	| rotation window        | budget ends (opt-in)         |                              | AWSCURRENT within RotationWait           |
//	| alternating users      | username from the secret     | username from the secret     | username from the secret (Credentials)   |
//	| concurrent refetches   | one per connect              | one per connect (plugin 2:   | one in flight per factory                |
//	|                        |                              | one async refresh per key)   |                                          |
//	| bounded by the context | no                           | n/a                          | yes: each wait and each call             |
//	| retry accounting       | its own budget               | its own budget               | the factory's retry budget and policy    |
//
// # Secrets
//
// The password never appears in a [SecretError], a [RotationError], a
// [Secret]'s String, or in holdfast's log lines, spans, metrics and
// returned errors: holdfast registers each password it fetched with its
// redactor. The rotation tests fail if a password of the secret appears in
// the factory's log.
package rdssecrets
