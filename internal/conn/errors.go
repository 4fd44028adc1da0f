package conn

import (
	"errors"
	"fmt"
	"time"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/internal/cfgerr"
	"github.com/holdfast-db/holdfast/internal/outage"
)

// Errors makes the errors of the face (package holdfast) that the engine
// returns: their types are holdfast's, documented there, and only made
// here. Every field must be set.
type Errors struct {
	// Connect is a connect that failed (a dial, a password fetch, a
	// door's try, a first connection), as f reads it; err is what
	// errors.Is, errors.As and Classify reach: the *retry.Error of the
	// loop that gave up, pgx's error, or the failure itself.
	Connect func(f *Failure, err error) error
	// FailureOf returns the failure of err when err itself (not its
	// chain) is one of the face's errors that Connect made, else nil.
	FailureOf func(err error) *Failure
	// OutcomeUnknown is a statement that could commit whose answer was
	// lost: statement says what it was ("COMMIT", "statement", "batch",
	// "copy"), err the connection's failure.
	OutcomeUnknown func(statement string, err error) error
	// Config is the face's configuration error of e (its Err included,
	// when it is another *cfgerr.Error): the engine's own, and those of
	// the layers it installs.
	Config func(e *cfgerr.Error) error
	// Down is a wait for the database of pool (its name) that ended
	// while it was down (the outage layer's); it matches outage.ErrDown.
	Down func(d outage.Down, pool string) error
}

// configError returns the face's configuration error of field.
func (e *Engine) configError(field, why string, err error) error {
	return e.cfg.Errors.Config(&cfgerr.Error{Field: field, Why: why, Err: err})
}

// ErrQueued is matched by the error of a connect that the pool's
// admission limit did not admit before its wait ended (the face's
// holdfast.ErrQueued).
var ErrQueued = errors.New("holdfast: connect not admitted")

// queuedError is a connect that the pool's admission limit did not admit
// before its wait ended: err is admit.ErrTimeout when the wait reached
// its bound, else the connect context's error. Nothing was dialed. It is
// Transient (classify.ReasonQueued): the pool was busy connecting, not
// refused; but it already waited its bound, so Factory.Acquire returns it
// as it is instead of waiting again (WaitedBelow).
type queuedError struct {
	waited   time.Duration
	inFlight int
	err      error
}

func (e *queuedError) Error() string {
	return fmt.Sprintf("holdfast: connect not admitted after waiting %v (%d connects of the pool in flight): %v",
		e.waited.Round(time.Millisecond), e.inFlight, e.err)
}

func (e *queuedError) Unwrap() error        { return e.err }
func (e *queuedError) Is(target error) bool { return target == ErrQueued }

// panicError is what a connect returns when the password or credentials
// function panicked: it runs on pgxpool's connect goroutine, where a
// panic would end the process, and a token SDK's bug should cost one
// connection, not the service. The panic's type and the stack are logged
// at ERROR; its value is neither logged nor in the error's text (it may
// hold what the function was minting). It is Fatal (classify.ReasonPanic):
// not retried.
type panicError struct{ value any }

func (e *panicError) Error() string {
	return fmt.Sprintf("holdfast: the password function panicked with a %T (its stack is in the ERROR log line)", e.value)
}

// Rules classify the engine's own errors: a connect not admitted is
// Transient "connect-queued" (before the built-in rules would call its
// context error Fatal or unknown), a wait for a database that is down
// Transient "database-down" (whatever its cause and context error), and so
// is a connection being made to an address the database left, cut by the
// outage layer; a connection of a pool meant for writes refused by a
// read-only server Transient "not-writable", a panic Fatal "panic".
func Rules() []classify.Rule {
	return []classify.Rule{
		classify.Sentinel(ErrQueued, classify.Verdict{Class: classify.Transient, Reason: classify.ReasonQueued}),
		classify.Sentinel(outage.ErrDown, classify.Verdict{Class: classify.Transient, Reason: classify.ReasonDatabaseDown}),
		func(err error) (classify.Verdict, bool) {
			var nw *outage.NotWritableError
			var left *outage.LeftError
			switch {
			case errors.As(err, &nw):
				return classify.Verdict{Class: classify.Transient, Reason: classify.ReasonNotWritable}, true
			case errors.As(err, &left):
				return classify.Verdict{Class: classify.Transient, Reason: classify.ReasonDatabaseDown}, true
			}
			return classify.Verdict{}, false
		},
		func(err error) (classify.Verdict, bool) {
			var pe *panicError
			if errors.As(err, &pe) {
				return classify.Verdict{Class: classify.Fatal, Reason: classify.ReasonPanic}, true
			}
			return classify.Verdict{}, false
		},
	}
}

// redactedError is an error holdfast returns whose text was cleaned of the
// secrets holdfast knows (the configured password, fetched tokens,
// connection-string passwords): a cause that echoes them (a proxy, a token
// endpoint) does not leak them through an error message. errors.Is and
// errors.As still reach the cause unchanged.
type redactedError struct {
	err  error
	text string
}

func (e *redactedError) Error() string { return e.text }
func (e *redactedError) Unwrap() error { return e.err }

// errRefused is the cause of the end of a connection's retries after a
// handshake failure that this layer did not see (a TLS verification, a
// protocol error, ValidateConnect): it is not retried here. It is not a
// *retry.Error: nothing was retried, so Factory.Acquire still classifies
// the real cause, pgx's line before it.
var errRefused = errors.New("holdfast: not retried: the attempt above failed with an error that is not retried while connecting")
