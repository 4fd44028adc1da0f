package holdfast

import (
	"context"
	"fmt"
	"time"

	"github.com/holdfast-db/holdfast/internal/conn"
)

// Credentials are what a credentials function (Integration.Credentials,
// package rdssecrets) returns for a connection: the user and the password
// (or token) it logs in with, and how long they may be reused for other
// connections.
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

// Format hides the password whatever the verb, so that credentials
// printed by mistake (a %v, a %#v, a log attribute) show none:
// holdfast.Credentials{User: "app", Password: [REDACTED], TTL: 1m0s}.
func (c Credentials) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "holdfast.Credentials{User: %q, Password: [REDACTED], TTL: %s}", c.User, c.TTL)
}

// RefusedCredentials returns, in the context of a call of a credentials
// function (Integration.Credentials), the credentials whose refusal by
// the server (SQLSTATE 28P01 or 28000) forced the call, and true; false
// when the call was not forced (the cache was empty or expired). A source
// that knows of rotations uses it: rdssecrets tries the AWSPENDING version
// of a secret when the refused credentials are still its AWSCURRENT one.
func RefusedCredentials(ctx context.Context) (Credentials, bool) {
	cr, ok := conn.Refused(ctx)
	return Credentials{User: cr.User, Password: cr.Password, TTL: cr.TTL}, ok
}
