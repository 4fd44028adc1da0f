// Package cfgerr is the configuration error of the packages below the
// root (the engine, the blue/green and failover layers, the drain), which
// cannot name holdfast.ConfigError: the root turns each into a
// *holdfast.ConfigError of the same fields before a user sees it
// (holdfast's configErr, the engine's Errors.Config). Every
// ErrInvalidConfig of holdfast's packages is ErrInvalid.
package cfgerr

import "errors"

// ErrInvalid is matched (errors.Is) by every *Error.
var ErrInvalid = errors.New("holdfast: invalid configuration")

// Error reports a nil or nonsense option, argument or configuration field.
// It is not retryable: fix the configuration. Its fields are those of
// holdfast.ConfigError, in the same order: the root converts one into the
// other.
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
