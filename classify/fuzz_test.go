package classify_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/internal/fuzzbytes"
)

// reasonRE is the shape of every built-in Reason.
var reasonRE = fuzzbytes.ReasonRE

// errorBuilder turns fuzz bytes into an error tree with a small stack
// machine: leaf opcodes push an error, wrapper opcodes replace the top,
// join opcodes combine the top two (or duplicate the top, sharing it).
type errorBuilder struct {
	fuzzbytes.Reader
	stack []entry
}

type entry struct {
	err  error
	size int // node count, with shared subtrees counted once per path
}

func (b *errorBuilder) pop() entry {
	if len(b.stack) == 0 {
		return entry{}
	}
	e := b.stack[len(b.stack)-1]
	b.stack = b.stack[:len(b.stack)-1]
	return e
}

func (b *errorBuilder) push(e error, size int) {
	b.stack = append(b.stack, entry{e, min(size, 1<<20)})
}

var fuzzErrnos = []syscall.Errno{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.EPIPE, syscall.ECONNABORTED,
	syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.ETIMEDOUT, syscall.EACCES, 0}

var fuzzCodes = []string{"08006", "08P01", "28P01", "3D000", "53300", "57P01", "57P03", "40001", "XX000", ""}

func (b *errorBuilder) leaf(op byte) error {
	switch op % 24 {
	case 0:
		return errors.New(secret)
	case 1:
		return pgErr(fuzzCodes[int(b.Next())%len(fuzzCodes)])
	case 2:
		return pgErr(string([]byte{b.Next(), b.Next(), b.Next(), b.Next(), b.Next()}))
	case 3:
		return syscallErr("dial", fuzzErrnos[int(b.Next())%len(fuzzErrnos)])
	case 4:
		return io.EOF
	case 5:
		return io.ErrUnexpectedEOF
	case 6:
		return context.Canceled
	case 7:
		return context.DeadlineExceeded
	case 8:
		return &vendorStatusError{code: b.Code()}
	case 9:
		return vendorAs{b.Code()}
	case 10:
		return panicky{} // Error() would panic
	case 11:
		return &vendorWrapError{} // no verdict of its own, no cause
	case 12:
		return &vendorWrapError{code: b.Code()}
	case 13:
		return pgAs{fuzzCodes[int(b.Next())%len(fuzzCodes)]}
	case 14:
		return &vendorConfigError{}
	case 15:
		c := b.Next()
		return &net.DNSError{Err: secret, IsNotFound: c&1 != 0, IsTemporary: c&2 != 0, IsTimeout: c&4 != 0}
	case 16:
		return &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}
	case 17:
		return x509.HostnameError{Host: secret}
	case 18:
		return &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	case 19:
		var pe *pgconn.PgError
		return pe // typed nil
	case 20:
		var ve *vendorStatusError
		return ve // typed nil; its Unwrap would panic
	case 21:
		return pgconn.ErrConnClosed
	case 22:
		return timeoutErr{}
	default:
		return canceledLike{}
	}
}

// wrap wraps e, whose tree has size nodes.
func (b *errorBuilder) wrap(op byte, e error, size int) error {
	switch (op & 0x3F) % 14 {
	case 0:
		if size > 256 {
			// fmt.Errorf formats e at once, which is exponential in the
			// depth of shared joins.
			return fuzzbytes.LazyWrap{Prefix: "lazy " + secret, Err: e}
		}
		return fmt.Errorf("wrapped %s: %w", secret, e)
	case 1:
		return fuzzbytes.LazyWrap{Prefix: "lazy " + secret, Err: e}
	case 2:
		return &vendorWrapError{err: e}
	case 3:
		return &vendorWrapError{code: b.Code(), err: e}
	case 4:
		return panicky{err: e}
	case 5:
		return urlErr(e)
	case 6:
		return &net.OpError{Op: "dial", Net: "tcp", Err: e}
	case 7:
		return &os.SyscallError{Syscall: "connect", Err: e}
	case 8:
		return &vendorStatusError{code: b.Code(), err: e}
	case 9:
		return &net.OpError{Op: "read", Net: "tcp", Err: e}
	case 10:
		return &vendorStatusError{code: 503, err: e}
	case 11:
		return &net.DNSError{Err: secret, UnwrapErr: e, IsNotFound: b.Next()&1 != 0}
	case 12:
		return &tls.CertificateVerificationError{Err: e}
	default:
		return errors.Join(e, nil)
	}
}

