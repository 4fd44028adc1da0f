package lb

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/holdfast-db/holdfast/lb/internal/cfgerr"
)

// Kind says what a balancer answered, in an [*APIError]. Whether it is
// worth retrying is [APIError.Retryable]: only KindBusy and KindUnavailable
// are. The zero Kind is not used.
type Kind int

const (
	// KindSession: the admin session is missing or expired and logging in
	// again once did not help (or no session was opened). Fatal: the
	// adapters have already re-logged in once.
	KindSession Kind = iota + 1
	// KindAuth: the device refused the credentials at login, or the user
	// has too many active sessions. Fatal.
	KindAuth
	// KindBusy: the device said it is busy or not ready (A10 codes
	// 1023464192/1023464193, F5 503 while restarting). Transient.
	KindBusy
	// KindUnavailable: the device could not be reached or answered 5xx.
	// Transient.
	KindUnavailable
	// KindNotFound: no such node, pool, member, server, port or partition.
	// Fatal.
	KindNotFound
	// KindNoPrivilege: the account may not do this (F5 401 after a fresh
	// login or 403; A10 code 419545856). Fatal.
	KindNoPrivilege
	// KindStatsDisabled: the device does not collect the member's
	// statistics, so its connection count is meaningless. Fatal.
	KindStatsDisabled
	// KindBadResponse: the answer could not be parsed or lacked a field.
	// Fatal.
	KindBadResponse
	// KindRejected: the device rejected the request as invalid (other
	// 4xx). Fatal.
	KindRejected
)

var kindNames = [...]string{
	KindSession: "session expired", KindAuth: "authentication failed", KindBusy: "busy",
	KindUnavailable: "unavailable", KindNotFound: "not found", KindNoPrivilege: "no privilege",
	KindStatsDisabled: "statistics disabled", KindBadResponse: "bad response", KindRejected: "rejected",
}

// String returns a short lower-case description, such as "not found".
func (k Kind) String() string {
	if k <= 0 || int(k) >= len(kindNames) {
		return "Kind(" + strconv.Itoa(int(k)) + ")"
	}
	return kindNames[k]
}

func (k Kind) transient() bool { return k == KindBusy || k == KindUnavailable }

// APIError is a failed call to a load balancer's API; Kind says what the
// device answered. Adapters build it with the device's message already
// stripped of credentials. It is retryable when [APIError.Retryable] says
// so: for KindBusy and KindUnavailable, unless the caller canceled the
// call. Find it in an error chain with errors.AsType (or errors.As):
//
//	if ae, ok := errors.AsType[*lb.APIError](err); ok && ae.Retryable() {
//		// try again later
//	}
type APIError struct {
	Vendor  string // "f5" or "a10"
	Op      string // "login", "state", "connections", "set-state", ...
	Member  string // the member's String(), or "" for session calls
	Kind    Kind
	Status  int    // HTTP status, 0 when no answer arrived
	Code    int64  // vendor error code (A10), 0 if none
	Message string // the device's message, redacted
	Err     error  // the transport error, if any
}

