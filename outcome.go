package holdfast

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/holdfast-db/holdfast/classify"
)

// ErrOutcomeUnknown is matched (errors.Is) by every *OutcomeUnknownError:
// a statement or COMMIT that may have committed reached the server, and
// its answer never came back.
var ErrOutcomeUnknown = errors.New("holdfast: outcome unknown")

// ReasonOutcomeUnknown is the classify reason of an *OutcomeUnknownError,
// and of pgconn's ErrConnClosed "after a request may already have been
// sent" (what pgx returns when the answer to a simple-protocol statement
// is lost).
const ReasonOutcomeUnknown = "outcome-unknown"

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
// runners ([Factory.BeginTxFunc], sqldb.BeginTxFunc), which never re-run
// a transaction whose COMMIT's outcome is unknown.
type OutcomeUnknownError struct {
	// Statement says what was in flight: "COMMIT", "statement" (one
	// outside a transaction), "batch" or "copy".
	Statement string
	Err       error
}

func (e *OutcomeUnknownError) Error() string {
	return "holdfast: outcome unknown: the " + e.Statement + " reached the server and its answer was lost (it may have committed; do not resend it blindly): " + e.Err.Error()
}

// Unwrap returns Err.
func (e *OutcomeUnknownError) Unwrap() error { return e.Err }

// Is matches [ErrOutcomeUnknown].
func (e *OutcomeUnknownError) Is(target error) bool { return target == ErrOutcomeUnknown }

// outcomeRule classifies a statement whose answer was lost as Fatal
// "outcome-unknown", ahead of every other rule: whatever broke the
// connection, what was in flight decides. That is an *OutcomeUnknownError
// (the connector marks it), or pgconn's ErrConnClosed "after a request may
// already have been sent": pgx returns it, dropping the connection's own
// error, when the answer to a simple-protocol statement is lost (an
// autocommit INSERT without arguments, a COMMIT). pgx does not return it
// for a connection attempt.
func outcomeRule(err error) (classify.Verdict, bool) {
	if errors.Is(err, ErrOutcomeUnknown) || closedInFlight(err) {
		return classify.Verdict{Class: classify.Fatal, Reason: ReasonOutcomeUnknown}, true
	}
	return classify.Verdict{}, false
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
