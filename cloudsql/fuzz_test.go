package cloudsql_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/cloudsqlconn"
	"cloud.google.com/go/cloudsqlconn/errtype"
	"cloud.google.com/go/compute/metadata"
	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/oauth2"
	"google.golang.org/api/googleapi"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/cloudsql"
)

// reasonRE is the shape of every built-in Reason.
var reasonRE = regexp.MustCompile(`^[a-z0-9]+(-[a-zA-Z0-9]+)*$`)

// lazyWrap wraps without formatting at construction, so a chain holding an
// *auth.Error without Response can be built; its Error would panic.
type lazyWrap struct{ err error }

func (w lazyWrap) Error() string { return "lazy " + secret + ": " + w.err.Error() }
func (w lazyWrap) Unwrap() error { return w.err }

// googleTree turns fuzz bytes into an error tree of Google's, the Cloud
// SQL connector's and a few core leaves, with a small stack machine: leaf
// opcodes push an error, wrapper opcodes replace the top, join opcodes
// combine the top two (or duplicate the top, sharing it). Package classify
// fuzzes the walk itself (FuzzClassify) without vendor types.
type googleTree struct {
	data  []byte
	stack []error
}

func (b *googleTree) next() byte {
	if len(b.data) == 0 {
		return 0
	}
	c := b.data[0]
	b.data = b.data[1:]
	return c
}

var fuzzStatus = []int{400, 401, 403, 404, 408, 429, 500, 502, 503, 504}

// code returns an HTTP status: bytes 0-9 pick a common one, others give
// 310..555.
func (b *googleTree) code() int {
	c := int(b.next())
	if c < len(fuzzStatus) {
		return fuzzStatus[c]
	}
	return 300 + c
}

func (b *googleTree) pop() error {
	if len(b.stack) == 0 {
		return nil
	}
	e := b.stack[len(b.stack)-1]
	b.stack = b.stack[:len(b.stack)-1]
	return e
}

func (b *googleTree) leaf(op byte) error {
	switch op % 18 {
	case 0:
		return errors.New(secret)
	case 1:
		return &pgconn.PgError{Code: []string{"08006", "28P01", "53300", "57P01"}[b.next()%4], Message: secret}
	case 2:
		return syscallErr("dial", []syscall.Errno{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.EACCES}[b.next()%3])
	case 3:
		return context.Canceled
	case 4:
		return context.DeadlineExceeded
	case 5:
		return googleErr(b.code())
	case 6:
		return retrieveErr(b.code())
	case 7:
		return &oauth2.RetrieveError{} // Error() would panic
	case 8:
		return &oauth2.RetrieveError{Response: resp(400), ErrorCode: "invalid_grant"}
	case 9:
		return &auth.Error{} // Error() would panic
	case 10:
		return &auth.Error{Response: resp(b.code())}
	case 11:
		return &metadata.Error{Code: b.code(), Message: secret}
	case 12:
		return errtype.NewConfigError(secret, connName)
	case 13:
		return &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}
	case 14:
		var re *errtype.RefreshError
		return re // typed nil; its Unwrap would panic
	case 15:
		return cloudsqlconn.ErrDialerClosed
	case 16:
		return io.EOF
	default:
		return errtype.NewDialError(`certificate had CN "x", expected "p:i"`, connName, nil)
	}
}

// wrap wraps e, without formatting it: fmt.Errorf would call Error, which
// panics for some leaves and is exponential in the depth of shared joins.
func (b *googleTree) wrap(op byte, e error) error {
	switch (op & 0x3F) % 11 {
	case 0:
		return lazyWrap{e}
	case 1:
		return errtype.NewRefreshError(secret, connName, e)
	case 2:
		return errtype.NewDialError(secret, connName, e)
	case 3:
		return errtype.NewResourceExhaustedError(secret, connName, e)
	case 4:
		return urlErr(e)
	case 5:
		return &net.OpError{Op: "dial", Net: "tcp", Err: e}
	case 6:
		return &auth.Error{Err: e} // nil Response
	case 7:
		return &auth.Error{Response: resp(b.code()), Err: e}
	case 8:
		ge := &googleapi.Error{Code: b.code()}
		ge.Wrap(e)
		return ge
	case 9:
		return &net.OpError{Op: "read", Net: "tcp", Err: e}
	default:
		return errors.Join(e, nil)
	}
}

func (b *googleTree) build(data []byte) error {
	if len(data) > 1024 {
		data = data[:1024]
	}
	b.data = data
	for len(b.data) > 0 {
		op := b.next()
		switch op >> 6 {
		case 0, 1:
			b.stack = append(b.stack, b.leaf(op))
		case 2:
			b.stack = append(b.stack, b.wrap(op, b.pop()))
		default:
			if op&1 == 0 {
				e := b.pop()
				b.stack = append(b.stack, errors.Join(e, e)) // shared subtree
			} else {
				x, y := b.pop(), b.pop()
				b.stack = append(b.stack, errors.Join(y, x))
			}
		}
	}
	switch len(b.stack) {
	case 0:
		return nil
	case 1:
		return b.stack[0]
	default:
		return errors.Join(b.stack...)
	}
}

