package classify

import (
	"reflect"
	"strconv"
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

// String returns "fatal" or "transient", or "Class(N)" for any other value.
func (c Class) String() string {
	switch c {
	case Fatal:
		return "fatal"
	case Transient:
		return "transient"
	default:
		return "Class(" + strconv.Itoa(int(c)) + ")"
	}
}

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
	if c != nil {
		for _, r := range c.rules {
			if v, ok := r(err); ok {
				if v.Reason == "" {
					v.Reason = ReasonRule
				}
				return v
			}
		}
	}
	return builtin(err)
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
//  4. *errtype.ConfigError anywhere → {Fatal, "cloudsql-config"}.
//  5. Every other recognised cause is collected; the innermost recognised
//     cause decides for its wrapper (a token error inside an
//     auth.Error or googleapi.Error, a network error inside a cloudsqlconn
//     DialError). If any collected cause is Fatal, the first Fatal one is
//     the verdict (fail safe: a pgx multi-host ConnectError with one host
//     refusing and another answering 28P01 is Fatal); otherwise the first
//     Transient one.
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
//	io.EOF, io.ErrUnexpectedEOF  Transient "eof"
//	context.DeadlineExceeded,
//	os.ErrDeadlineExceeded,
//	*net.OpError with Timeout()  Transient "timeout"
//	*net.DNSError                IsTimeout or IsTemporary: Transient "dns-temporary";
//	                             IsNotFound: Fatal "dns-not-found"; else Transient "dns-error"
//	*googleapi.Error             408, 429, 5xx: Transient "admin-api-<code>"; 400 Fatal "bad-request";
//	                             401, 403 Fatal "permission-denied"; 404 Fatal "instance-not-found";
//	                             other codes Fatal "admin-api-<code>"
//	*oauth2.RetrieveError        ErrorCode "invalid_grant": Fatal "token-invalid-grant";
//	*auth.Error                  408, 429, 5xx: Transient "token-fetch-<code>";
//	*metadata.Error              400, 401, 403: Fatal "token-denied";
//	                             other codes Fatal "token-fetch-<code>"; no Response: Fatal "token-error"
//	*errtype.RefreshError        its cause; nil cause: Transient "cloudsql-refresh"
//	*errtype.DialError           its cause; nil cause: Transient "cloudsql-dial"
//	*errtype.ResourceExhaustedError  its cause, else Transient "cloudsql-resource-exhausted"
//
// cloudsqlconn.ErrDialerClosed is not built in (see the package
// documentation); it is Fatal "unknown" unless a [Sentinel] rule names it.
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
	return builtin(err)
}
