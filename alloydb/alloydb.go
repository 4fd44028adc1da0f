package alloydb

import (
	"context"
	"errors"
	"net"
	"regexp"
	"strings"

	"cloud.google.com/go/alloydbconn"
	"cloud.google.com/go/alloydbconn/errtype"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/internal/gcpconn"
	"github.com/holdfast-db/holdfast/retry"
)

// ErrInvalidConfig is [holdfast.ErrInvalidConfig], matched by every
// *ConfigError.
var ErrInvalidConfig = holdfast.ErrInvalidConfig

// ConfigError is [holdfast.ConfigError], the one configuration error of
// every holdfast package, under this package's name: its errors read
// "alloydb: invalid <Field>: <Why>" (Pkg "alloydb"), and one errors.As with
// either name finds them and any other package's. It is not retryable: fix
// the configuration.
type ConfigError = holdfast.ConfigError

// With returns the holdfast option that makes every connection of the
// factory's pools go through the AlloyDB connector d:
//
//	f, err := holdfast.New(alloydb.With(d, "projects/p/locations/r/clusters/c/instances/i"))
//
// It is one holdfast.Integration: the dial function d.Dial(ctx, uri,
// opts...) bounded by [DialTimeout]; Encrypted (the connector encrypts the
// connection itself with TLS 1.3, the cluster's CA and a client certificate
// from the AlloyDB Admin API, so pgx's own TLS is turned off whatever the
// connection string's sslmode says, and pgx dials once per connect without
// resolving the host name); the classification of Google's and the
// connector's errors ([TypeRules], [Rules]), a failed metadata exchange
// included ([MetadataExchangeError]); and [RetryPolicy] and
// [StartupPolicy], unless WithRetryPolicy or WithStartupPolicy is among the
// factory's options. The user, database and password (or none, with
// alloydbconn.WithIAMAuthN) are used as usual.
//
// uri is the instance URI,
// "projects/PROJECT/locations/REGION/clusters/CLUSTER/instances/INSTANCE":
// the primary's, or a read pool's. The host of a pool's connection string
// is ignored unless it is an instance URI too: then that pool dials that
// instance, which is how one factory serves the primary and a read pool
// (holdfast's Factory.NewReadWrite with the read pool's URI as the
// reader's host). The port is always ignored.
//
// A nil dialer, or a uri that is no instance URI, makes holdfast.New return
// a *ConfigError. The dialer stays the caller's: close the pools first,
// then the factory, then the dialer.
func With(d *alloydbconn.Dialer, uri string, opts ...alloydbconn.DialOption) holdfast.Option {
	if err := checkArgs(d, uri); err != nil {
		return holdfast.WithIntegration(holdfast.Integration{Name: "alloydb", Err: err})
	}
	return holdfast.WithIntegration(Integration(d, uri, opts...))
}

// Integration returns what [With] installs, for a caller that wants to
// change a field (a different policy, say) before passing it to
// holdfast.WithIntegration. It returns an Integration with no Dial if d is
// nil or uri is no instance URI.
func Integration(d *alloydbconn.Dialer, uri string, opts ...alloydbconn.DialOption) holdfast.Integration {
	rp, sp := RetryPolicy(), StartupPolicy()
	in := holdfast.Integration{
		Name:          "alloydb",
		Encrypted:     true,
		Rules:         Rules(),
		TypeRules:     TypeRules(),
		RetryPolicy:   &rp,
		StartupPolicy: &sp,
	}
	if checkArgs(d, uri) == nil {
		in.Dial = dialFunc(d, uri, opts)
	}
	return in
}

// instanceURI is the connector's own pattern of an instance URI (the
// connector matches it anywhere in the string it is given); a URI it
// rejects fails the first dial with its *errtype.ConfigError.
var instanceURI = regexp.MustCompile("projects/([^:]+(:[^:]+)?)/locations/([^:]+)/clusters/([^:]+)/instances/([^:]+)")

func checkArgs(d *alloydbconn.Dialer, uri string) error {
	switch {
	case d == nil:
		return &ConfigError{Pkg: "alloydb", Field: "dialer", Why: "nil *alloydbconn.Dialer: build one with alloydbconn.NewDialer"}
	case !instanceURI.MatchString(uri):
		return &ConfigError{Pkg: "alloydb", Field: "uri", Why: "not an instance URI: want projects/PROJECT/locations/REGION/clusters/CLUSTER/instances/INSTANCE, got " + quote(uri)}
	}
	return nil
}