func buildError(data []byte) error {
	if len(data) > 4096 {
		data = data[:4096]
	}
	b := &errorBuilder{}
	b.Reset(data)
	for b.More() {
		op := b.Next()
		switch op >> 6 {
		case 0, 1:
			b.push(b.leaf(op), 1)
		case 2:
			e := b.pop()
			b.push(b.wrap(op, e.err, e.size), e.size+1)
		default:
			if op&1 == 0 {
				e := b.pop()
				b.push(errors.Join(e.err, e.err), 2*e.size+1) // shared subtree
			} else {
				x, y := b.pop(), b.pop()
				b.push(errors.Join(y.err, x.err), x.size+y.size+1)
			}
		}
	}
	switch len(b.stack) {
	case 0:
		return nil
	case 1:
		return b.stack[0].err
	default:
		errs := make([]error, len(b.stack))
		for i, e := range b.stack {
			errs[i] = e.err
		}
		return errors.Join(errs...)
	}
}

func FuzzClassify(f *testing.F) {
	// Opcodes: 0x00-0x7F leaf (op%24), 0x80-0xBF wrapper ((op&0x3F)%14),
	// 0xC0-0xFF join (even: errors.Join(top, top); odd: join the top two).
	f.Add([]byte{})
	f.Add([]byte{3, 0})                             // refused
	f.Add([]byte{1, 5, 0x82})                       // vendorWrap(57P01)
	f.Add([]byte{10, 0x82, 0x80})                   // fmt(vendorWrap(panicky))
	f.Add([]byte{9, 8, 0x88, 8, 0x85})              // url(vendorStatus{503}(vendorAs{503}))
	f.Add([]byte{13, 5, 0x85, 0x82})                // vendorWrap(url(pgAs{57P01}))
	f.Add([]byte{8, 2, 0x83, 8, 0x80})              // fmt(vendorWrap{503}(vendorStatus{403}))
	f.Add([]byte{3, 0, 16, 0xC1})                   // join(refused, tls)
	f.Add([]byte{14, 3, 0, 0xC1})                   // join(vendorConfig, refused)
	f.Add([]byte{3, 0, 0xC0, 0xC0, 0xC0, 0xC0})     // shared joins
	f.Add([]byte{6, 3, 0, 0xC1, 0x83, 8})           // vendorWrap{503}(join(canceled, refused))
	f.Add([]byte{20, 19, 0xC1, 0x86})               // OpError(join(typed nils))
	f.Add([]byte{2, 'p', '4', 's', 's', 'w', 0x80}) // odd SQLSTATE
	deep := []byte{3, 0}
	for i := 0; i < 100; i++ {
		deep = append(deep, 0x81)
	}
	f.Add(deep) // 100 lazy wrappers around refused

	f.Fuzz(func(t *testing.T, data []byte) {
		err := buildError(data)
		// The built-in rules alone must hold up too.
		if v := classify.Classify(err); !reasonRE.MatchString(v.Reason) {
			t.Fatalf("Classify without type rules: Reason %q", v.Reason)
		}
		got := withVendor.Classify(err)
		if got.Reason == "" {
			t.Fatalf("empty Reason for %v", got)
		}
		if got.Class != classify.Fatal && got.Class != classify.Transient {
			t.Fatalf("Class out of range: %v", got)
		}
		if !reasonRE.MatchString(got.Reason) || strings.Contains(got.Reason, secret) {
			t.Fatalf("Reason %q is not a short machine-readable token", got.Reason)
		}
		if again := withVendor.Classify(err); again != got {
			t.Fatalf("not deterministic: %v then %v", got, again)
		}
		if err == nil {
			if got.Reason != classify.ReasonNoError {
				t.Fatalf("nil error gave %v", got)
			}
			return
		}
		// Cross-check the "anywhere" rules against the standard library on
		// trees small enough for errors.Is. Typed nil leaves are skipped by
		// Classify but make errors.Is panic, so they are excluded.
		if got.Reason == classify.ReasonTooComplex || hasTypedNil(data) {
			return
		}
		if errors.Is(err, context.Canceled) && got.Reason != classify.ReasonCanceled {
			t.Fatalf("context.Canceled in the tree but got %v", got)
		}
		var ce *vendorConfigError
		if errors.As(err, &ce) && got.Class != classify.Fatal {
			t.Fatalf("a Misconfiguration node in the tree but got %v", got)
		}
	})
}

// hasTypedNil reports whether the builder may have produced a typed nil leaf
// (opcodes 19 and 20); it over-approximates, which only skips checks.
func hasTypedNil(data []byte) bool {
	for _, c := range data {
		if c>>6 < 2 && (c%24 == 19 || c%24 == 20) {
			return true
		}
	}
	return false
}
