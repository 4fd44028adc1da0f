// Package gcptest is what the tests of packages cloudsql and alloydb
// share: error trees of Google's, a Google connector's and a few core
// error types built from fuzz bytes, and the checks of a connector's
// classification of them (their FuzzTypeRules; package classify fuzzes
// the walk itself, FuzzClassify, without vendor types); assertions on
// error chains; and the factory, pool and context helpers of their
// end-to-end tests.
package gcptest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/compute/metadata"
	"github.com/googleapis/gax-go/v2/apierror"
	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/oauth2"
	"google.golang.org/api/googleapi"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/internal/fuzzbytes"
)

// Secret appears in every message of the trees; no Reason may contain it.
const Secret = "p4ssw0rd"

// Tree turns fuzz bytes into an error tree with a small stack machine:
// opcodes 0x00-0x7F push Leaves[op % len(Leaves)], 0x80-0xBF replace the
// top with Wraps[(op&0x3F) % len(Wraps)] of it, 0xC0-0xFF join (even:
// errors.Join(top, top), a shared subtree; odd: join the top two). Leaves
// and wrappers may read more bytes (Next, Code).
type Tree struct {
	fuzzbytes.Reader // Next, Code

	Leaves []func(*Tree) error
	Wraps  []func(*Tree, error) error

	// TypedNil is set by Build when a leaf was a typed nil pointer
	// (errors.As may panic on one).
	TypedNil bool

	stack []error
}

func (b *Tree) pop() error {
	if len(b.stack) == 0 {
		return nil
	}
	e := b.stack[len(b.stack)-1]
	b.stack = b.stack[:len(b.stack)-1]
	return e
}

