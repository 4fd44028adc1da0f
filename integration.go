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
	// function, as [WithPasswordFunc] (which cannot be combined with it).
	Password func(ctx context.Context) (string, error)

	// HostPassword is Password for a token issued for a host name, as
	// [WithHostPasswordFunc]: it is told the name of the server the
	// connection reaches. Set at most one of Password and HostPassword.
	HostPassword func(ctx context.Context, host string) (string, error)

	// Credentials is the credentials function, as [WithCredentialsFunc]
	// (a user and a password, cached for their TTL). Set at most one of
	// Password, HostPassword and Credentials.
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

// WithIntegration applies in to the factory (see [Integration]). A factory
// takes at most one Dial and one password function: two integrations that
// both set one, or an Integration.Password or HostPassword together with
// WithPasswordFunc or WithHostPasswordFunc, make New return a *ConfigError.
func WithIntegration(in Integration) Option {
	return func(c *config) {
		name := in.Name
		if name == "" {
			name = "WithIntegration"
		}
		if in.Err != nil {
			c.fail(&ConfigError{Field: name, Why: "invalid arguments", Err: in.Err})
			return
		}
		for _, r := range in.Rules {
			if r == nil {
				c.fail(&ConfigError{Field: name, Why: "a classification rule is nil"})
				return
			}
		}
		if in.Dial != nil {
			if c.dial != nil {
				c.fail(&ConfigError{Field: name, Why: "a dial function is already set by " + c.dialBy})
				return
			}
			c.dial, c.dialBy, c.dialEncrypted = in.Dial, name, in.Encrypted
		}
		if in.Password != nil && in.HostPassword != nil {
			c.fail(&ConfigError{Field: name, Why: "both Password and HostPassword are set"})
			return
		}
		if in.Credentials != nil {
			if in.Password != nil || in.HostPassword != nil {
				c.fail(&ConfigError{Field: name, Why: "both Credentials and a password function are set"})
				return
			}
			withCredentials(name, in.Credentials)(c)
		}
		pw := in.HostPassword
		if fn := in.Password; fn != nil {
			pw = func(ctx context.Context, _ string) (string, error) { return fn(ctx) }
		}
		if pw != nil {
			if c.password != nil || c.credentials != nil {
				c.fail(&ConfigError{Field: name, Why: "a password function is already set by " + c.passwordBy})
				return
			}
			c.password, c.passwordBy = pw, name
		}
		c.authRetry = c.authRetry || in.RetryAuthFailure
		c.integrationRules = append(c.integrationRules, in.Rules...)
		c.typeRules = append(c.typeRules, in.TypeRules...)
		if in.RetryPolicy != nil {
			c.integrationPolicy = in.RetryPolicy
		}
		if in.StartupPolicy != nil {
			c.integrationStartup = in.StartupPolicy
		}
	}
}

// WithDialFunc makes every connection of the factory's pools dial through
// fn (an SSH tunnel, a sidecar's socket, a custom dialer) instead of pgx's
// default dialer or a DialFunc on the pool config; holdfast wraps it with
// classification and bounded retry. It is WithIntegration(Integration{Name:
// "WithDialFunc", Dial: fn}). For a dialer that encrypts the connection
// itself, use WithIntegration with Encrypted set.
func WithDialFunc(fn pgconn.DialFunc) Option {
	if fn == nil {
		return func(c *config) { c.fail(&ConfigError{Field: "WithDialFunc", Why: "the function is nil"}) }
	}
	return WithIntegration(Integration{Name: "WithDialFunc", Dial: fn})
}
