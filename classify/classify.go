package classify

import (
	"reflect"

	"github.com/holdfast-db/holdfast/internal/enum"
)

// Class says whether a failed connection attempt may be retried.
//
// The zero value is [Fatal], so a forgotten or unset Class fails safe.
type Class int

const (
	// Fatal means: do not retry; surface the error to the caller now.
	// Unknown errors are Fatal.
	Fatal Class = iota
	// Transient means: a later connection attempt, after a backoff, may
	// succeed.
	Transient
)

var classNames = [...]string{
	Fatal:     "fatal",
	Transient: "transient",
}

// String returns "fatal" or "transient", or "Class(N)" for any other value.
func (c Class) String() string { return enum.Name("Class", c, classNames[:]) }

// Verdict is the outcome of classifying one error.
//
// Reason is short, stable and machine-readable (for metrics labels and
// logs); the built-in rules never copy error message text into it. See the
// package documentation for every Reason the built-in rules produce. The
// zero value is {Fatal, ""}: not retryable.
type Verdict struct {
	Class  Class
	Reason string
}

// Retryable reports whether v.Class is [Transient]. Any other Class,
// including an out-of-range one, is not retryable.
func (v Verdict) Retryable() bool { return v.Class == Transient }

// String returns "class/reason", e.g. "transient/conn-refused".
func (v Verdict) String() string { return v.Class.String() + "/" + v.Reason }

// Rule is a user-supplied classification rule, consulted by
// [Classifier.Classify] before the built-in rules. It returns ok=false to
// defer to the next rule (and finally to the built-in rules).
//
// A Rule receives the whole (outermost) error and is expected to look into it
// with [errors.As] or [errors.Is]. It must not panic, must be safe for
// concurrent use, and should not call Error on errors it does not know (some
// third-party errors panic in Error when fields are missing). If the returned
// Verdict has an empty Reason, [ReasonRule] is used.
type Rule func(err error) (v Verdict, ok bool)

// Classifier classifies errors with optional user [Rule]s tried, in order,
// before the built-in rules.
//
// A nil *Classifier is valid and uses the built-in rules only. A Classifier
// is immutable after [New] and safe for concurrent use.
type Classifier struct {
	rules []Rule
	types []TypeRule
}

// NodeKind says how a [TypeRule]'s verdict for one node of an error tree
// ranks against what is found inside that node.
type NodeKind int

const (
	// Cause: the node decides for itself, like a *pgconn.PgError, unless a
	// higher-ranked cause is inside it (cancellation, a TLS verification
	// failure, a Fatal cause inside a Transient-looking node).
	Cause NodeKind = iota
	// Wrapper: the node's verdict counts only when nothing inside it is
	// recognised, like a Cloud SQL DialError wrapping a network error.
	Wrapper
	// Misconfiguration: the node is a configuration mistake that outranks
	// every other cause except cancellation and TLS verification.
	Misconfiguration
)

// TypeRule recognises one node of an error tree by its type, for error
// types of packages that classify does not import (Google's token and
// Admin API errors, the Cloud SQL connector's; see package cloudsql).
// Unlike a [Rule], which sees the whole error and decides alone, a
// TypeRule takes part in the walk that [Classifier.Classify] makes, so its
// verdicts rank against the built-in ones exactly as the built-in types
// rank against each other.
//
// Match looks at one node only: it must not unwrap (use [NodeAs] or a type
// assertion), must not call Error on errors it does not know, must not
// panic and must be safe for concurrent use. A TypeRule with a nil Match
// never matches.
type TypeRule struct {
	Match func(err error) (Verdict, bool)
	Kind  NodeKind
}

func (t TypeRule) match(err error) (Verdict, bool) {
	if t.Match == nil {
		return Verdict{}, false
	}
	return t.Match(err)
}

// WithTypes returns a copy of c that also consults types, in order, while
// walking an error tree. c may be nil.
func (c *Classifier) WithTypes(types ...TypeRule) *Classifier {
	n := &Classifier{}
	if c != nil {
		n.rules = c.rules
		n.types = append(n.types, c.types...)
	}
	n.types = append(n.types, types...)
	return n
}

// New returns a Classifier that tries rules in order before the built-in
// rules. Nil rules are ignored. The slice is copied.
func New(rules ...Rule) *Classifier {
	c := &Classifier{rules: make([]Rule, 0, len(rules))}
	for _, r := range rules {
		if r != nil {
			c.rules = append(c.rules, r)
		}
	}
	return c
}

// Sentinel returns a [Rule] that gives v when target is found anywhere in
// the error tree (by identity or an Is method, as [errors.Is] does, within
// the same walk limits as [Classify]). A nil target or one of a
// non-comparable type never matches.
//
// Use it for sentinel errors of packages this one does not import, for
// example the Cloud SQL connector's closed-dialer error:
//
//	c := classify.New(classify.Sentinel(cloudsqlconn.ErrDialerClosed,
//		classify.Verdict{Class: classify.Fatal, Reason: classify.ReasonDialerClosed}))
func Sentinel(target error, v Verdict) Rule {
	ok := target != nil && reflect.TypeOf(target).Comparable()
	return func(err error) (Verdict, bool) {
		if !ok {
			return Verdict{}, false
		}
		nodes := 0
		if contains(err, target, 0, &nodes) {
			return v, true
		}
		return Verdict{}, false
	}
}