// Build returns the tree of data (its first 1024 bytes), or nil for none.
func (b *Tree) Build(data []byte) error {
	if len(data) > 1024 {
		data = data[:1024]
	}
	b.Reset(data)
	b.stack, b.TypedNil = nil, false
	for b.More() {
		op := b.Next()
		switch op >> 6 {
		case 0, 1:
			e := b.Leaves[int(op)%len(b.Leaves)](b)
			if v := reflect.ValueOf(e); e != nil && v.Kind() == reflect.Pointer && v.IsNil() {
				b.TypedNil = true
			}
			b.stack = append(b.stack, e)
		case 2:
			b.stack = append(b.stack, b.Wraps[int(op&0x3F)%len(b.Wraps)](b, b.pop()))
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

// The leaves that are no connector's.
var (
	Message = func(*Tree) error { return errors.New(Secret) }
	PgError = func(b *Tree) error {
		return &pgconn.PgError{Code: []string{"08006", "28P01", "53300", "57P01"}[b.Next()%4], Message: Secret}
	}
	Errno = func(b *Tree) error {
		return SyscallErr("dial", []syscall.Errno{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.EACCES}[b.Next()%3])
	}
	Canceled           = func(*Tree) error { return context.Canceled }
	DeadlineExceeded   = func(*Tree) error { return context.DeadlineExceeded }
	Google             = func(b *Tree) error { return GoogleErr(b.Code()) }
	Retrieve           = func(b *Tree) error { return RetrieveErr(b.Code()) }
	RetrieveNoResponse = func(*Tree) error { return &oauth2.RetrieveError{} } // Error() would panic
	InvalidGrant       = func(*Tree) error { return &oauth2.RetrieveError{Response: Resp(400), ErrorCode: "invalid_grant"} }
	AuthNoResponse     = func(*Tree) error { return &auth.Error{} } // Error() would panic
	Auth               = func(b *Tree) error { return &auth.Error{Response: Resp(b.Code())} }
	Metadata           = func(b *Tree) error { return &metadata.Error{Code: b.Code(), Message: Secret} }
	TLSVerification    = func(*Tree) error { return &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}} }
	EOF                = func(*Tree) error { return io.EOF }
)

// The wrappers that are no connector's; they never format the error they
// wrap (fmt.Errorf would call Error, which panics for some leaves and is
// exponential in the depth of shared joins).
var (
	Lazy       = func(_ *Tree, e error) error { return fuzzbytes.LazyWrap{Prefix: "lazy " + Secret, Err: e} }
	URL        = func(_ *Tree, e error) error { return URLErr(e) }
	DialOp     = func(_ *Tree, e error) error { return &net.OpError{Op: "dial", Net: "tcp", Err: e} }
	AuthWrap   = func(_ *Tree, e error) error { return &auth.Error{Err: e} } // nil Response
	AuthStatus = func(b *Tree, e error) error { return &auth.Error{Response: Resp(b.Code()), Err: e} }
	GoogleWrap = func(b *Tree, e error) error {
		ge := &googleapi.Error{Code: b.Code()}
		ge.Wrap(e)
		return ge
	}
	ReadOp  = func(_ *Tree, e error) error { return &net.OpError{Op: "read", Net: "tcp", Err: e} }
	JoinNil = func(_ *Tree, e error) error { return errors.Join(e, nil) }
)

// GoogleErr builds a *googleapi.Error wrapping its *apierror.APIError, as
// a generated Admin API client returns it.
func GoogleErr(code int) *googleapi.Error {
	ge := &googleapi.Error{Code: code, Message: Secret}
	if ae, ok := apierror.ParseError(ge, false); ok {
		ge.Wrap(ae)
	}
	return ge
}

// Resp is an HTTP response of status code.
func Resp(code int) *http.Response {
	return &http.Response{StatusCode: code, Status: strconv.Itoa(code)}
}

// RetrieveErr is a token endpoint's answer of status code.
func RetrieveErr(code int) *oauth2.RetrieveError {
	return &oauth2.RetrieveError{Response: Resp(code), Body: []byte(Secret)}
}

// SyscallErr is a network operation that failed with errno.
func SyscallErr(op string, errno syscall.Errno) error {
	return &net.OpError{Op: op, Net: "tcp", Err: os.NewSyscallError(op, errno)}
}

// URLErr is an HTTP request that failed with err.
func URLErr(err error) error {
	return &url.Error{Op: "Post", URL: "https://googleapis.com/" + Secret, Err: err}
}

// Checks are what Check asserts of a connector's classification.
type Checks struct {
	// Types classifies with the connector's TypeRules only; Full with its
	// Rules too, as its With makes a factory do.
	Types, Full *classify.Classifier
	// Closed is the connector's closed-dialer sentinel.
	Closed error
	// IsConfig reports whether errors.As finds the connector's
	// configuration error in err.
	IsConfig func(err error) bool
}

// Check classifies err (built by b) and fails t if a verdict is out of
// range, has a Reason that is no short machine-readable token, is not
// deterministic, or breaks an "anywhere" rule: Rules only ever make a
// verdict Fatal; the closed dialer, cancellation and a configuration error
// anywhere decide.
func (c Checks) Check(t *testing.T, b *Tree, err error) {
	t.Helper()
	got, withRules := c.Types.Classify(err), c.Full.Classify(err)
	for _, v := range []classify.Verdict{got, withRules} {
		if v.Class != classify.Fatal && v.Class != classify.Transient {
			t.Fatalf("Class out of range: %v", v)
		}
		if !fuzzbytes.ReasonRE.MatchString(v.Reason) || strings.Contains(v.Reason, Secret) {
			t.Fatalf("Reason %q is not a short machine-readable token", v.Reason)
		}
	}
	if again := c.Types.Classify(err); again != got {
		t.Fatalf("not deterministic: %v then %v", got, again)
	}
	if again := c.Full.Classify(err); again != withRules {
		t.Fatalf("not deterministic with Rules: %v then %v", withRules, again)
	}
	if err == nil {
		if got.Reason != classify.ReasonNoError || withRules.Reason != classify.ReasonNoError {
			t.Fatalf("nil error gave %v, %v", got, withRules)
		}
		return
	}
	if withRules != got && withRules.Class != classify.Fatal {
		t.Fatalf("Rules changed %v into %v", got, withRules)
	}
	// Cross-check against the standard library on trees small enough for
	// errors.Is; a typed nil leaf makes errors.As panic.
	if got.Reason == classify.ReasonTooComplex || b.TypedNil {
		return
	}
	if errors.Is(err, c.Closed) && withRules.Reason != classify.ReasonDialerClosed {
		t.Fatalf("the closed dialer's sentinel in the tree but got %v", withRules)
	}
	if errors.Is(err, context.Canceled) && got.Reason != classify.ReasonCanceled {
		t.Fatalf("context.Canceled in the tree but got %v", got)
	}
	if c.IsConfig(err) && (got.Class != classify.Fatal || withRules.Class != classify.Fatal) {
		t.Fatalf("a configuration error in the tree but got %v, with Rules %v", got, withRules)
	}
}
