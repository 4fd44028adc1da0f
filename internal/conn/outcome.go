package conn

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// This file tells what a connection has in flight from what it writes
// (pgx's frontend messages), so that a connection that fails can say
// whether the statement it lost may have committed (the connector then
// returns the face's OutcomeUnknownError: Errors.OutcomeUnknown).

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

// inflightNames name what was in flight, for Errors.OutcomeUnknown.
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
		var end string // the end of the comment s starts with
		switch {
		case strings.HasPrefix(s, "--"):
			end = "\n"
		case strings.HasPrefix(s, "/*"):
			end = "*/"
		}
		if end == "" {
			break
		}
		i := strings.Index(s, end)
		if i < 0 {
			return "", ""
		}
		s = s[i+len(end):]
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

// startsRequest reports whether b starts a request: a simple query ('Q'),
// or a Parse or Bind ('P', 'B') of the extended protocol.
func startsRequest(b []byte) bool {
	return len(b) > 0 && (b[0] == 'Q' || b[0] == 'P' || b[0] == 'B')
}

// A statement whose answer was lost on a server in hot standby could not
// have committed anything there: a standby runs every transaction read
// only. The connection knows its server is one from what the server
// reports (inHotStandby): PostgreSQL 14 and later report in_hot_standby
// at connect and again, at the ReadyForQuery after it changed, when the
// server was promoted; an older server is asked pg_is_in_recovery() once
// at connect. A request counts as sent to a standby when the server said
// so at the last ReadyForQuery before it and has not said otherwise
// since (a promotion reported in the answer that was then lost). The
// window left: a standby promoted after that ReadyForQuery and before
// the statement began runs it read-write without having said so; on a
// server older than 14, a promotion at any time after connect.

// StandbyLostError is a statement that could commit (an autocommit
// statement, a batch, a copy, a COMMIT) whose answer was lost on a
// connection to a server in hot standby: nothing of it committed there.
// It is Transient (classify.ReasonStandbyLost): the face's outcome rule
// says so before calling a lost answer unknown, and a reader's runner
// re-runs a read once on a new connection. Err is the connection's
// failure.
type StandbyLostError struct {
	Statement string // what was in flight: "statement", "batch", "copy", "COMMIT"
	Err       error
}

func (e *StandbyLostError) Error() string {
	return "holdfast: the connection to a server in hot standby failed before the " + e.Statement +
		"'s answer came back (nothing commits on a standby: safe to run again): " + e.Err.Error()
}

// Unwrap returns Err.
func (e *StandbyLostError) Unwrap() error { return e.Err }

// hotStandby is the parameter PostgreSQL 14 and later report.
const hotStandby = "in_hot_standby"

// inHotStandby reports whether pc's server says it is in hot standby:
// its in_hot_standby (PostgreSQL 14 and later), else, for an older
// server (a server_version below 14, which reports neither
// in_hot_standby nor default_transaction_read_only), the answer of
// pg_is_in_recovery(), asked within ctx and the attempt's deadline. A
// server that does not say (an error, a proxy that hides it) is not one.
// It runs in AfterConnect, before the connection is handed out.
func inHotStandby(ctx context.Context, pc *pgconn.PgConn) bool {
	switch pc.ParameterStatus(hotStandby) {
	case "on":
		return true
	case "off":
		return false
	}
	if major, ok := serverMajor(pc.ParameterStatus("server_version")); !ok || major >= 14 {
		return false
	}
	res, err := pc.Exec(ctx, "SELECT pg_catalog.pg_is_in_recovery()").ReadAll()
	return err == nil && len(res) == 1 && len(res[0].Rows) == 1 && len(res[0].Rows[0]) == 1 && string(res[0].Rows[0][0]) == "t"
}

// serverMajor returns the major version of a server_version ("13.14",
// "9.6.24", "16beta1", "14.10 (Debian ...)").
func serverMajor(v string) (int, bool) {
	n, i := 0, 0
	for ; i < len(v) && v[i] >= '0' && v[i] <= '9' && i < 4; i++ {
		n = n*10 + int(v[i]-'0')
	}
	return n, i > 0
}

// stillStandby reports whether pc's server has not reported since that
// it left hot standby (a promotion). An older server reports nothing:
// its answer at connect stands.
func stillStandby(pc *pgconn.PgConn) bool { return pc.ParameterStatus(hotStandby) != "off" }

// LostOnStandby returns err as a *StandbyLostError when c, a connection
// an engine made, lost the answer to a request that could commit on a
// server in hot standby, else err as it is. pgx drops the connection's own
// error after a simple-protocol request (an Exec without arguments, a
// COMMIT) whose answer was lost and returns pgconn's ErrConnClosed; the
// face calls this for that error only, with the connection it ran on
// (still closed: pgxpool never hands it out again).
func LostOnStandby(c *pgx.Conn, err error) error {
	var sl *StandbyLostError
	if c == nil || err == nil || errors.As(err, &sl) || !OnStandby(c) {
		return err
	}
	s := stateOf(c)
	if k := s.inflight.Load(); mayCommit(k) && c.PgConn().IsClosed() {
		return &StandbyLostError{Statement: inflightNames[k], Err: err}
	}
	return err
}

// OnStandby reports whether c, a connection an engine made, is to a
// server that said it is in hot standby and has not said otherwise since
// (outcome.go). c must be one no other goroutine uses: a connection the
// caller holds, or one that failed (pgxpool never hands it out again).
func OnStandby(c *pgx.Conn) bool {
	s := stateOf(c)
	if s == nil || !s.standby.Load() {
		return false
	}
	pc := s.pc.Load()
	return pc != nil && stillStandby(pc)
}

// LayerRead is the retry layer of a reader's runner re-running a read
// whose standby's connection died (the face's ReadWrite.Read): once, on a
// new connection.
const LayerRead = "read"

// IsRead reports whether sql reads only, for the one re-run of a read
// lost on a standby: its first keyword is SELECT, VALUES, TABLE, SHOW or
// WITH, and no word of it writes or locks (INSERT, UPDATE, DELETE,
// MERGE, INTO, COPY, CALL, FOR UPDATE or SHARE, nextval, setval), even
// inside a literal or a name: anything else is not re-run. (A function
// that writes fails on a standby whatever calls it; the rule keeps a
// write that the application sent by the reader's runner from being sent
// twice should its server have been promoted unseen: see StandbyLostError.)
func IsRead(sql string) bool {
	kw, rest := firstKeyword(sql)
	switch kw {
	case "select", "values", "table", "show", "with":
	default:
		return false
	}
	for i := 0; i < len(rest); {
		for i < len(rest) && !isWordByte(rest[i]) {
			i++
		}
		j := i
		for j < len(rest) && isWordByte(rest[j]) {
			j++
		}
		if j-i <= 8 { // the longest word below
			switch strings.ToLower(rest[i:j]) {
			case "insert", "update", "delete", "merge", "into", "copy", "call", "share", "nextval", "setval":
				return false
			}
		}
		i = j
	}
	return true
}

func isWordByte(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b|0x20 >= 'a' && b|0x20 <= 'z'
}