func quote(s string) string {
	if s == "" {
		return `""`
	}
	return `"` + s + `"`
}

// dialFunc is the connector's Dial of the instance, bounded by
// DialTimeout: of uri, or of the host pgx dials when it is an instance
// URI.
func dialFunc(d *alloydbconn.Dialer, uri string, opts []alloydbconn.DialOption) func(ctx context.Context, network, addr string) (net.Conn, error) {
	dialOpts := append([]alloydbconn.DialOption(nil), opts...)
	return func(ctx context.Context, _, addr string) (net.Conn, error) {
		target := uri
		if host := hostOf(addr); host != uri && instanceURI.MatchString(host) {
			target = host
		}
		ctx, cancel := context.WithTimeout(ctx, DialTimeout)
		defer cancel()
		c, err := d.Dial(ctx, target, dialOpts...)
		if err != nil && fromMetadataExchange(err) {
			return nil, &MetadataExchangeError{Instance: target, Err: err}
		}
		return c, err
	}
}

// hostOf is the host of pgx's "host:port" (the host unresolved: an
// instance URI may hold a colon of its own, in a domain-scoped project).
func hostOf(addr string) string {
	if i := strings.LastIndexByte(addr, ':'); i >= 0 {
		return addr[:i]
	}
	return addr
}

// MetadataExchangeError is a connection to an AlloyDB instance that failed
// after its TLS handshake, in the connector's metadata exchange: the
// instance refused it (Err is then an error of no particular type holding
// the instance's message: the connector returns it so), or the exchange's
// own token fetch, write or read failed (Err is then that error). The
// dial function of [With] returns it in place of the connector's error;
// [TypeRules] classify it by what is inside: a token 503 or a reset
// connection is Transient, anything not recognised is Fatal
// "alloydb-metadata-exchange", whose hint says what to check.
//
// The connector (v1.19.3, [ConnectorVersion]) returns errors of its errtype
// package from every earlier step of Dial, so an error of Dial with none
// of them, that is neither alloydbconn.ErrDialerClosed nor the end of the
// context, is taken to come from the exchange.
type MetadataExchangeError struct {
	// Instance is the URI of the instance dialed.
	Instance string
	// Err is the connector's error.
	Err error
}

// Error says that the metadata exchange with the instance failed, and why.
func (e *MetadataExchangeError) Error() string {
	return "alloydb: the metadata exchange with " + e.Instance + " failed: " + e.Err.Error()
}

// Unwrap returns the connector's error.
func (e *MetadataExchangeError) Unwrap() error { return e.Err }

// fromMetadataExchange reports whether a Dial error comes from the
// metadata exchange: none of the connector's error types, not the closed
// dialer, not the context's end.
func fromMetadataExchange(err error) bool {
	if errors.Is(err, alloydbconn.ErrDialerClosed) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if _, ok := gcpconn.FindNode[*errtype.ConfigError](err); ok {
		return false
	}
	if _, ok := gcpconn.FindNode[*errtype.RefreshError](err); ok {
		return false
	}
	_, ok := gcpconn.FindNode[*errtype.DialError](err)
	return !ok
}

// ConnectorVersion is the version of cloud.google.com/go/alloydbconn that
// this package was measured against ([RetryPolicy]'s table, the error
// chains of [TypeRules], the metadata exchange errors of
// [MetadataExchangeError]). A test fails when go.mod requires another, so
// that an upgrade re-measures them.
const ConnectorVersion = "v1.19.3"

// DialTimeout bounds each Dial of the dial function that [With] installs
// (an earlier deadline of the caller's context still wins). pgxpool builds
// connections with a context that has none of the Acquire caller's
// deadline, and nothing else bounds a Dial whose Admin API call keeps
// answering 503: the connector's Admin API client retries a 503 for up to
// 60s a call. 12s lets about five of those retries through (each waits a
// random time up to 1s, ×1.3 each time). It equals [RetryPolicy]'s
// AttemptTimeout.
const DialTimeout = gcpconn.DialTimeout

