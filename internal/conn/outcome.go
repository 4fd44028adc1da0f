package conn

import "strings"

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
