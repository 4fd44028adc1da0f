// Package holdfast keeps pgx v5 / pgxpool connections to Cloud SQL and
// RDS/Aurora working through what managed databases do to them — short
// control-plane blips such as an IAM token fetch that returns 503, restarts,
// dropped connections — while surfacing real mistakes (wrong permission,
// wrong instance name, bad SQL) at once.
//
// # Use
//
// Build a [Factory] with [New] and functional options, then let it configure
// each pool before pgxpool.NewWithConfig:
//
//	f, err := holdfast.New(holdfast.WithPasswordFunc(tokenFunc))
//	cfg, err := pgxpool.ParseConfig(dsn)
//	err = f.Configure(cfg)
//	pool, err := pgxpool.NewWithConfig(ctx, cfg)
//
// or use [Factory.NewPool], which also makes the first connection under the
// startup policy. [Factory.Acquire] is pool.Acquire with request-scope retry.
//
// # Which layer absorbs which failure
//
// Every failure is classified by the classify package (Transient or Fatal,
// from error types and codes, never from message text) and only Transient
// ones are retried, under a bounded retry.Policy and a process-wide
// retry.Budget.
//
//	failure                                   where it is retried
//	dial: token fetch 503, refused, reset     DialFunc wrapper (Configure)
//	password/IAM token func: 503              BeforeConnect (Configure)
//	startup handshake: 57P03, 53300, 57P01    Factory.Acquire / Factory.Start
//	auth failure with a token func (28000)    Factory.Acquire, once, fresh token
//	first connection of a pool                Factory.Start / NewPool (startup policy)
//	a statement (query, exec, commit)         never: holdfast does not resend SQL
//
// Failures already retried at the dial or password layer are not retried
// again by Factory.Acquire, so attempts never multiply across layers; only
// the startup policy, which is more patient, retries them again.
//
// # Errors
//
// Failures are error types, for errors.As, most of them with a sentinel for
// errors.Is and an Unwrap to their cause; each type's doc says whether it
// is retryable. A configuration mistake is reported the same way in
// holdfast, bluegreen, cloudsql, rdsiam and readiness (package retry has
// its *InvalidPolicyError): a *ConfigError of that package, whose Field is what is wrong, Why says how, and Err is
// the error of a lower check when there is one. Its message reads
// "<package>: invalid <Field>: <Why>[: <Err>]", Unwrap returns Err, and it
// matches its package's ErrInvalidConfig; a ConfigError that wraps another
// matches both sentinels:
//
//	_, err := holdfast.New(holdfast.WithBlueGreen(bluegreen.Config{HighInterval: -1}))
//	// holdfast: invalid WithBlueGreen: invalid bluegreen.Config: bluegreen: invalid HighInterval: must not be negative (zero means the default 100ms)
//	errors.Is(err, holdfast.ErrInvalidConfig)  // true
//	errors.Is(err, bluegreen.ErrInvalidConfig) // true
//
// A ConfigError is never retryable: fix the configuration.
//
// # Cost
//
// When nothing fails, the factory adds nothing to the hot path: Acquire is
// pool.Acquire, and a successful dial is one call of the user's DialFunc
// plus one atomic load of the retry budget, with no allocation when the
// retry policy has no AttemptTimeout. With one (cloudsql.RetryPolicy sets
// 12 s), a dial also allocates the timeout context that bounds it (four
// allocations, next to the ~160 of pgx's connect), unless the connect's
// context already ends sooner. TestDialAllocations pins both figures.
package holdfast
