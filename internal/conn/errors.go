package conn

import (
	"errors"
	"time"
)

// Errors makes the errors of the face (package holdfast) that the engine
// returns: their types are holdfast's, documented there, and only made
// here. Every field must be set.
type Errors struct {
	// Connect is a failed dial or password fetch of one connection after
	// the retries: layer is "connect" or "password", err the *retry.Error.
	Connect func(layer string, err error) error
	// Queued is a connect that the pool's admission limit did not admit
	// before its wait ended.
	Queued func(waited time.Duration, inFlight int, err error) error
	// OutcomeUnknown is a statement that could commit whose answer was
	// lost: statement says what it was ("COMMIT", "statement", "batch",
	// "copy"), err the connection's failure.
	OutcomeUnknown func(statement string, err error) error
	// Panic is a password or credentials function that panicked.
	Panic func(value any, stack []byte) error
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

// errRefused is what the dials of the remaining retry rounds return after
// a failure this layer does not retry. It is not a *retry.Error: nothing
// was retried, so Factory.Acquire still classifies the real cause.
var errRefused = errors.New("holdfast: not retried: the previous attempt failed with an error that is not retried while connecting")
