package holdfast

import (
	"context"
	"errors"
	"strings"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/jackc/pgx/v5"
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

// stmtTracer is the connector's tracer of one connection: it keeps what
// the connection has in flight (connState.inflight), so that a failure of
// the connection in the middle of a statement that could commit is told
// apart (an *OutcomeUnknownError) from one that could not. It forwards
// every call to the tracer that was on the connection.
type stmtTracer struct {
	c       *connState
	next    pgx.QueryTracer
	batch   pgx.BatchTracer
	copy    pgx.CopyFromTracer
	prepare pgx.PrepareTracer
	connect pgx.ConnectTracer
}

func newStmtTracer(c *connState, next pgx.QueryTracer) *stmtTracer {
	t := &stmtTracer{c: c, next: next}
	if next != nil {
		t.batch, _ = next.(pgx.BatchTracer)
		t.copy, _ = next.(pgx.CopyFromTracer)
		t.prepare, _ = next.(pgx.PrepareTracer)
		t.connect, _ = next.(pgx.ConnectTracer)
	}
	return t
}

func (t *stmtTracer) TraceQueryStart(ctx context.Context, conn *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	kind := statementKind(d.SQL, conn.PgConn().TxStatus())
	if t.c.committing.Load() && kind != inflightNone {
		kind = inflightCommit // the runner's COMMIT, whatever its text (pgx.TxOptions.CommitQuery)
	}
	t.c.inflight.Store(kind)
	if t.next != nil {
		return t.next.TraceQueryStart(ctx, conn, d)
	}
	return ctx
}

func (t *stmtTracer) TraceQueryEnd(ctx context.Context, conn *pgx.Conn, d pgx.TraceQueryEndData) {
	t.c.inflight.Store(inflightNone)
	if t.next != nil {
		t.next.TraceQueryEnd(ctx, conn, d)
	}
}

func (t *stmtTracer) TraceBatchStart(ctx context.Context, conn *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	kind := inflightInTx
	if conn.PgConn().TxStatus() == 'I' {
		kind = inflightBatch
	}
	t.c.inflight.Store(kind)
	if t.batch != nil {
		return t.batch.TraceBatchStart(ctx, conn, d)
	}
	return ctx
}

func (t *stmtTracer) TraceBatchQuery(ctx context.Context, conn *pgx.Conn, d pgx.TraceBatchQueryData) {
	if t.batch != nil {
		t.batch.TraceBatchQuery(ctx, conn, d)
	}
}

func (t *stmtTracer) TraceBatchEnd(ctx context.Context, conn *pgx.Conn, d pgx.TraceBatchEndData) {
	t.c.inflight.Store(inflightNone)
	if t.batch != nil {
		t.batch.TraceBatchEnd(ctx, conn, d)
	}
}

func (t *stmtTracer) TraceCopyFromStart(ctx context.Context, conn *pgx.Conn, d pgx.TraceCopyFromStartData) context.Context {
	kind := inflightInTx
	if conn.PgConn().TxStatus() == 'I' {
		kind = inflightCopy
	}
	t.c.inflight.Store(kind)
	if t.copy != nil {
		return t.copy.TraceCopyFromStart(ctx, conn, d)
	}
	return ctx
}

func (t *stmtTracer) TraceCopyFromEnd(ctx context.Context, conn *pgx.Conn, d pgx.TraceCopyFromEndData) {
	t.c.inflight.Store(inflightNone)
	if t.copy != nil {
		t.copy.TraceCopyFromEnd(ctx, conn, d)
	}
}

func (t *stmtTracer) TracePrepareStart(ctx context.Context, conn *pgx.Conn, d pgx.TracePrepareStartData) context.Context {
	if t.prepare != nil {
		return t.prepare.TracePrepareStart(ctx, conn, d)
	}
	return ctx
}

func (t *stmtTracer) TracePrepareEnd(ctx context.Context, conn *pgx.Conn, d pgx.TracePrepareEndData) {
	if t.prepare != nil {
		t.prepare.TracePrepareEnd(ctx, conn, d)
	}
}

func (t *stmtTracer) TraceConnectStart(ctx context.Context, d pgx.TraceConnectStartData) context.Context {
	if t.connect != nil {
		return t.connect.TraceConnectStart(ctx, d)
	}
	return ctx
}

func (t *stmtTracer) TraceConnectEnd(ctx context.Context, d pgx.TraceConnectEndData) {
	if t.connect != nil {
		t.connect.TraceConnectEnd(ctx, d)
	}
}
