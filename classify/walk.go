package classify

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"os"
	"reflect"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// Walk limits. Real chains are about ten levels deep; the limits only stop
// pathological trees (for example errors.Join(e, e) nested many times, which
// doubles the node count per level) from making Classify slow.
const (
	maxDepth = 64
	maxNodes = 1024
)

// rank orders findings: a lower rank wins; among equal ranks the first found
// (depth-first, outermost and leftmost first) wins.
type rank int

const (
	rankCanceled rank = iota
	rankTLS
	rankConfig
	rankFatal
	rankTransient
	rankNone // nothing recognised
)

type finding struct {
	v Verdict
	r rank
}

var none = finding{r: rankNone}

func (f finding) or(g finding) finding {
	if g.r < f.r {
		return g
	}
	return f
}

func rankOf(v Verdict) rank {
	if v.Class == Transient {
		return rankTransient
	}
	return rankFatal
}

type walker struct {
	types     []TypeRule // the classifier's type rules, in order
	nodes     int
	truncated bool // a limit stopped the walk
	nilNode   bool // a typed nil pointer was seen (errors.As may panic on it)
}

func builtin(err error, types []TypeRule) Verdict {
	w := walker{types: types}
	f := w.visit(err, 0)
	if w.truncated {
		// Parts of the tree were not examined; they could hold a cause
		// that outranks what was found.
		return Verdict{Fatal, ReasonTooComplex}
	}
	if f.r != rankNone {
		return f.v
	}
	// The whole tree has at most maxNodes nodes and no typed nil pointers,
	// so errors.As inside pgconn.Timeout is cheap and safe here. It finds
	// pgconn's unexported errTimeout, which can wrap a net.Error that no
	// other rule recognises.
	if !w.nilNode && pgconn.Timeout(err) {
		return Verdict{Transient, ReasonTimeout}
	}
	return Verdict{Fatal, ReasonUnknown}
}

// visit classifies the tree rooted at err. Decisive nodes decide unless a
// higher-ranked cause is found inside them; wrapper nodes let their
// recognised causes decide and fall back to their own verdict only when no
// cause is recognised.
func (w *walker) visit(err error, depth int) finding {
	if err == nil {
		return none
	}
	w.nodes++
	if depth > maxDepth || w.nodes > maxNodes {
		w.truncated = true
		return none
	}
	if isNilPointer(err) {
		// A typed nil: its methods may dereference the receiver.
		w.nilNode = true
		return none
	}
	f, isDecisive := w.decisive(err)
	sub := none
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		sub = w.visit(u.Unwrap(), depth+1)
	case interface{ Unwrap() []error }:
		for _, c := range u.Unwrap() {
			sub = sub.or(w.visit(c, depth+1))
		}
	}
	if isDecisive {
		// Causes inside a decisive error only matter if they rank higher
		// (context.Canceled inside a TLS error, a Fatal cause inside a
		// transient-looking error).
		return f.or(sub)
	}
	if sub.r != rankNone {
		return sub
	}
	if v, ok := w.fallback(err); ok {
		return finding{v, rankOf(v)}
	}
	return none
}

// decisive recognises errors that decide by themselves.
func (w *walker) decisive(err error) (finding, bool) {
	if is(err, context.Canceled) {
		return finding{Verdict{Fatal, ReasonCanceled}, rankCanceled}, true
	}
	if isTLSVerification(err) {
		return finding{Verdict{Fatal, ReasonTLS}, rankTLS}, true
	}
	for _, t := range w.types {
		if t.Kind != Misconfiguration {
			continue
		}
		if v, ok := t.match(err); ok {
			return finding{v, rankConfig}, true
		}
	}
	var v Verdict
	switch {
	case asOK[*pgconn.PgError](err, func(e *pgconn.PgError) { v = SQLState(e.Code) }):
	case w.typeMatch(err, Cause, &v):
	case asOK[syscall.Errno](err, func(e syscall.Errno) { v = errnoVerdict(e) }):
		if v.Reason == "" {
			return none, false
		}
	case socketMissing(err):
		v = Verdict{Transient, ReasonSocketMissing}
	case is(err, io.EOF), is(err, io.ErrUnexpectedEOF):
		v = Verdict{Transient, ReasonEOF}
	case is(err, pgconn.ErrConnClosed):
		v = Verdict{Transient, ReasonConnClosed}
	case is(err, context.DeadlineExceeded), is(err, os.ErrDeadlineExceeded):
		v = Verdict{Transient, ReasonTimeout}
	default:
		return none, false
	}
	return finding{v, rankOf(v)}, true
}

// typeMatch runs the type rules of kind k on the single node err, in
// order; the first match sets *v.
func (w *walker) typeMatch(err error, k NodeKind, v *Verdict) bool {
	for _, t := range w.types {
		if t.Kind != k {
			continue
		}
		if got, ok := t.match(err); ok {
			*v = got
			return true
		}
	}
	return false
}

