package fakes

import (
	"context"
	"strconv"
)

// PasswordSource is a scripted password (or IAM auth token) function: each
// call of [PasswordSource.Password] plays the next [Step] of its script, and
// once the script is used up every call returns the password.
//
// Steps mean, in a PasswordSource:
//   - [Connect]: return the password;
//   - [Fail]: its error; [Hang]: block until ctx is done, return ctx.Err();
//   - [Custom]: the error of its atPassword function (package
//     cloudsqltest's TokenFetch503, for example: the token source's error);
//   - [Refused], [Reset], [ResetAfter]: an error wrapping [ErrBadStep]
//     (they are about connections; for an unreachable token endpoint use
//     [Fail] with the error your token function would return).
//
// A PasswordSource is safe for concurrent use and its counters are exact.
// The password never appears in its errors or in its String or GoString
// output. Create one with [NewPasswordSource] and do not copy it. The zero
// PasswordSource returns the empty password.
type PasswordSource struct {
	// password is behind a pointer so that even fmt's %v of a copied
	// PasswordSource value prints an address, not the password.
	password *string
	s        script
}

// NewPasswordSource returns a PasswordSource that plays steps in order, then
// returns password on every call.
func NewPasswordSource(password string, steps ...Step) *PasswordSource {
	p := &PasswordSource{password: &password}
	p.s.add(steps)
	return p
}

// Password plays the next step of the script, whatever host: its
// signature fits holdfast.WithPasswordFunc and Integration.Password. It
// is safe for concurrent use.
func (p *PasswordSource) Password(ctx context.Context, _ string) (string, error) {
	pw, err := p.play(ctx, p.s.next())
	p.s.done(err)
	return pw, err
}

func (p *PasswordSource) play(ctx context.Context, st Step) (string, error) {
	switch st.kind {
	case kindCustom:
		return "", st.fail(st.custom.atPassword, "a password fetch")
	case kindRefused, kindReset:
		return "", badStep(st, "has no meaning for a PasswordSource")
	case kindFail:
		if st.err == nil {
			return "", badStep(st, "has no error")
		}
		return "", st.err
	case kindHang:
		<-ctx.Done()
		return "", ctx.Err()
	default:
		if p.password == nil {
			return "", nil
		}
		return *p.password, nil
	}
}

// Then appends steps to the script; they play after the steps already in it
// (never, if it ends with a Forever step). Safe for concurrent use.
func (p *PasswordSource) Then(steps ...Step) { p.s.add(steps) }

// Set replaces what remains of the script with steps. Safe for concurrent use.
func (p *PasswordSource) Set(steps ...Step) { p.s.set(steps) }

// Attempts returns the number of Password calls started so far.
func (p *PasswordSource) Attempts() int { return int(p.s.attempts.Load()) }

// Successes returns the number of Password calls that returned the password.
func (p *PasswordSource) Successes() int { return int(p.s.successes.Load()) }

// Failures returns the number of Password calls that returned an error.
func (p *PasswordSource) Failures() int { return int(p.s.failures.Load()) }

// String describes p without its password.
func (p *PasswordSource) String() string {
	if p == nil {
		return "fakes.PasswordSource(nil)"
	}
	return "fakes.PasswordSource{password: [redacted], attempts: " + strconv.Itoa(p.Attempts()) + "}"
}

// GoString is String, so that %#v does not print the password either.
func (p *PasswordSource) GoString() string { return p.String() }
