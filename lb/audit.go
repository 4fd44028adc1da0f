package lb

import (
	"context"
	"log/slog"
	"time"
)

// Result is the outcome of a control request, as recorded in the audit
// trail.
type Result string

// Results.
const (
	ResultRunning    Result = "running"     // recorded when the work starts; a crash leaves it so
	ResultOK         Result = "ok"          // every member reached the wanted state (and drained)
	ResultNotDrained Result = "not-drained" // a drain ended with connections left: abort the deploy
	ResultRefused    Result = "refused"     // the operator may not control the group; nothing was called
	ResultLocked     Result = "locked"      // another owner holds the group; nothing was called
	ResultInvalid    Result = "invalid"     // bad request (unknown group or node); nothing was called
	ResultFailed     Result = "failed"      // an API, database or state error
	ResultCanceled   Result = "canceled"    // the caller's context ended
)

// Entry is one control request and its result in the audit trail.
type Entry struct {
	ID       int64         // assigned by the AuditLog on first Record; 0 before
	Started  time.Time     // when the request arrived
	Duration time.Duration // until the result; 0 while running
	Operator string        // who asked
	Host     string        // where the request ran
	Action   Action        // what was asked
	Group    string        // which group
	Nodes    []string      // the members concerned, as Target strings
	Members  []MemberRecord
	Result   Result
	Error    string // the error message, "" on success; never holds a secret
}

// MemberRecord is what happened to one member, in an [Entry].
type MemberRecord struct {
	Balancer    string `json:"balancer"`
	Member      string `json:"member"`
	Before      string `json:"before"`       // admin state before
	After       string `json:"after"`        // admin state after
	ConnsBefore int64  `json:"conns_before"` // ConnsUnknown (-1) when not read
	ConnsAfter  int64  `json:"conns_after"`  // last reading; -1 when not read
	FirstConns  int64  `json:"first_conns"`  // drains: first poll after forcing offline
	Polls       int    `json:"polls"`        // drains: polls made
	DurationMS  int64  `json:"duration_ms"`
	Drained     bool   `json:"drained"`
	Changed     bool   `json:"changed"` // a state change was sent
	Error       string `json:"error,omitempty"`
}

// AuditLog stores control requests and their results. [*PGStore] is the
// implementation. Record is called once when the work starts (Result
// ResultRunning) and once with the result, or once for a request refused
// up front; it assigns e.ID on the first call and updates the entry on
// later ones.
type AuditLog interface {
	Record(ctx context.Context, e *Entry) error
}

// logEntry writes the structured audit line.
func logEntry(ctx context.Context, l *slog.Logger, e *Entry) {
	level := slog.LevelInfo
	switch e.Result {
	case ResultRefused, ResultLocked, ResultNotDrained, ResultInvalid, ResultCanceled:
		level = slog.LevelWarn
	case ResultFailed:
		level = slog.LevelError
	}
	attrs := []slog.Attr{
		slog.Int64("audit_id", e.ID),
		slog.String("operator", e.Operator),
		slog.String("host", e.Host),
		slog.String("action", string(e.Action)),
		slog.String("group", e.Group),
		slog.Any("nodes", e.Nodes),
		slog.String("result", string(e.Result)),
		slog.Duration("duration", e.Duration),
	}
	if e.Error != "" {
		attrs = append(attrs, slog.String("error", e.Error))
	}
	attrs = append(attrs, slog.Any("members", e.Members))
	msg := "lb control"
	if e.Result == ResultRunning {
		msg = "lb control started"
	}
	l.LogAttrs(ctx, level, msg, attrs...)
}
