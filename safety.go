package holdfast

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/holdfast-db/holdfast/classify"
)

// PanicError is what a connect returns when the password function
// (WithPasswordFunc, an integration's) panicked. The password function runs
// on pgxpool's connect goroutine, where a panic would end the process; a
// token SDK's bug should cost one connection, not the service. holdfast
// recovers it, logs the value and the stack at ERROR, and returns this
// error, which is Fatal (reason "panic"): it is not retried.
type PanicError struct {
	Value any    // what the function panicked with
	Stack []byte // the goroutine's stack at the panic
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("holdfast: the password function panicked: %v", e.Value)
}

// ReasonPanic is the classify reason of a *PanicError.
const ReasonPanic = "panic"

// panicRule classifies a *PanicError as Fatal.
func panicRule(err error) (classify.Verdict, bool) {
	var pe *PanicError
	if errors.As(err, &pe) {
		return classify.Verdict{Class: classify.Fatal, Reason: ReasonPanic}, true
	}
	return classify.Verdict{}, false
}

// callPassword calls the password function, recovering a panic.
func (f *Factory) callPassword(ctx context.Context, host string) (pw string, err error) {
	defer func() {
		if r := recover(); r != nil {
			pe := &PanicError{Value: r, Stack: debug.Stack()}
			f.logger.LogAttrs(ctx, slog.LevelError, "holdfast: the password function panicked",
				slog.String("panic", f.tel.Redact(fmt.Sprint(r))), slog.String("stack", string(pe.Stack)))
			pw, err = "", pe
		}
	}()
	return f.password(ctx, host)
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

// redact wraps err so that its text carries no secret; nil stays nil, and
// an error whose text has none is returned as it is.
func (f *Factory) redact(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(*redactedError); ok {
		return err
	}
	s := err.Error()
	r := f.tel.Redact(s)
	if r == s {
		return err
	}
	return &redactedError{err: err, text: r}
}
