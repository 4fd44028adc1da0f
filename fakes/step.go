package fakes

import (
	"errors"
	"fmt"
	"strconv"
)

// ErrNoTarget is returned by [Connector.Dial] when a step must dial the real
// target but the Connector has none (a zero Connector, or
// NewConnector("")). It is a mistake in the test, not a simulated failure.
var ErrNoTarget = errors.New("fakes: connector has no target address")

// ErrBadStep is wrapped by the error a step returns when it cannot be played
// as asked: Fail(nil), a [Custom] step without a function for where it is
// played or whose function returns nil, or a network step (Refused, Reset,
// ResetAfter) in a [PasswordSource]. It is a mistake in the test, not a
// simulated failure.
var ErrBadStep = errors.New("fakes: invalid step")

type kind int

const (
	kindConnect kind = iota // the zero Step connects
	kindRefused
	kindReset
	kindFail
	kindHang
	kindCustom
)

// Step is one scripted outcome of a dial ([Connector]) or of a password fetch
// ([PasswordSource]). Build Steps with the functions of this package
// ([Connect], [Refused], [Fail], ...), or with [Custom] in packages that
// define their own (package cloudsqltest's TokenFetch503, for example), and
// repeat them with [Step.Times] or [Step.Forever].
//
// The zero Step is Connect(). A Step is an immutable value: its methods return
// a modified copy, and one Step may be used in any number of scripts and
// goroutines.
type Step struct {
	kind   kind
	n      int     // bytes before the reset, for kindReset
	err    error   // for kindFail
	custom *custom // for kindCustom; a pointer keeps Step comparable

	timesSet bool // Times was called; else the step plays once
	times    int
	forever  bool
}

// Connect dials the Connector's real target address (or, in a
// [PasswordSource], returns the password). It is also what every dial does
// once the script is used up.
func Connect() Step { return Step{kind: kindConnect} }

// Refused fails like a TCP connect to a closed port, as [net.Dialer]
// reports it:
//
//	&net.OpError{Op: "dial", Net: "tcp", Addr: <target>,
//		Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
//
// so errors.Is(err, syscall.ECONNREFUSED) holds. Nothing is dialed. In a
// [PasswordSource] it fails with an error wrapping [ErrBadStep].
func Refused() Step { return Step{kind: kindRefused} }

// Reset is ResetAfter(0): the dial really connects, and the first Read fails
// with "connection reset by peer".
func Reset() Step { return ResetAfter(0) }

// ResetAfter really dials the target and returns a connection that is reset
// once n bytes have been read from it (n < 0 counts as 0): Reads deliver at
// most n bytes in total, then every Read fails with
//
//	&net.OpError{Op: "read", Net: "tcp", Source: <local>, Addr: <remote>,
//		Err: os.NewSyscallError("read", syscall.ECONNRESET)}
//
// and every later Write with a "write: broken pipe" error of the same shape
// (syscall.EPIPE). At the moment of the reset the real socket is closed with
// SO_LINGER 0, so the server sees a TCP reset too. Writes before the reset go
// through. The dial itself counts as a success. In a [PasswordSource] it
// fails with an error wrapping [ErrBadStep].
func ResetAfter(n int) Step { return Step{kind: kindReset, n: max(n, 0)} }

// Fail fails with err, the same value on every play. Fail(nil) fails with an
// error wrapping [ErrBadStep], because a nil error with a nil connection
// would break the caller.
func Fail(err error) Step { return Step{kind: kindFail, err: err} }

// Hang is a connect (or token fetch) that never answers: it blocks until the
// context passed to Dial (or Password) is done, then returns ctx.Err()
// unwrapped, as cloudsqlconn does when the dial context ends during a
// refresh. With a context that is never done it blocks forever.
func Hang() Step { return Step{kind: kindHang} }

// custom is what Custom was given.
type custom struct {
	name               string
	atDial, atPassword func() error
}

// Custom is a failing step defined outside this package, for failures whose
// errors need types this package does not import: package cloudsqltest
// builds its Cloud SQL steps (TokenFetch503, Forbidden, ...) with it. A dial
// of a [Connector] fails with atDial(), and a call of a [PasswordSource]
// with atPassword(): a dial and a password fetch usually report the same
// failure with differently shaped errors. Each play calls the function
// again, so it can build fresh values. Where the function is nil, or returns
// nil, the step fails with an error wrapping [ErrBadStep].
//
// name is what [Step.String] shows for the step, before any repetition
// suffix; make it the Go expression that builds the step, qualified with its
// package, for example "cloudsqltest.TokenFetch(503)". Like every Step, a
// Custom step may be played from many goroutines at once, so the functions
// must be safe for concurrent use.
func Custom(name string, atDial, atPassword func() error) Step {
	return Step{kind: kindCustom, custom: &custom{name: name, atDial: atDial, atPassword: atPassword}}
}

// fail plays a Custom step with f, its function for where it is played.
func (s Step) fail(f func() error, where string) error {
	if f == nil {
		return badStep(s, "has no error for "+where)
	}
	if err := f(); err != nil {
		return err
	}
	return badStep(s, "returned a nil error for "+where)
}

// Times returns a copy of s that plays n times in a row (n <= 0: not at all).
// It overrides an earlier Forever.
func (s Step) Times(n int) Step {
	s.timesSet, s.times, s.forever = true, max(n, 0), false
	return s
}

// Forever returns a copy of s that plays on every remaining dial. Steps
// scripted after it, with the same call or later with Then, never play; use
// [Connector.Set] to replace it. It overrides an earlier Times.
func (s Step) Forever() Step {
	s.timesSet, s.times, s.forever = false, 0, true
	return s
}

// plays reports how many times s plays; meaningless when s.forever.
func (s Step) plays() int {
	if s.timesSet {
		return s.times
	}
	return 1
}

// String returns the step as the Go expression that builds it, without this
// package's name, for example "Refused().Times(3)"; a [Custom] step shows
// its name, for example "cloudsqltest.AdminAPI(403).Forever()". It never
// contains a password.
func (s Step) String() string {
	var b string
	switch s.kind {
	case kindConnect:
		b = "Connect()"
	case kindRefused:
		b = "Refused()"
	case kindReset:
		b = "ResetAfter(" + strconv.Itoa(s.n) + ")"
	case kindFail:
		if s.err == nil {
			b = "Fail(nil)"
		} else {
			b = fmt.Sprintf("Fail(%q)", s.err.Error())
		}
	case kindHang:
		b = "Hang()"
	case kindCustom:
		b = s.custom.name
		if b == "" {
			b = `Custom("")`
		}
	default:
		b = "Step(?)"
	}
	switch {
	case s.forever:
		b += ".Forever()"
	case s.timesSet:
		b += ".Times(" + strconv.Itoa(s.times) + ")"
	}
	return b
}

// GoString is String qualified with this package's name where the step is
// one of its own, for example "fakes.Refused().Times(3)" (a [Custom] step's
// name already names its package), so that %#v does not print the fields.
func (s Step) GoString() string {
	if s.kind == kindCustom {
		return s.String()
	}
	return "fakes." + s.String()
}

// badStep is the error of a step that cannot be played as asked.
func badStep(s Step, why string) error {
	return fmt.Errorf("%w: %s %s", ErrBadStep, s.kindString(), why)
}

// kindString is String without the repetition suffix.
func (s Step) kindString() string {
	s.timesSet, s.forever = false, false
	return s.String()
}
