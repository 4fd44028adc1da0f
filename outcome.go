package holdfast

import (
	"errors"
	"strings"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/jackc/pgx/v5/pgconn"
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

// What a connection has in flight, for its failure: nothing (or nothing
// that could commit), a statement of an open transaction (the server
// rolls the transaction back when the connection breaks), or one that
// could commit.
const (
	inflightNone int32 = iota
	inflightInTx
	inflightAutocommit // a statement outside a transaction: it commits on its own
	inflightBatch      // a batch outside a transaction: pgx sends it as one implicit transaction
	inflightCopy       // CopyFrom outside a transaction
	inflightCommit
)

// inflightNames name what was in flight in an *OutcomeUnknownError.
var inflightNames = [...]string{inflightAutocommit: "statement", inflightBatch: "batch", inflightCopy: "copy", inflightCommit: "COMMIT"}

// mayCommit reports whether a connection that fails with kind in flight
// leaves the outcome unknown.
func mayCommit(kind int32) bool { return kind >= inflightAutocommit }

// statementKind tells what a statement in flight could do, from its first
// keyword and the transaction status before it (pgconn's TxStatus: 'I'
// outside a transaction).
func statementKind(sql string, txStatus byte) int32 {
	kw, rest := firstKeyword(sql)
	switch kw {
	case "commit", "end":
		return inflightCommit
	case "prepare":
		if next, _ := firstKeyword(rest); next == "transaction" {
			return inflightCommit // two-phase: the transaction is made durable
		}
		return inflightNone
	case "begin", "start", "rollback", "abort", "savepoint", "release", "show", "set", "reset",
		"discard", "deallocate", "listen", "unlisten", "":
		return inflightNone // nothing durable, in a transaction or out of one
	}
	if txStatus == 'I' {
		return inflightAutocommit
	}
	return inflightInTx
}

// firstKeyword returns the first word of sql, lowercased, after spaces
// and comments ("" for none: an empty query, a ping), and what follows it.
func firstKeyword(sql string) (string, string) {
	s := sql
	for {
		s = strings.TrimLeft(s, " \t\r\n;(")
		if strings.HasPrefix(s, "--") {
			i := strings.IndexByte(s, '\n')
			if i < 0 {
				return "", ""
			}
			s = s[i+1:]
			continue
		}
		if strings.HasPrefix(s, "/*") {
			i := strings.Index(s, "*/")
			if i < 0 {
				return "", ""
			}
			s = s[i+2:]
			continue
		}
		break
	}
	end := 0
	for end < len(s) && end < 16 && s[end]|0x20 >= 'a' && s[end]|0x20 <= 'z' {
		end++
	}
	return strings.ToLower(s[:end]), s[end:]
}

// noteRequest records, from the first message of what a connection
// writes, what it now has in flight: pgconn reads only for the answer to
// what it last wrote, so a read that fails fails that request. A simple
// query ('Q') and a Parse ('P') carry their SQL; a Bind ('B') of a
// prepared statement does not, and counts by the transaction status
// alone. Other messages (CopyData, Sync, Terminate, ...) continue a
// request. txStatus is pgconn's TxStatus before the request ('I' outside
// a transaction); committing: a transaction runner's COMMIT comes next.
func requestKind(b []byte, txStatus byte, committing bool, prev int32) int32 {
	if len(b) == 0 {
		return prev
	}
	var kind int32
	switch b[0] {
	case 'Q':
		kind = statementKind(cstring(b, 5), txStatus)
	case 'P', 'B':
		executes := countExecutes(b)
		switch {
		case executes == 0:
			return inflightNone // a Prepare (Parse, Describe, Sync): nothing runs
		case b[0] == 'P':
			name := cstring(b, 5)
			kind = statementKind(cstring(b, 5+len(name)+1), txStatus)
		case txStatus == 'I':
			kind = inflightAutocommit // a prepared statement: its text is not sent
		default:
			kind = inflightInTx
		}
		if executes > 1 && kind == inflightAutocommit {
			kind = inflightBatch // pgx sends a batch as one implicit transaction
		}
	default:
		return prev
	}
	if committing && kind != inflightNone {
		return inflightCommit // whatever its text (pgx.TxOptions.CommitQuery)
	}
	return kind
}

// cstring returns the NUL-terminated string of b at off ("" when b is
// shorter).
func cstring(b []byte, off int) string {
	if off >= len(b) {
		return ""
	}
	end := off
	for end < len(b) && b[end] != 0 {
		end++
	}
	return string(b[off:end])
}

// countExecutes counts the Execute messages ('E') of the extended-protocol
// request b, as far as b holds whole messages.
func countExecutes(b []byte) int {
	executes := 0
	for off := 0; off+5 <= len(b); {
		n := int(b[off+1])<<24 | int(b[off+2])<<16 | int(b[off+3])<<8 | int(b[off+4])
		if b[off] == 'E' {
			executes++
		}
		if n < 4 {
			break
		}
		off += 1 + n
	}
	return executes
}
