package fakes

import (
	"errors"
	"fmt"
	"strconv"
)

// ConnName is the Cloud SQL instance connection name that the Cloud SQL
// shaped errors of [TokenFetch], [TokenFetch503] and [AdminAPI] carry, as
// [errtype.RefreshError] ConnName.
//
// [errtype.RefreshError]: https://pkg.go.dev/cloud.google.com/go/cloudsqlconn/errtype#RefreshError
const ConnName = "fake-project:fake-region:fake-instance"

// ErrNoTarget is returned by [Connector.Dial] when a step must dial the real
// target but the Connector has none (a zero Connector, or
// NewConnector("")). It is a mistake in the test, not a simulated failure.
var ErrNoTarget = errors.New("fakes: connector has no target address")

// ErrBadStep is wrapped by the error a step returns when it cannot be played
// as asked: Fail(nil), or a network step (Refused, Reset, ResetAfter) in a
// [PasswordSource]. It is a mistake in the test, not a simulated failure.
var ErrBadStep = errors.New("fakes: invalid step")

type kind int

const (
	kindConnect kind = iota // the zero Step connects
	kindTokenFetch
	kindAdminAPI
	kindRefused
	kindReset
	kindFail
	kindHang
)

// Step is one scripted outcome of a dial ([Connector]) or of a password fetch
// ([PasswordSource]). Build Steps with the functions of this package
// ([Connect], [Refused], [TokenFetch503], ...) and repeat them with
// [Step.Times] or [Step.Forever].
//
// The zero Step is Connect(). A Step is an immutable value: its methods return
// a modified copy, and one Step may be used in any number of scripts and
// goroutines.
type Step struct {
	kind kind
	code int   // HTTP status for kindTokenFetch and kindAdminAPI
	n    int   // bytes before the reset, for kindReset
	err  error // for kindFail

	timesSet bool // Times was called; else the step plays once
	times    int
	forever  bool
}

// Connect dials the Connector's real target address (or, in a
// [PasswordSource], returns the password). It is also what every dial does
// once the script is used up.
func Connect() Step { return Step{kind: kindConnect} }

// TokenFetch503 is TokenFetch(503): the IAM login token fetch fails because
// the token endpoint answered 503 Service Unavailable. A classifier should
// treat it as transient.
func TokenFetch503() Step { return TokenFetch(503) }

// TokenFetch fails like the Cloud SQL Go connector (cloudsqlconn v1.26.0)
// when the OAuth2 token source for IAM database login fails with the given
// HTTP status. The dial error is, outermost first:
//
//	*fmt.wrapError        "fetch ephemeral cert failed: ..."
//	*errtype.RefreshError "failed to retrieve Oauth2 token", ConnName = [ConnName]
//	*auth.Error           Response.StatusCode = code (Temporary() for 500, 503, 408, 429)
//	*oauth2.RetrieveError Response.StatusCode = code
//
// In a [PasswordSource] the error is the token-source part alone
// (*auth.Error wrapping *oauth2.RetrieveError), as an
// [auth.TokenProvider] built from an [oauth2.TokenSource] returns it.
//
// Every play builds fresh values; Response is always set, so Error() never
// panics at any depth of the chain. For 400 the body is an OAuth2
// "invalid_grant" error and for 401 an "invalid_client" one (both mean bad
// credentials: fatal); other codes get a plain-text body.
//
// [auth.TokenProvider]: https://pkg.go.dev/cloud.google.com/go/auth#TokenProvider
// [oauth2.TokenSource]: https://pkg.go.dev/golang.org/x/oauth2#TokenSource
func TokenFetch(code int) Step { return Step{kind: kindTokenFetch, code: code} }

// AdminAPI fails like cloudsqlconn v1.26.0 when the Cloud SQL Admin API call
// for the instance metadata (connectSettings) answers the given HTTP status.
// The dial error is, outermost first:
//
//	*fmt.wrapError        "failed to get instance: ..."
//	*errtype.RefreshError "failed to get instance metadata", ConnName = [ConnName]
//	*googleapi.Error      Code = code, with a JSON body as the Admin API sends
//	*apierror.APIError    (as the generated API client wraps it)
//
// 503 and other 5xx are transient; 403 (permission denied) and 404 (no such
// instance) are fatal. The real connector spends several seconds retrying
// 5xx before it gives up; this step fails at once. In a [PasswordSource] the
// error is the *googleapi.Error alone.
func AdminAPI(code int) Step { return Step{kind: kindAdminAPI, code: code} }

// Forbidden is AdminAPI(403): the caller lacks permission on the instance.
func Forbidden() Step { return AdminAPI(403) }

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

// String returns the step as the Go expression that builds it, for example
// "Refused().Times(3)" or "AdminAPI(403)". It never contains a password.
func (s Step) String() string {
	var b string
	switch s.kind {
	case kindConnect:
		b = "Connect()"
	case kindTokenFetch:
		b = "TokenFetch(" + strconv.Itoa(s.code) + ")"
	case kindAdminAPI:
		b = "AdminAPI(" + strconv.Itoa(s.code) + ")"
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

// badStep is the error of a step that cannot be played as asked.
func badStep(s Step, why string) error {
	return fmt.Errorf("%w: %s %s", ErrBadStep, s.kindString(), why)
}

// kindString is String without the repetition suffix.
func (s Step) kindString() string {
	s.timesSet, s.forever = false, false
	return s.String()
}
