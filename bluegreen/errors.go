package bluegreen

import (
	"fmt"
	"time"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/internal/cfgerr"
	"github.com/holdfast-db/holdfast/internal/typerule"
)

// ErrInvalidConfig is holdfast.ErrInvalidConfig: an invalid [Config] is
// reported by holdfast.New (WithBlueGreen) as a *holdfast.ConfigError
// whose Err is another, of Pkg "bluegreen", naming the field; both match
// it.
var ErrInvalidConfig = cfgerr.ErrInvalid

// SuspendError says that a new connection, an Acquire or a statement was
// held back by a switchover (IN_PROGRESS, or a blue host whose green
// counterpart is not known yet) until its bound, Config.ConnectTimeout, or
// the caller's context ended. Nothing was sent to the database, so the
// operation, or the whole transaction it belonged to, is safe to try again:
// it is retryable ([Rule] and the built-in classify rules mark it
// Transient), unless Err is context.Canceled (the caller gave up).
//
// It unwraps to Err: context.DeadlineExceeded when the bound was reached,
// else the cause of the caller's context.
type SuspendError struct {
	Op     string        // "connect", "acquire" or "query"
	Host   string        // the host connected to, for Op "connect"
	Phase  Phase         // the phase when the wait began
	Waited time.Duration // how long it waited
	Err    error
}

func (e *SuspendError) Error() string {
	what := e.Op
	if e.Host != "" {
		what += " to " + e.Host
	}
	return fmt.Sprintf("bluegreen: %s held for %v by the blue/green switchover (%v) and not released: %v",
		what, e.Waited.Round(time.Millisecond), e.Phase, e.Err)
}

// Unwrap returns Err.
func (e *SuspendError) Unwrap() error { return e.Err }

// SafeToRetry reports true: nothing was sent (see pgconn.SafeToRetry).
func (e *SuspendError) SafeToRetry() bool { return true }

// RejectError says that a new connection to a green host name was refused
// during POST: green has already taken the blue names, and its own names
// are about to disappear. Connect with the blue (production) names
// instead. It is not retryable: the name will not come back.
type RejectError struct {
	Host  string // the green host name
	Phase Phase
}

func (e *RejectError) Error() string {
	return fmt.Sprintf("bluegreen: new connection to green host %s rejected: the blue/green switchover (%v) moved production to the blue names; connect with those", e.Host, e.Phase)
}

// DroppedError says that a connection to the old blue instance was taken
// out of service because the switchover started (IN_PROGRESS): its next
// statement is refused before anything is sent, and the pool destroys it.
// The transaction it belonged to did not commit; retrying the whole
// transaction on a new connection is safe, so it is retryable (Transient).
type DroppedError struct {
	Addr  string // the blue instance's address
	Phase Phase
}

func (e *DroppedError) Error() string {
	return fmt.Sprintf("bluegreen: connection to blue instance %s dropped at the blue/green switchover (%v); nothing was sent, retry the transaction on a new connection", e.Addr, e.Phase)
}

// SafeToRetry reports true: the refused statement was not sent.
func (e *DroppedError) SafeToRetry() bool { return true }

// Rule is a classify.Rule for this package's errors: *SuspendError is
// Transient with reason "bluegreen-suspended" (unless the caller canceled,
// which is left to the built-in rules: Fatal "canceled"), *DroppedError
// Transient "bluegreen-dropped", *RejectError Fatal "bluegreen-rejected".
// holdfast.WithBlueGreen registers it with the factory's classifier; add
// it with classify.New to classify the errors elsewhere.
func Rule(err error) (classify.Verdict, bool) { return rule(err) }

var rule = typerule.Rule(
	typerule.Wait[*SuspendError]("bluegreen-suspended"),
	typerule.Of[*RejectError](classify.Fatal, "bluegreen-rejected"),
	typerule.Of[*DroppedError](classify.Transient, "bluegreen-dropped"),
)