// RetryPolicy returns the holdfast retry policy sized for the AlloyDB
// connector, for holdfast.WithRetryPolicy (the same as package cloudsql's):
//
//	MaxAttempts      2      one holdfast retry per connection
//	InitialInterval  250ms  ±20% jitter (MaxInterval 1s)
//	AttemptTimeout   12s    = DialTimeout
//	MaxElapsed       30s    the loop ends by attempts
//
// Why these numbers:
//
//   - The connector does not retry a token failure (of the Admin API's
//     token, or of the IAM login token its metadata exchange sends), a
//     refused or reset connection, a failed TLS handshake or a failed
//     metadata exchange: the Dial fails within milliseconds. One holdfast
//     retry after about 250ms absorbs such a blip, as in the incident this
//     library was built for (a token endpoint answering 503 once).
//   - The connector's Admin API client retries a 503 itself, and nothing
//     else: a 503 that ends within a few seconds never reaches holdfast. A
//     403 or 404 fails the Dial at once, and holdfast does not retry it.
//   - An Admin API that keeps answering 503 holds the Dial until
//     DialTimeout cuts it; the cut Dial returns the context's error
//     (Transient "timeout"), the connector drops its cache, and holdfast's
//     one retry starts a fresh refresh. Such an outage fails a connection
//     after about 2×12s.
//
// A request context with a shorter deadline still wins. Factory.Acquire
// does not retry again a failure that this policy already retried at the
// dial, so retries do not multiply across layers.
//
// Measured with the real connector against the fake AlloyDB of
// fakes/alloydbtest on loopback, with a real PostgreSQL behind it (three
// runs each, go test -race, a 2-core machine):
//
//	| Failure                                          | Dials | Outcome                                     | Time          |
//	|--------------------------------------------------|-------|---------------------------------------------|---------------|
//	| IAM login token fetch 503, once                  | 2     | connected, 1 connection                     | 0.32s – 0.53s |
//	| Admin API token fetch 503, once                  | 2     | connected, 1 connection                     | 0.36s – 0.40s |
//	| Admin API 503, once (the connector retries it)   | 1     | connected; holdfast adds nothing            | 0.11s – 0.72s |
//	| Admin API 503 without end                        | 2     | Transient timeout, attempts exhausted       | 24.3s         |
//	| refused; reset in the handshake or the exchange  | 2     | connected                                   | 0.28s – 0.46s |
//	| Admin API 403, 404; unknown instance             | 1     | Fatal alloydb-permission-denied, -not-found | < 15ms        |
//	| login or API token 401, 403, invalid_grant       | 1     | Fatal token-denied, token-invalid-grant     | < 45ms        |
//	| metadata exchange refused                        | 1     | Fatal alloydb-metadata-exchange             | < 25ms        |
//	| server certificate of another CA                 | 1     | Fatal tls-verification                      | < 20ms        |
//	| dialer closed                                    | 1     | Fatal dialer-closed                         | ≤ 1ms         |
//	| primary refusing; a read on the read pool's pool | 1     | connected to the read pool                  | 0.06s – 0.13s |
func RetryPolicy() retry.Policy { return gcpconn.RetryPolicy() }

// StartupPolicy returns the policy for a pool's first connection
// (holdfast.WithStartupPolicy): 3 attempts, 1s doubling to at most 5s with
// 20% jitter, 90s overall, no per-attempt timeout. Each startup attempt is
// a whole connection attempt, itself bounded by [RetryPolicy]; a Fatal
// cause (permission denied, no such instance, a refused metadata
// exchange) fails it after one dial.
func StartupPolicy() retry.Policy { return gcpconn.StartupPolicy() }

// Rules returns the classification rules for errors that only the
// connector's root package defines, for holdfast.WithClassifier or
// classify.New: alloydbconn.ErrDialerClosed anywhere in the error → Fatal
// "dialer-closed" (classify.ReasonDialerClosed): the application closed
// the dialer; retrying cannot help. The connector verifies the server's
// certificate with crypto/tls, so a certificate for another instance is
// already Fatal "tls-verification" in classify's built-in rules.
func Rules() []classify.Rule {
	return []classify.Rule{
		classify.Sentinel(alloydbconn.ErrDialerClosed,
			classify.Verdict{Class: classify.Fatal, Reason: classify.ReasonDialerClosed}),
	}
}
