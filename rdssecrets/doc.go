// Package rdssecrets gives holdfast pools the database credentials of an
// AWS Secrets Manager secret in the RDS JSON shape (username, password,
// and optionally host, port, dbname, engine), as RDS-managed master
// passwords and the rotation templates store them, and keeps new
// connections logging in while the secret rotates.
//
// [With] gives a factory a credentials function (holdfast.Integration.Credentials)
// that reads the secret with the AWS SDK for Go v2
// (github.com/aws/aws-sdk-go-v2/service/secretsmanager), and [Rules], which
// classify the failures of reading it:
//
//	awsCfg, err := config.LoadDefaultConfig(ctx)
//	// ...
//	sm := secretsmanager.NewFromConfig(awsCfg)
//	f, err := holdfast.New(rdssecrets.With(rdssecrets.Config{Client: sm, SecretID: "prod/app/db"}))
//	// ...
//	pool, err := f.NewPoolFromDSN(ctx, "postgres://mydb.abc123.eu-west-1.rds.amazonaws.com:5432/app?sslmode=verify-full&sslrootcert=system")
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
// Throttling and 5xx answers are Transient and fetched again under the
// factory's policy; a deleted secret, a denied access, a KMS decryption
// failure and a secret not in the RDS JSON shape are Fatal, after one
// call. [SecretError]'s doc has the table, and how the SDK's own retries
// compose with holdfast's.
//
// # Measured, and compared with the AWS wrappers
//
// Through a single-user rotation and two alternating-users rotations on a
// real PostgreSQL, with the real SDK client against a fake Secrets Manager,
// no request failed through holdfast, where a pool that read the secret
// once failed from setSecret on. The AWS wrappers refetch AWSCURRENT
// after a failed login and never read AWSPENDING. The figures and the
// comparison, point by point: [rotations measured and compared].
//
// # Secrets
//
// The password never appears in a [SecretError], a [RotationError], a
// [Secret]'s String, or in holdfast's log lines, spans, metrics and
// returned errors: holdfast registers each password it fetched with its
// redactor. The rotation tests fail if a password of the secret appears in
// the factory's log.
//
// [rotations measured and compared]: https://github.com/holdfast-db/holdfast/blob/main/docs/rdssecrets.md
package rdssecrets
