package holdfast

import (
	"errors"
	"strings"
	"time"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/internal/cfgerr"
	"github.com/holdfast-db/holdfast/internal/conn"
	"github.com/holdfast-db/holdfast/internal/outage"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ConfigError reports a nil or nonsense option, argument or configuration
// field, of any holdfast package: holdfast.New and Factory.Configure
// report bluegreen's and failover's with it, and sqldb.ConfigError,
// readiness.ConfigError, cloudsql.ConfigError, rdsiam.ConfigError and
// rdssecrets.ConfigError are this type under their package's name, so one
// errors.As finds any of them, and errors.Is(err, ErrInvalidConfig)
// matches every one. It is not retryable: fix the configuration.
//
// Error reads "<Pkg>: invalid <Field>: <Why>", followed by ": <Err>" when
// Err is set, for example
//
//	holdfast: invalid WithRetryPolicy: invalid policy: retry: invalid InitialInterval 0s: must be positive (...)
//	bluegreen: invalid HighInterval: must not be negative (zero means the default 100ms)
type ConfigError struct {
	// Pkg is the package that reports the error: "holdfast",
	// "bluegreen", "failover", "sqldb", "readiness", "cloudsql",
	// "rdsiam", "rdssecrets". Empty reads as "holdfast".
	Pkg string
	// Field is the option, argument or configuration field at fault, as
	// you wrote it: an option ("WithRetryPolicy", "PoolName"), an
	// argument ("pool", "fn"), or a field ("Config.HoldTimeout",
	// "pgxpool.Config.ConnConfig.DialFunc"). Empty reads as
	// "configuration".
	Field string
	// Why says what is wrong with it, and often how to fix it.
	Why string
	// Err is the underlying error, if any: another package's
	// *ConfigError (WithBlueGreen wraps bluegreen's), a
	// *retry.InvalidPolicyError, a parse error.
	Err error
}

// Error returns "<Pkg>: invalid <Field>: <Why>", followed by ": <Err>"
// when Err is set.
func (e *ConfigError) Error() string { return (*cfgerr.Error)(e).Error() }

// Unwrap returns [ErrInvalidConfig] and Err (when set): errors.Is
// matches both.
func (e *ConfigError) Unwrap() []error { return unwrapList(ErrInvalidConfig, e.Err) }

// ErrInvalidConfig is matched (errors.Is) by every *ConfigError. The
// ErrInvalidConfig of the other packages (bluegreen, sqldb, readiness,
// cloudsql, rdsiam, rdssecrets) is this error.
var ErrInvalidConfig = cfgerr.ErrInvalid

// configErr returns err with holdfast's internal configuration errors
// (those of the engine and of the bluegreen and failover layers, which
// cannot name this package's type) turned into *ConfigError, Err
// included; any other error as it is.
func configErr(err error) error {
	if ce, ok := err.(*cfgerr.Error); ok && ce != nil {
		return configErrorOf(ce)
	}
	return err
}

// configErrorOf is the *ConfigError of e, and of its Err when that is
// another of them.
func configErrorOf(e *cfgerr.Error) *ConfigError {
	return &ConfigError{Pkg: e.Pkg, Field: e.Field, Why: e.Why, Err: configErr(e.Err)}
}

// ConnectError is a connection that could not be made, after the
// factory's retries. Its text is one line: pgx's own error for the attempt
// that decided, then one holdfast clause with the attempts made for the
// caller, how long they took and why they stopped, and what to check:
//
//	failed to connect to `user=app database=orders`: 10.0.0.5:5432 (db.internal): dial error: dial tcp 10.0.0.5:5432: connect: connection refused (holdfast: 15 attempts in 4.45s, gave up: attempts exhausted; nothing accepts connections at db.internal:5432: ...)
//	failed to connect to `user=app database=orders`: 10.0.0.5:5432 (db.internal): server error: FATAL: database "orders" does not exist (SQLSTATE 3D000) (holdfast: not retried; no database "orders" on db.internal:5432: check dbname in the connection string)
//
// Factory.NewPool and Start, Factory.Acquire, DBTX, the transaction
// runner and package sqldb return it. A pool's own paths (pool.Query,
// Exec, Acquire, ...) return pgx's *pgconn.ConnectError, which pgxpool
// hands back unchanged: a dial that gave up (a refused port, a missing
// socket, a timeout) is one line there too, whose *ConnectError of Layer
// "connect" (with its Hint) errors.As finds inside pgx's; a handshake
// tried several times reads as pgx writes it, one line per attempt, then
// the line that ends the retries, with the attempts.
//
// Whether it is worth trying again later is what Factory.Classify says
// of it: a Transient cause means the database may come back (report
// not-ready and try again later); a Fatal one is a mistake to fix (a
// password, a database name, TLS), and its Hint says what to
// check. errors.Is and errors.As reach the cause through Err: pgx's
// *pgconn.ConnectError and the server's *pgconn.PgError, the *retry.Error
// of the loop that gave up.
type ConnectError struct {
	// Layer says where it failed:
	//
	//	"connect"   a dial and its handshake, inside pgx's DialFunc
	//	"password"  a password, token or credentials fetch, inside BeforeConnect
	//	"startup"   a pool's first connection (NewPool, Factory.Start, sqldb.Open)
	Layer string
	// Attempts is how many connection attempts were made for the caller,
	// across holdfast's retries (1: not retried).
	Attempts int
	// Err is the failure: pgx's error, or the *retry.Error of the loop
	// that gave up (wrapping the last failure).
	Err error
	// Hint says what to check, in the words of the configuration (the
	// connection string's keywords, the options' names): the hint of the
	// ERROR log line of the same failure. "" when the error says it all.
	Hint string

	f *conn.Failure // the one line; nil for a ConnectError made elsewhere
}

// Error returns the one line (see [ConnectError]).
func (e *ConnectError) Error() string {
	if e.f != nil {
		return e.f.Text()
	}
	return "holdfast: " + e.Layer + ": " + e.Err.Error()
}

// Unwrap returns Err.
func (e *ConnectError) Unwrap() error { return e.Err }

// ErrQueued is matched (errors.Is) by a connect that the pool's admission
// limit (WithConnectLimit) did not admit before its wait ended: its wait
// reached its bound (the caller's deadline, the retry policy's MaxElapsed
// or AttemptTimeout, pgx's ConnectTimeout) before a slot was free, and
// nothing was dialed. It is Transient ("connect-queued"): the pool was
// busy connecting, not refused, and a later connect may be admitted; but
// it already waited its bound, so Factory.Acquire returns it as it is.
var ErrQueued = conn.ErrQueued

// ErrOutcomeUnknown is matched (errors.Is) by every *OutcomeUnknownError:
// a statement or COMMIT that may have committed reached the server, and
// its answer never came back. A server in hot standby commits nothing: the
// same loss there is Transient "lost-on-standby" (see OutcomeUnknownError).
var ErrOutcomeUnknown = errors.New("holdfast: outcome unknown")

// OutcomeUnknownError says that a statement that could commit — a COMMIT,
// or a statement outside a transaction, which commits on its own — was
// sent on a connection that then failed before its answer came back (the
// server closed it, the network broke, a failover cut it). The server may
// have committed it or not: from the client side the two cannot be told
// apart. It is Fatal ("outcome-unknown"): never resend it blindly; find
// out first (read back a business key, or make the write idempotent, for
// example with an idempotency key under a unique constraint). Err is the
// connection's failure (errors.As reaches a *failover.CutError, a network
// error, io.ErrUnexpectedEOF).
//
// holdfast returns it on every pool path (pool.Exec, tx.Commit, a batch,
// CopyFrom, database/sql through package sqldb) and from the transaction
// runner ([Factory.RunTx], sqldb.RunTx), which never re-runs a transaction
// whose COMMIT's outcome is unknown.
//
// Not on a server in hot standby, which runs every transaction read-only:
// a connection whose server said so (in_hot_standby=on, PostgreSQL 14 and
// later, at connect and not otherwise since; pg_is_in_recovery() at
// connect on an older server) returns the same loss as an error that
// Classify says is Transient "lost-on-standby" (errors.As reaches the
// cause), and the runner re-runs a read-only transaction whose COMMIT's
// answer was lost there. pgx's ErrConnClosed on a pool's own path (see
// outcomeRule) stays "outcome-unknown".
type OutcomeUnknownError struct {
	// Statement says what was in flight: "COMMIT", "statement" (one
	// outside a transaction), "batch" or "copy".
	Statement string
	Err       error
}

func (e *OutcomeUnknownError) Error() string {
	return "holdfast: outcome unknown: the " + e.Statement + " reached the server and its answer was lost (it may have committed; do not resend it blindly): " + e.Err.Error()
}

// Unwrap returns [ErrOutcomeUnknown] and Err (when set): errors.Is and
// errors.As reach both.
func (e *OutcomeUnknownError) Unwrap() []error { return unwrapList(ErrOutcomeUnknown, e.Err) }

// ErrDatabaseDown is matched (errors.Is) by every *DatabaseDownError.
var ErrDatabaseDown = outage.ErrDown

// DatabaseDownError says that a request needed a new connection while its
// pool's database was down (see [WithOutage]: it stopped accepting
// connections, or, for a pool meant for writes, only a read-only server
// answers at its name), and that its wait for the database to come back
// ended first: at HoldFor, or at the request's own deadline (Err is then
// the context's error: errors.Is(err, context.DeadlineExceeded) holds).
// Nothing was sent. It is Transient ("database-down"): the database may
// come back, and a later request may succeed; but it already waited its
// bound, so Factory.Acquire, DBTX, sqldb and the transaction runner return
// it as it is. Its text is one line:
//
//	holdfast: database down: orders has not accepted connections for 7.2s; this request waited 5s (its deadline); last check: dial tcp 10.0.0.5:5432: connect: connection refused (requests go on as soon as it answers again: check the server, its failover, its address)
//
// Factory.Acquire, DBTX, sqldb and RunTx return it when the caller's
// deadline ends the wait. The pool's own paths (pool.Query, Exec,
// Acquire) return it when HoldFor ends the wait; when the caller's
// deadline does, pgxpool returns the context's error itself.
type DatabaseDownError struct {
	Pool   string        // the pool's name (PoolName, else "host:port/database")
	Down   time.Duration // how long the database had been down when the wait ended
	Waited time.Duration // how long this request waited (0: not known)
	// Cause is the last failed check of the pool's prober (a refused
	// dial, a timeout, 57P03, a read-only server); nil before the first.
	Cause error
	// Err is what ended the wait: the request's context's error, or nil
	// when HoldFor did.
	Err error

	bound  time.Duration // HoldFor; WakeFor while waking
	waking bool          // the database was waking (ServerlessV2), not found down
}

// Error returns the one line (see [DatabaseDownError]).
func (e *DatabaseDownError) Error() string {
	var b strings.Builder
	b.WriteString("holdfast: database down: ")
	b.WriteString(e.Pool)
	if e.waking {
		b.WriteString(" has been waking (ServerlessV2) for ")
	} else {
		b.WriteString(" has not accepted connections for ")
	}
	b.WriteString(roundSeconds(e.Down))
	switch {
	case e.Err != nil && e.Waited > 0:
		b.WriteString("; this request waited " + roundSeconds(e.Waited) + " (its deadline)")
	case e.Err != nil:
		b.WriteString("; this request's deadline ended first")
	case e.waking:
		b.WriteString("; this request waited " + roundSeconds(e.Waited) + " (ServerlessV2's WakeFor)")
	case e.bound < 0:
		b.WriteString("; this request did not wait (WithOutage's HoldFor is negative)")
	default:
		b.WriteString("; this request waited " + roundSeconds(e.Waited) + " (WithOutage's HoldFor)")
	}
	if e.Cause != nil {
		b.WriteString("; last check: ")
		b.WriteString(strings.ReplaceAll(e.Cause.Error(), "\n", "; "))
	}
	b.WriteString(" (requests go on as soon as it answers again: check the server, its failover, its address)")
	return b.String()
}

// roundSeconds writes d to the 100 ms, at least 0s.
func roundSeconds(d time.Duration) string {
	return max(d, 0).Round(100 * time.Millisecond).String()
}

// Unwrap returns [ErrDatabaseDown], Err and Cause (those set).
func (e *DatabaseDownError) Unwrap() []error { return unwrapList(ErrDatabaseDown, e.Err, e.Cause) }

// unwrapList is errs without the nil ones.
func unwrapList(errs ...error) []error {
	out := errs[:0]
	for _, err := range errs {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

// engineErrors make the face's errors for the engine.
var engineErrors = conn.Errors{
	Config: func(e *cfgerr.Error) error { return configErrorOf(e) },
	Connect: func(f *conn.Failure, err error) error {
		return &ConnectError{Layer: f.Layer, Attempts: max(f.Attempts, 1), Err: err, Hint: f.Hint, f: f}
	},
	FailureOf: func(err error) *conn.Failure {
		if ce, ok := err.(*ConnectError); ok && ce != nil {
			return ce.f
		}
		return nil
	},
	OutcomeUnknown: func(statement string, err error) error { return &OutcomeUnknownError{Statement: statement, Err: err} },
	Down: func(d outage.Down, pool string) error {
		down := time.Duration(0)
		if !d.Since.IsZero() {
			down = time.Since(d.Since)
		}
		return &DatabaseDownError{Pool: pool, Down: down, Waited: d.Waited, Cause: d.Cause, Err: d.Err, bound: d.Bound, waking: d.Waking}
	},
}

// outcomeRule classifies a statement whose answer was lost as Fatal
// "outcome-unknown", ahead of every other rule: whatever broke the
// connection, what was in flight decides. That is an *OutcomeUnknownError
// (the connector marks it), or pgconn's ErrConnClosed "after a request may
// already have been sent": pgx returns it, dropping the connection's own
// error, when the answer to a simple-protocol statement is lost (an
// autocommit INSERT without arguments, a COMMIT). pgx does not return it
// for a connection attempt.
//
// The same loss on a server in hot standby, which the connector marks
// (conn.StandbyLostError: the server said so at connect and since), is
// Transient "lost-on-standby": nothing commits on a standby. pgx's
// ErrConnClosed does not say which server it was: the runners that hold
// the connection (DBTX, the transaction runner) mark it (lostOnStandby);
// on a pool's own paths it stays unknown.
func outcomeRule(err error) (classify.Verdict, bool) {
	var sl *conn.StandbyLostError
	switch {
	case errors.As(err, &sl):
		return classify.Verdict{Class: classify.Transient, Reason: classify.ReasonStandbyLost}, true
	case errors.Is(err, ErrOutcomeUnknown) || closedInFlight(err):
		return classify.Verdict{Class: classify.Fatal, Reason: classify.ReasonOutcomeUnknown}, true
	}
	return classify.Verdict{}, false
}

// lostOnStandby returns err marked as a loss on a server in hot standby
// (conn.StandbyLostError) when it is pgx's ErrConnClosed after a request
// (closedInFlight) on c, a connection the factory made to a standby; else
// err. For the runners that hold the connection a statement ran on.
func lostOnStandby(c *pgx.Conn, err error) error {
	if err == nil || !closedInFlight(err) {
		return err
	}
	return conn.LostOnStandby(c, err)
}

// closedInFlight reports whether err's chain holds pgconn's error for an
// operation whose connection an earlier failure of the same operation
// closed, after a request may already have been sent: it wraps
// pgconn.ErrConnClosed directly and its SafeToRetry says false.
func closedInFlight(err error) bool {
	for depth := 0; err != nil && depth < 32; depth++ {
		if sr, ok := err.(interface{ SafeToRetry() bool }); ok && !sr.SafeToRetry() {
			if u, ok := err.(interface{ Unwrap() error }); ok && u.Unwrap() == pgconn.ErrConnClosed {
				return true
			}
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if closedInFlight(e) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}
