package holdfast

import (
	"context"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/retry"
)

// Integration describes how a factory's pools reach a managed database
// when pgx's own TCP dial and the connection string's password are not
// enough: a connector that dials and encrypts (Cloud SQL), a token minted
// per connection (RDS IAM), and the error types and policies that go with
// them. Packages cloudsql and rdsiam build one (cloudsql.With, rdsiam.With);
// anything else can too, with [WithIntegration]. Every field is optional.
//
// An Integration is plain data, applied by New: it does not depend on the
// order of the options or on being called before or after Configure.
type Integration struct {
	// Name names the integration in errors ("cloudsql", "rdsiam").
	Name string

	// Dial, when set, replaces pgx's dial (and any DialFunc on the pool
	// configs) for every pool the factory configures. holdfast still wraps
	// it with classification and bounded retry.
	Dial pgconn.DialFunc

	// Encrypted says that Dial returns an encrypted, authenticated
	// connection (the Cloud SQL connector, a local auth proxy). The factory
	// then turns pgx's own TLS off for the pools (clears TLSConfig and
	// Fallbacks, exactly what sslmode=disable does, so that pgx dials once
	// per connect instead of twice with sslmode=prefer), and passes host
	// names to Dial unresolved (LookupFunc returns the host as it is).
	Encrypted bool

	// RetryAuthFailure gives a connection that failed authentication
	// (SQLSTATE 28000) one more attempt on a fresh dial, as a password
	// function does with a fresh token: for a dial that authenticates by
	// itself (the Cloud SQL connector's automatic IAM authentication, whose
	// login sometimes fails once and then works).
	RetryAuthFailure bool

	// Password, when set, is the per-connection password or token
	// function, as [WithPasswordFunc] (which cannot be combined with it):
	// host is the name of the server the connection reaches, to issue a
	// token for.
	Password func(ctx context.Context, host string) (string, error)

	// Credentials, when set, is the credentials function: every new
	// connection logs in with the user and password it returns (a secret
	// of a secrets manager that rotates, an IAM token with its user), so
	// that a rotation that alternates between two users works (the
	// connection's user is set from Credentials.User unless it is empty);
	// host is as for Password. The factory caches the answer for
	// Credentials.TTL and shares it between its pools' new connections,
	// and it never has more than one call in flight: concurrent connects
	// wait for the one call (each wait bounded by its own context). When
	// the server refuses the credentials (SQLSTATE 28P01 or 28000), the
	// cached answer is dropped and the one retry that such a failure gets
	// calls the function again, never served from the cache, and
	// [RefusedCredentials] tells the function which credentials were
	// refused. Failures are classified and retried like a password
	// function's. Set at most one of Password and Credentials.
	Credentials func(ctx context.Context, host string) (Credentials, error)

	// Rules and TypeRules extend the factory's classifier, after the rules
	// of WithClassifier (see classify.Rule and classify.TypeRule).
	Rules     []classify.Rule
	TypeRules []classify.TypeRule

	// RetryPolicy and StartupPolicy, when set, replace the factory's
	// defaults; an explicit WithRetryPolicy or WithStartupPolicy, among the
	// options in any order, still wins.
	RetryPolicy   *retry.Policy
	StartupPolicy *retry.Policy

	// Err, when set, makes New return a *ConfigError wrapping it: how a
	// constructor such as cloudsql.With reports bad arguments.
	Err error
}