// FuzzTypeRules classifies trees of Google's error types with TypeRules,
// and with Rules too as With makes a factory do: no panic (several of these
// types panic in Error or, as nil pointers, in Unwrap), short
// machine-readable reasons, deterministic verdicts, and the "anywhere"
// rules hold.
func FuzzTypeRules(f *testing.F) {
	// Opcodes: 0x00-0x7F leaf (op%18), 0x80-0xBF wrapper ((op&0x3F)%11),
	// 0xC0-0xFF join (even: errors.Join(top, top); odd: join the top two).
	f.Add([]byte{})
	f.Add([]byte{9, 0x81, 0x80})                // lazy(RefreshError(auth.Error without Response))
	f.Add([]byte{6, 8, 0x87, 8, 0x84})          // url(auth.Error{503}(RetrieveError{503}))
	f.Add([]byte{11, 8, 0x89, 0x84, 0x81})      // RefreshError(url(fmt(metadata.Error{503})))
	f.Add([]byte{5, 2, 0x81, 0x80})             // lazy(RefreshError(googleapi.Error{403}))
	f.Add([]byte{8, 0x87, 8})                   // auth.Error{503}(invalid_grant)
	f.Add([]byte{2, 0, 12, 0xC1})               // join(refused, ConfigError)
	f.Add([]byte{3, 12, 0xC1, 0x82})            // DialError(join(canceled, ConfigError))
	f.Add([]byte{2, 0, 0x82, 15, 0xC1})         // join(DialError(refused), ErrDialerClosed)
	f.Add([]byte{17, 0x82})                     // DialError(server identity)
	f.Add([]byte{14, 7, 0xC1, 0x85})            // OpError(join(typed nil, RetrieveError{}))
	f.Add([]byte{5, 8, 0xC0, 0xC0, 0xC0, 0xC0}) // shared joins

	// As With installs them: Rules (which decide before the walk), then
	// TypeRules in the walk; and TypeRules alone.
	full := classify.New(cloudsql.Rules()...).WithTypes(cloudsql.TypeRules()...)
	f.Fuzz(func(t *testing.T, data []byte) {
		err := (&googleTree{}).build(data)
		got := withGoogle.Classify(err)
		withRules := full.Classify(err)
		for _, v := range []classify.Verdict{got, withRules} {
			if v.Class != classify.Fatal && v.Class != classify.Transient {
				t.Fatalf("Class out of range: %v", v)
			}
			if !reasonRE.MatchString(v.Reason) || strings.Contains(v.Reason, secret) {
				t.Fatalf("Reason %q is not a short machine-readable token", v.Reason)
			}
		}
		if again := withGoogle.Classify(err); again != got {
			t.Fatalf("not deterministic: %v then %v", got, again)
		}
		if again := full.Classify(err); again != withRules {
			t.Fatalf("not deterministic with Rules: %v then %v", withRules, again)
		}
		if err == nil {
			if got.Reason != classify.ReasonNoError || withRules.Reason != classify.ReasonNoError {
				t.Fatalf("nil error gave %v, %v", got, withRules)
			}
			return
		}
		// The Rules only ever make a verdict Fatal.
		if withRules != got && withRules.Class != classify.Fatal {
			t.Fatalf("Rules changed %v into %v", got, withRules)
		}
		// Cross-check against the standard library on trees small enough
		// for errors.Is; a typed nil leaf makes errors.As panic.
		if got.Reason == classify.ReasonTooComplex || hasTypedNil(data) {
			return
		}
		if errors.Is(err, cloudsqlconn.ErrDialerClosed) && withRules.Reason != classify.ReasonDialerClosed {
			t.Fatalf("ErrDialerClosed in the tree but got %v", withRules)
		}
		if errors.Is(err, context.Canceled) && got.Reason != classify.ReasonCanceled {
			t.Fatalf("context.Canceled in the tree but got %v", got)
		}
		var ce *errtype.ConfigError
		if errors.As(err, &ce) && (got.Class != classify.Fatal || withRules.Class != classify.Fatal) {
			t.Fatalf("ConfigError in the tree but got %v, with Rules %v", got, withRules)
		}
	})
}

// hasTypedNil reports whether the builder may have produced a typed nil
// leaf (opcode 14); it over-approximates, which only skips checks.
func hasTypedNil(data []byte) bool {
	for _, c := range data {
		if c>>6 < 2 && c%18 == 14 {
			return true
		}
	}
	return false
}
