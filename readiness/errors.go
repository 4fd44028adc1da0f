package readiness

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/holdfast-db/holdfast/internal/cfgerr"
)

// Sentinels matched with errors.Is. The other errors of the package are
// types, found with errors.As: [*ConfigError], [*DrainTimeoutError],
// [*LockedError], [*TargetError].
var (
	// ErrClosed is returned by [Checker.Drain] and [Checker.Start] after
	// [Checker.Close], and is the Cause of a drain that Close interrupted.
	// It is not retryable.
	ErrClosed = errors.New("readiness: checker closed")
	// ErrEnabled is the Cause of a drain that [Checker.Enable] interrupted:
	// someone put the service back into service while the drain waited.
	ErrEnabled = errors.New("readiness: re-enabled during the drain")
)

// ConfigError reports a nil or nonsense option, argument or configuration
// field. It is not retryable: fix the configuration. Every package of
// holdfast reports its configuration errors with this one type
// (holdfast.ConfigError, bluegreen.ConfigError, failover.ConfigError, ...
// are the same), so one errors.As finds any of them; Error reads
// "readiness: invalid <Field>: <Why>", and Unwrap returns Err.
type ConfigError = cfgerr.Error

// DrainTimeoutError says that a [Checker.Drain] ended before the acquired
// connections of the targets' pools and the in-flight requests reached
// zero. Cause says
// why it ended:
//
//   - nil: the bound passed (Config.DrainTimeout or [WithDrainTimeout]);
//   - the caller's context.Cause: its context ended first (a deadline, or
//     the operator gave up and disconnected);
//   - [ErrEnabled]: [Checker.Enable] was called meanwhile;
//   - [ErrClosed]: [Checker.Close] was called meanwhile.
//
// Unless Enable or Close interrupted it, the service stays Disabling, so
// that readiness keeps answering 503 and the deploy can be aborted: traffic
// is not proven gone. It is not retryable as such; call Drain again to keep
// waiting, or Enable to return to service.
type DrainTimeoutError struct {
	Owner   string        // who asked for the drain
	Bound   time.Duration // the drain's bound
	Elapsed time.Duration // how long it waited
	InUse   InUse         // what the last poll found still in use
	Cause   error         // nil when the bound passed; see above
	State   State         // the drain state when the error was made
	// ByTarget is what the last poll found acquired from each target's
	// pool, for a Checker of several targets; nil for one.
	ByTarget []TargetInUse
}

// Error names the owner, the time waited and what was still in use, for
// example:
//
//	readiness: drain by "deploy-42" timed out after 2m0s: still in use: 1 acquired connection; service stays Disabling
//
// With several targets it names those whose pools still had connections
// acquired: "still in use: 3 acquired connections (orders: 1, reports: 2)".
func (e *DrainTimeoutError) Error() string {
	inUse := e.InUse.String()
	var held []string
	for _, t := range e.ByTarget {
		if t.AcquiredConns > 0 {
			held = append(held, fmt.Sprintf("%s: %d", t.Name, t.AcquiredConns))
		}
	}
	if len(held) > 0 {
		inUse += " (" + strings.Join(held, ", ") + ")"
	}
	var msg string
	if e.Cause != nil {
		msg = fmt.Sprintf("readiness: drain by %q stopped after %s (%v): still in use: %s",
			e.Owner, e.Elapsed.Round(time.Millisecond), e.Cause, inUse)
	} else {
		msg = fmt.Sprintf("readiness: drain by %q timed out after %s: still in use: %s", e.Owner, e.Bound, inUse)
	}
	if e.State != Enabled {
		msg += "; service stays " + e.State.String()
	}
	return msg
}

// Unwrap returns Cause.
func (e *DrainTimeoutError) Unwrap() error { return e.Cause }

// LockedError refuses a drain (or an enable through the drain endpoint)
// because another owner holds the drain: the lock of the L4 procedure, so
// that two operators cannot drive the same node at once. The lock is taken
// by the first [Checker.Drain] and released by [Checker.Enable]. It is not
// retryable until the holder enables the service again; the holder itself
// may drain again at any time.
type LockedError struct {
	Holder    string    // who holds the drain
	Since     time.Time // when the holder took it
	State     State     // the state the holder's drain is in
	Requester string    // who was refused
}

// Error names the holder, for example:
//
//	readiness: drain refused to "bob": held by "alice" since 2025-01-02T15:04:05Z (Disabling)
func (e *LockedError) Error() string {
	return fmt.Sprintf("readiness: drain refused to %q: held by %q since %s (%s)",
		e.Requester, e.Holder, e.Since.UTC().Format(time.RFC3339), e.State)
}
