// Package cfgerr is the configuration error of the lb module's packages:
// lb.ConfigError is this type, which the adapters (f5, a10), the drain
// algorithm and the other packages of the module return, and
// lb.ErrInvalidConfig is ErrInvalid. It has the shape of the root module's
// internal/cfgerr (the lb module does not depend on the root module, so
// the two are distinct types with the same fields and messages).
package cfgerr

import "errors"

// ErrInvalid is matched (errors.Is) by every *Error.
var ErrInvalid = errors.New("holdfast: invalid configuration")

// Error reports a nil or nonsense option, argument or configuration field.
// It is not retryable: fix the configuration.
type Error struct {
	Pkg   string // the package that reports it ("holdfast", "bluegreen", ...); "" reads as "holdfast"
	Field string // the option, argument or field at fault, for example "WithRetryPolicy" or "Config.HoldTimeout"
	Why   string
	Err   error // the underlying error, if any
}

// Error returns "<Pkg>: invalid <Field>: <Why>", followed by ": <Err>" when
// Err is set.
func (e *Error) Error() string {
	pkg := e.Pkg
	if pkg == "" {
		pkg = "holdfast"
	}
	field := e.Field
	if field == "" {
		field = "configuration"
	}
	msg := pkg + ": invalid " + field + ": " + e.Why
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

// Is matches [ErrInvalid].
func (e *Error) Is(target error) bool { return target == ErrInvalid }