// Classify classifies err: nil gives {Fatal, "no-error"} without consulting
// any rule; otherwise the user rules are tried in order and the first one
// that returns ok=true decides; otherwise the built-in rules of the package
// function [Classify] decide. c may be nil.
func (c *Classifier) Classify(err error) Verdict {
	if err == nil {
		return Verdict{Fatal, ReasonNoError}
	}
	if c == nil {
		return builtin(err, nil)
	}
	for _, r := range c.rules {
		if v, ok := r(err); ok {
			if v.Reason == "" {
				v.Reason = ReasonRule
			}
			return v
		}
	}
	return builtin(err, c.types)
}

// Classify classifies err with the built-in rules only. It never calls
// err.Error() and never looks at message text: it decides only by error
// types, sentinel identities, SQLSTATE codes and HTTP status codes found
// while walking the wrapped error tree (Unwrap() error and
// Unwrap() []error, as [errors.Is] does).
//
// Decision order (the first matching step wins):
//
//  1. nil → {Fatal, "no-error"}.
//  2. [context.Canceled] anywhere in the tree → {Fatal, "canceled"}.
//  3. A TLS certificate verification failure anywhere
//     (*tls.CertificateVerificationError, x509.UnknownAuthorityError,
//     x509.HostnameError, x509.CertificateInvalidError) →
//     {Fatal, "tls-verification"}, even inside a transient-looking
//     cloudsqlconn DialError.
//  4. A [TypeRule] of kind [Misconfiguration] anywhere (package cloudsql's
//     rules make the connector's *errtype.ConfigError one).
//  5. Every other recognised cause is collected; the innermost recognised
//     cause decides for its wrapper (a network error inside a [Wrapper]
//     node such as the Cloud SQL connector's DialError). If any collected
//     cause is Fatal, the first Fatal one is the verdict (fail safe: a pgx
//     multi-host ConnectError with one host refusing and another answering
//     28P01 is Fatal); otherwise the first Transient one.
//  6. pgconn.Timeout(err) → {Transient, "timeout"}.
//  7. Anything else → {Fatal, "unknown"}.
//
// A tree deeper than 64 levels or larger than 1024 nodes (counting shared
// subtrees once per path) is not examined further: {Fatal, "too-complex"}.
//
// Recognised causes:
//
//	*pgconn.PgError              Transient: 08000 08001 08003 08004 08006 53000 53200 53300
//	                                        57P01 57P02 57P03 57P05; every other code Fatal.
//	                             Reason "sqlstate-<code>" (see [SQLState]).
//	syscall.ECONNREFUSED         Transient "conn-refused"
//	syscall.ECONNRESET           Transient "conn-reset"
//	syscall.EPIPE                Transient "broken-pipe"
//	syscall.ECONNABORTED         Transient "conn-aborted"
//	syscall.EHOSTUNREACH         Transient "host-unreachable"
//	syscall.ENETUNREACH          Transient "net-unreachable"
//	syscall.ETIMEDOUT            Transient "timeout"
//	*net.OpError dial unix,
//	ENOENT inside                Transient "socket-missing"
//	io.EOF, io.ErrUnexpectedEOF  Transient "eof"
//	pgconn.ErrConnClosed         Transient "conn-closed"
//	context.DeadlineExceeded,
//	os.ErrDeadlineExceeded,
//	*net.OpError with Timeout()  Transient "timeout"
//	*net.DNSError                IsTimeout or IsTemporary: Transient "dns-temporary";
//	                             IsNotFound: Fatal "dns-not-found"; else Transient "dns-error"
//
// The package function knows no vendor's error types; a [Classifier] built
// with [Classifier.WithTypes] adds them (package cloudsql's TypeRules cover
// Google's token and Admin API errors and the Cloud SQL connector's).
//
// Being a [net.Error] is deliberately not a signal: *url.Error and
// context.DeadlineExceeded are net.Errors too.
//
// Classify is safe for concurrent use. It calls the Unwrap, Is and As
// methods of the errors in the tree, as [errors.Is] and [errors.As] do.
func Classify(err error) Verdict {
	if err == nil {
		return Verdict{Fatal, ReasonNoError}
	}
	return builtin(err, nil)
}

// ConnectionLost reports whether err shows that a connection broke, as
// opposed to a server's answer that a new attempt might change: a reset,
// a broken pipe, a refused dial or a missing Unix socket, EOF, a closed
// connection, a timeout, or a server ending the session (SQLSTATE 57P01,
// 57P02, 57P03). A
// transaction whose connection broke before its COMMIT was sent did not
// commit: the server rolled it back.
func ConnectionLost(err error) bool {
	if err == nil {
		return false
	}
	switch builtin(err, nil).Reason {
	case ReasonConnReset, ReasonConnClosed, ReasonEOF, ReasonTimeout, ReasonConnRefused, ReasonSocketMissing, ReasonBrokenPipe,
		ReasonPrefixSQLState + "57P01", ReasonPrefixSQLState + "57P02", ReasonPrefixSQLState + "57P03":
		return true
	}
	return false
}