// fallback gives a wrapper's own verdict, used when nothing inside it is
// recognised.
func (w *walker) fallback(err error) (Verdict, bool) {
	var v Verdict
	if w.typeMatch(err, Wrapper, &v) {
		return v, true
	}
	if e, ok := as[*net.DNSError](err); ok {
		switch {
		case e.IsTimeout || e.IsTemporary:
			return Verdict{Transient, ReasonDNSTemporary}, true
		case e.IsNotFound:
			return Verdict{Fatal, ReasonDNSNotFound}, true
		default:
			return Verdict{Transient, ReasonDNSError}, true
		}
	}
	if e, ok := as[*net.OpError](err); ok && opTimeout(e) {
		return Verdict{Transient, ReasonTimeout}, true
	}
	return Verdict{}, false
}

// opTimeout is (*net.OpError).Timeout without its nil-pointer hazards.
func opTimeout(e *net.OpError) bool {
	inner := e.Err
	if se, ok := inner.(*os.SyscallError); ok {
		if se == nil {
			return false
		}
		inner = se.Err
	}
	if inner == nil || isNilPointer(inner) {
		return false
	}
	t, ok := inner.(interface{ Timeout() bool })
	return ok && t.Timeout()
}

// socketMissing reports whether the single node err is the dial of a Unix
// socket that does not exist: a *net.OpError of Op "dial" on a "unix"
// network whose cause is ENOENT (a PostgreSQL server, or a Cloud SQL Auth
// Proxy sidecar in unix-socket mode, not listening there yet, or gone
// while it restarts). ENOENT anywhere else (a file a password function
// reads) is not recognised.
func socketMissing(err error) bool {
	e, ok := as[*net.OpError](err)
	if !ok || e.Op != "dial" || (e.Net != "unix" && e.Net != "unixpacket") {
		return false
	}
	inner := e.Err
	if se, ok := inner.(*os.SyscallError); ok && se != nil {
		inner = se.Err
	}
	errno, ok := inner.(syscall.Errno)
	return ok && errno == syscall.ENOENT
}

// transientErrnos are the errnos of a connection that a later attempt
// may not meet, with their Reasons.
var transientErrnos = map[syscall.Errno]string{
	syscall.ECONNREFUSED: ReasonConnRefused,
	syscall.ECONNRESET:   ReasonConnReset,
	syscall.EPIPE:        ReasonBrokenPipe,
	syscall.ECONNABORTED: ReasonConnAborted,
	syscall.EHOSTUNREACH: ReasonHostUnreachable,
	syscall.ENETUNREACH:  ReasonNetUnreachable,
	syscall.ETIMEDOUT:    ReasonTimeout,
}

func errnoVerdict(e syscall.Errno) Verdict {
	if reason, ok := transientErrnos[e]; ok {
		return Verdict{Transient, reason}
	}
	return Verdict{}
}

func isTLSVerification(err error) bool {
	return isA[*tls.CertificateVerificationError](err) ||
		isA[x509.UnknownAuthorityError](err) || isA[*x509.UnknownAuthorityError](err) ||
		isA[x509.HostnameError](err) || isA[*x509.HostnameError](err) ||
		isA[x509.CertificateInvalidError](err) || isA[*x509.CertificateInvalidError](err)
}

// isA reports whether as[T] finds a T in the single node err.
func isA[T any](err error) bool {
	_, ok := as[T](err)
	return ok
}

// is reports whether the single node err matches target, as one step of
// errors.Is does (identity, then an Is method). It does not unwrap. target's
// dynamic type must be comparable, so that == cannot panic.
func is(err, target error) bool {
	if err == target {
		return true
	}
	if x, ok := err.(interface{ Is(error) bool }); ok {
		return x.Is(target)
	}
	return false
}

// as reports whether the single node err is a T, as one step of errors.As
// does (type assertion, then an As method). It does not unwrap. A nil
// pointer T never matches.
func as[T any](err error) (T, bool) {
	if t, ok := err.(T); ok {
		return t, !isNilPointer(t)
	}
	var t T
	if x, ok := err.(interface{ As(any) bool }); ok && x.As(&t) {
		return t, !isNilPointer(t)
	}
	return t, false
}

// NodeAs reports whether the single node err is a T, as one step of
// [errors.As] does (a type assertion, then an As method), without
// unwrapping; a nil pointer T never matches. Use it in a [TypeRule]'s Match.
func NodeAs[T any](err error) (T, bool) { return as[T](err) }

// asOK is as with a callback, for use in switch cases.
func asOK[T any](err error, f func(T)) bool {
	t, ok := as[T](err)
	if ok {
		f(t)
	}
	return ok
}

func isNilPointer(x any) bool {
	v := reflect.ValueOf(x)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// contains reports whether target is found in err's tree by identity or an
// Is method, within the walk limits. target must be non-nil and of a
// comparable type.
func contains(err, target error, depth int, nodes *int) bool {
	if err == nil {
		return false
	}
	*nodes++
	if depth > maxDepth || *nodes > maxNodes || isNilPointer(err) {
		return false
	}
	if is(err, target) {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return contains(u.Unwrap(), target, depth+1, nodes)
	case interface{ Unwrap() []error }:
		for _, c := range u.Unwrap() {
			if contains(c, target, depth+1, nodes) {
				return true
			}
		}
	}
	return false
}