// Error returns for example
// "lb: f5 set-state web/web-1:80: not found (HTTP 404): 01020036:3: ...".
func (e *APIError) Error() string {
	var b strings.Builder
	b.WriteString("lb: ")
	b.WriteString(e.Vendor)
	b.WriteByte(' ')
	b.WriteString(e.Op)
	if e.Member != "" {
		b.WriteByte(' ')
		b.WriteString(e.Member)
	}
	b.WriteString(": ")
	b.WriteString(e.Kind.String())
	if e.Status != 0 || e.Code != 0 {
		b.WriteString(" (")
		if e.Status != 0 {
			b.WriteString("HTTP ")
			b.WriteString(strconv.Itoa(e.Status))
		}
		if e.Code != 0 {
			if e.Status != 0 {
				b.WriteString(", ")
			}
			b.WriteString("code ")
			b.WriteString(strconv.FormatInt(e.Code, 10))
		}
		b.WriteByte(')')
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns Err.
func (e *APIError) Unwrap() error { return e.Err }

// Retryable reports whether a later attempt may succeed: e's Kind is
// KindBusy or KindUnavailable, and the call was not canceled. A request
// that timed out (the HTTP client's timeout, which wraps
// context.DeadlineExceeded) is retryable; callers stop retrying when their
// own context ends.
func (e *APIError) Retryable() bool {
	return e.Kind.transient() && !errors.Is(e.Err, context.Canceled)
}

// kindOf returns the Kind of the [*APIError] in err, or 0 if there is none.
func kindOf(err error) Kind {
	if ae, ok := errors.AsType[*APIError](err); ok {
		return ae.Kind
	}
	return 0
}

// retryable reports whether err is a transient balancer failure, worth
// another call: an [*APIError] that is Retryable, and no cancellation
// anywhere in err.
func retryable(err error) bool {
	ae, ok := errors.AsType[*APIError](err)
	return ok && ae.Retryable() && !errors.Is(err, context.Canceled)
}

// ErrNotDrained is matched by every [*NotDrainedError].
var ErrNotDrained = errors.New("lb: not drained")

// NotDrainedError says that a member still had connections when its drain
// ended: the bound passed, or the caller's context ended (Cause). The deploy
// must not go ahead. It is not retryable as such.
type NotDrainedError struct {
	Member  string        // "balancer member"
	Conns   int64         // connections at the last poll; -1 if none was read
	Polls   int           // polls made
	Elapsed time.Duration // from the start of the wait to giving up
	Timeout time.Duration // the bound
	Cause   error         // nil when the bound passed, else the context's cause
	err     error         // the shared drain package's error
}

// Error returns for example
// "lb: f5 web/web-1:80 not drained: 3 current connections after 2m0s".
func (e *NotDrainedError) Error() string {
	conns := "connections not read"
	switch {
	case e.Conns == 1:
		conns = "1 current connection"
	case e.Conns >= 0:
		conns = strconv.FormatInt(e.Conns, 10) + " current connections"
	}
	if e.Cause != nil {
		return fmt.Sprintf("lb: %s not drained: %s when stopped after %s (%v)", e.Member, conns, e.Elapsed.Round(time.Millisecond), e.Cause)
	}
	return fmt.Sprintf("lb: %s not drained: %s after %s", e.Member, conns, e.Timeout)
}

// Unwrap returns the underlying drain error, whose own Unwrap gives Cause.
func (e *NotDrainedError) Unwrap() error { return e.err }

// Is matches [ErrNotDrained].
func (e *NotDrainedError) Is(target error) bool { return target == ErrNotDrained }

// ErrStateMismatch is matched by every [*StateMismatchError].
var ErrStateMismatch = errors.New("lb: state mismatch")

// StateMismatchError says that a member's read-back state is not the one
// set: the device ignored the change, or someone changed it during a drain.
// Fatal.
type StateMismatchError struct {
	Member string
	Want   AdminState
	Got    State
}

// Error returns for example
// "lb: f5 web/web-1:80 is enabled (session=user-enabled state=up), want forced-offline".
func (e *StateMismatchError) Error() string {
	s := "lb: " + e.Member + " is " + e.Got.Admin.String()
	if e.Got.Detail != "" {
		s += " (" + e.Got.Detail + ")"
	}
	return s + ", want " + e.Want.String()
}

// Is matches [ErrStateMismatch].
func (e *StateMismatchError) Is(target error) bool { return target == ErrStateMismatch }

// ErrNotPermitted is matched by every [*NotPermittedError].
var ErrNotPermitted = errors.New("lb: not permitted")

// NotPermittedError says that an operator may not control a group. It is
// returned before any call to a balancer. Fatal.
type NotPermittedError struct {
	Operator string
	Group    string
}

// Error returns "lb: operator \"bob\" may not control group \"payments\"".
func (e *NotPermittedError) Error() string {
	return "lb: operator " + strconv.Quote(e.Operator) + " may not control group " + strconv.Quote(e.Group)
}

// Is matches [ErrNotPermitted].
func (e *NotPermittedError) Is(target error) bool { return target == ErrNotPermitted }

// ErrLocked is matched by every [*LockedError].
var ErrLocked = errors.New("lb: group locked")

// LockedError says that another owner holds the group's lock, or the
// lock of one of its members through another group. Not retryable at
// once: wait until the holder releases it (Request.LockWait).
type LockedError struct {
	Group  string
	Holder Holder // Holder.Group is the group the holder locked
	// Member, when not empty, is the member of Group (as the refused
	// request names it) whose lock the holder holds through
	// Holder.Group; empty when Group's own lock is what is held.
	Member string
}

// Error returns for example
// "lb: group \"payments\" is locked by alice@ci-7 since 2025-01-02T15:04:05Z"
// or, for a member another group holds,
// "lb: group \"all-web\" is locked by alice@ci-7 since ...: its member
// f5-prod payments_443/pay-1:443 is held through group \"payments\"".
func (e *LockedError) Error() string {
	s := "lb: group " + strconv.Quote(e.Group) + " is locked by " + e.Holder.String()
	switch {
	case e.Member != "":
		s += ": its member " + e.Member + " is held through group " + strconv.Quote(e.Holder.Group)
	case e.Holder.Group != "" && e.Holder.Group != e.Group:
		s += " (holding group " + strconv.Quote(e.Holder.Group) + ", which shares its lock key)"
	}
	return s
}

// Is matches [ErrLocked].
func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// ErrLockLost is matched by every [*LockLostError].
var ErrLockLost = errors.New("lb: lock lost")

// LockLostError says that a lease no longer holds its lock (its database
// session ended), so no further change may be made under it. Fatal.
type LockLostError struct {
	Group string
	Err   error // why the check failed, nil if the lock is simply not held
}

// Error returns "lb: lock on group \"payments\" lost: <Err>".
func (e *LockLostError) Error() string {
	s := "lb: lock on group " + strconv.Quote(e.Group) + " lost"
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns Err.
func (e *LockLostError) Unwrap() error { return e.Err }

// Is matches [ErrLockLost].
func (e *LockLostError) Is(target error) bool { return target == ErrLockLost }

// ErrInvalidConfig is matched by every [*ConfigError].
var ErrInvalidConfig = cfgerr.ErrInvalid

// ConfigError reports a nil or nonsense option, argument or configuration
// field. It is not retryable: fix the configuration. Every package of the
// lb module (lb, f5, a10, notify, alertmanager, console, deploy) reports
// its configuration errors with this one type, so one errors.As finds any
// of them; Error reads "lb: invalid <Field>: <Why>", and Unwrap returns
// Err. It has the fields and messages of the root module's ConfigError,
// but it is a distinct type: the lb module does not depend on the root
// module.
type ConfigError = cfgerr.Error

// prefix returns a copy of a *ConfigError with its Field prefixed by p, or
// err unchanged.
func prefix(p string, err error) error {
	var ce *ConfigError
	if !errors.As(err, &ce) {
		return err
	}
	c := *ce
	if c.Field == "" {
		c.Field = p
	} else {
		c.Field = p + "." + c.Field
	}
	return &c
}
