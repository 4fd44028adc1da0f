// Package rdsiam connects holdfast pools to Amazon RDS and Aurora
// PostgreSQL with IAM database authentication: instead of a stored
// password, every new connection presents a short-lived token signed with
// the application's AWS credentials.
//
// [PasswordFunc] returns a password function for holdfast.WithPasswordFunc
// that mints a fresh token per new connection with
// github.com/aws/aws-sdk-go-v2/feature/rds/auth (BuildAuthToken). Signing
// is local; the only I/O is retrieving the AWS credentials, which a cached
// provider does rarely. [Rules] classifies the failures of that retrieval.
//
//	cfg, err := pgxpool.ParseConfig("host=mydb.abc.eu-west-1.rds.amazonaws.com user=app dbname=app sslmode=verify-full sslrootcert=system")
//	// ...
//	rc, err := rdsiam.ConfigFor(cfg, "eu-west-1", awsCfg.Credentials)
//	// ...
//	pw, err := rdsiam.PasswordFunc(rc)
//	// ...
//	f, err := holdfast.New(holdfast.WithPasswordFunc(pw), holdfast.WithClassifier(rdsiam.Rules()...))
//	// ...
//	pool, err := f.NewPool(ctx, cfg)
//
// RDS requires TLS for IAM authentication; keep sslmode=verify-full (with
// the RDS CA bundle, or sslrootcert=system where the RDS CAs are in the
// system pool), unlike with the Cloud SQL connector, which encrypts on its
// own.
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
// The retry after a 28000 is done by holdfast's Factory.Acquire and
// Factory.Start (and Factory.NewPool), which call the password function
// again for the new connection. pool.Ping and pool.Acquire, which bypass
// the Factory, do not retry it.
//
// # Secrets
//
// A token is a bearer credential for 15 minutes. It never appears in a
// [TokenError] or a [ConfigError], and holdfast never logs passwords. The
// AWS secret key is not part of the token (only its signature is).
package rdsiam
