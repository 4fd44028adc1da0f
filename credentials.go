package holdfast

import (
	"context"
	"fmt"
	"time"

	"github.com/holdfast-db/holdfast/internal/conn"
)

// Credentials are what a credentials function ([WithCredentialsFunc])
// returns for a connection: the user and the password (or token) it logs
// in with, and how long they may be reused for other connections.
type Credentials struct {
	// User is the database user. Empty: the pool config's user.
	User string
	// Password is the password or token. It is never logged, and holdfast
	// removes it from the errors it returns.
	Password string
	// TTL is how long the factory reuses these credentials for its new
	// connections before it calls the function again. 0: not reused (every
	// new connection calls the function; concurrent ones share one call).
	TTL time.Duration
}

// String hides the password, so that credentials printed by mistake (a
// %v, a context value) show none.
func (c Credentials) String() string {
	return fmt.Sprintf("holdfast.Credentials{User: %q, Password: [REDACTED], TTL: %s}", c.User, c.TTL)
}

// GoString is String, for %#v.
func (c Credentials) GoString() string { return c.String() }

// WithCredentialsFunc makes every new connection log in with the user and
// password that fn returns (a secret of a secrets manager that rotates, an
// IAM token with its user): one call returns both, so that a rotation that
// alternates between two users works (the connection's user is set from
// Credentials.User unless it is empty). host is the name of the server the
// connection reaches, as for [WithHostPasswordFunc].
//
// The factory caches the answer for Credentials.TTL and shares it between
// its pools' new connections, and it never has more than one call of fn
// in flight: concurrent connects wait for the one call (each wait bounded
// by its own context) instead of calling the secrets API all at once.
// When the server refuses the credentials (SQLSTATE 28P01 or 28000), the
// cached answer is dropped and the one retry that such a failure gets
// (inside the connect after 28000, from Factory.Acquire, Factory.Start and
// sqldb after 28P01; charged to the retry budget and bounded by the
// policy, as a fresh token is) calls fn again: a call forced by a refusal
// is never served from the cache, and [RefusedCredentials] tells fn which
// credentials were refused (a rotation may have changed the password: try
// the new one).
//
// Failures of fn are classified and retried like a password function's
// (see [WithPasswordFunc]): each call is bounded by the policy's
// AttemptTimeout, a panic is recovered into a Fatal *PanicError. The
// passwords fn returns are never logged, and are removed from the errors
// holdfast returns. It cannot be combined with WithPasswordFunc,
// WithHostPasswordFunc or an integration's password function (New returns
// a *ConfigError).
func WithCredentialsFunc(fn func(ctx context.Context, host string) (Credentials, error)) Option {
	if fn == nil {
		return func(c *config) { c.fail(&ConfigError{Field: "WithCredentialsFunc", Why: "the function is nil"}) }
	}
	return withCredentials("WithCredentialsFunc", fn)
}

func withCredentials(by string, fn func(ctx context.Context, host string) (Credentials, error)) Option {
	return func(c *config) {
		if c.password != nil || c.credentials != nil {
			c.fail(&ConfigError{Field: by, Why: "a password function is already set by " + c.passwordBy})
			return
		}
		c.credentials, c.passwordBy = fn, by
	}
}

// RefusedCredentials returns, in the context of a call of a
// [WithCredentialsFunc] function, the credentials whose refusal by the
// server (SQLSTATE 28P01 or 28000) forced the call, and true; false when
// the call was not forced (the cache was empty or expired). A source that
// knows of rotations uses it: rdssecrets tries the AWSPENDING version of
// a secret when the refused credentials are still its AWSCURRENT one.
func RefusedCredentials(ctx context.Context) (Credentials, bool) {
	cr, ok := conn.Refused(ctx)
	return Credentials{User: cr.User, Password: cr.Password, TTL: cr.TTL}, ok
}

// CredentialsCalls returns how many times the factory called its
// [WithCredentialsFunc] function (0 without one): for tests and
// diagnostics of the cache.
func (f *Factory) CredentialsCalls() int64 {
	if f == nil || f.e == nil {
		return 0
	}
	return f.e.CredentialsCalls()
}
