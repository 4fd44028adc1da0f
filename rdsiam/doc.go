// Package rdsiam connects holdfast pools to Amazon RDS and Aurora
// PostgreSQL with IAM database authentication: instead of a stored
// password, every new connection presents a short-lived token signed with
// the application's AWS credentials.
//
// [With] gives a holdfast factory a password function that mints a fresh
// token per new connection with github.com/aws/aws-sdk-go-v2/feature/rds/auth
// (BuildAuthToken), and [Rules], which classify the failures of retrieving
// the AWS credentials. Signing is local; the only I/O is that retrieval,
// which a cached credentials provider does rarely.
//
//	cfg, err := pgxpool.ParseConfig("postgres://app@mydb.abc123.eu-west-1.rds.amazonaws.com:5432/app?sslmode=verify-full&sslrootcert=system")
//	// ...
//	rc, err := rdsiam.ConfigFor(cfg, "eu-west-1", awsCfg.Credentials) // host:port and user of cfg
//	// ...
//	f, err := holdfast.New(rdsiam.With(rc))
//	// ...
//	pool, err := f.NewPool(ctx, cfg)
//
// [PasswordFunc] returns the password function alone, for
// holdfast.WithPasswordFunc (with holdfast.WithClassifier(rdsiam.Rules()...))
// or for a pool without holdfast. examples/rds is a whole program.
//
// # Blue/green switchovers
//
// RDS checks a token against the name the server answers to. During a
// blue/green switchover a blue name leads to green, which answers to its
// green name until it takes the blue names; the green monitor of
// holdfast.WithBlueGreen reads green by its green name. [With] signs for
// the server each connection reaches ([HostPasswordFunc]): holdfast tells
// it the name (bluegreen.Name.Auth), the green name first until the
// metadata shows the rename, and the one retry after a 28000 is signed for
// the other name. [PasswordFunc] signs every token for Config.Endpoint: a
// pool that uses it through a switchover sees 28000 in POST, and its green
// monitor cannot read green (examples/switchover -scenario iam, and its
// control in the test).
//
// # Which hosts get a token
//
// A token is valid for 15 minutes at the endpoint it names, so it is
// signed only for hosts the configuration vouches for: Config.Endpoint's
// host and Config.Aliases (signed for Endpoint), and the RDS endpoints of
// Endpoint's account and Region (its "<id>.<region>.rds.amazonaws.com"
// suffix: the blue, green and -old1 names, the cluster's instances),
// signed for themselves. [HostPasswordFunc] refuses any other host — a
// host a database row named, another account's or Region's endpoint, a
// name of your own not in Aliases — with a *HostError (Fatal, no
// credentials retrieved). holdfast's monitors never dial such a host
// anyway (see the packages bluegreen and failover, "What holdfast
// trusts"); the refusal holds for any caller of the function.
//
// RDS requires TLS for IAM authentication: keep sslmode=verify-full, with
// the RDS CA bundle or sslrootcert=system where the RDS CAs are in the
// system pool. (The Cloud SQL connector, by contrast, encrypts on its own.)
// Pass cached credentials, such as those of config.LoadDefaultConfig: the
// password function retrieves them for every new connection.
//
// # Failures and what holdfast does
//
//	| Failure                                     | Seen as                                    | holdfast                     |
//	|---------------------------------------------|--------------------------------------------|------------------------------|
//	| credentials endpoint 5xx, 429, 408          | *TokenError, Transient aws-credentials-NNN | password fetch retried       |
//	| credentials endpoint refused or timed out   | *TokenError → network error, Transient     | password fetch retried       |
//	| credentials endpoint 400, 401, 403          | *TokenError, Fatal aws-credentials-denied  | fails at once                |
//	| token expired or rejected                   | SQLSTATE 28000 "PAM authentication failed" | one retry with a fresh token |
//	| no rds_iam grant, no IAM policy, wrong user | SQLSTATE 28000 again                       | Fatal after that one retry   |
//
// The credentials endpoint is whatever the credentials provider calls: the
// container credentials endpoint (ECS, EKS Pod Identity), the EC2 instance
// metadata service, STS. Errors of the AWS SDK carry the HTTP status
// (HTTPStatusCode), which [Rules] reads.
//
// The retry after a 28000 happens inside the connect, on every pool path
// (pool.Query, pool.Ping, pool.Acquire, Factory.Acquire, NewPool): the
// password function is called again for the new attempt. A 28P01 gets its
// one retry from Factory.Acquire only, because pgx reports it without
// trying again.
//
// Measured against a real PostgreSQL with the default holdfast policies
// (go test -race ./rdsiam/, a 2-core machine):
//
//	| Case                                                    | Password calls | Outcome                      | Time          |
//	|---------------------------------------------------------|----------------|------------------------------|---------------|
//	| first token rejected (28P01), fresh one accepted        | 2              | connected                    | 0.13s – 0.14s |
//	| every token rejected: 28000 "PAM authentication failed" | 2              | Fatal sqlstate-28000         | 3.5s – 4.1s   |
//	| container credentials endpoint 503, once                | 2              | connected                    | 0.10s         |
//	| container credentials endpoint 403                      | 1              | Fatal aws-credentials-denied | < 10ms        |
//
// Of the 3.5s to 4.1s, about 2s per attempt is the test server's delay
// after a failed PAM authentication.
//
// # Secrets
//
// A token is a bearer credential for 15 minutes. It never appears in a
// [TokenError] or a [ConfigError], and holdfast redacts the tokens it
// fetched from its log lines and returned errors. The AWS secret key is
// not part of the token (only its signature is).
package rdsiam
