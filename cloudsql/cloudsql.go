package cloudsql

import (
	"context"
	"net"
	"time"

	"cloud.google.com/go/cloudsqlconn"
	"cloud.google.com/go/cloudsqlconn/errtype"
	"github.com/jackc/pgx/v5/pgxpool"

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
// "cloudsql: invalid <Field>: <Why>" (Pkg "cloudsql"), and one
// errors.As with either name finds them and any other package's. It is
// not retryable: fix the configuration.
type ConfigError = holdfast.ConfigError

// With returns the holdfast option that makes every connection of the
// factory's pools go through the Cloud SQL connector d:
//
//	f, err := holdfast.New(cloudsql.With(d, "project:region:instance"))
//
// It is one holdfast.Integration: the dial function d.Dial(ctx, instance,
// opts...) bounded by [DialTimeout]; Encrypted (the connector encrypts the
// connection itself with TLS 1.3, the instance's server CA and an ephemeral
// client certificate, so pgx's own TLS is turned off whatever the
// connection string's sslmode says, and pgx dials once per connect without
// resolving the host name); the classification of Google's and the
// connector's errors ([TypeRules], [Rules]); and [RetryPolicy] and
// [StartupPolicy], unless WithRetryPolicy or WithStartupPolicy is among the
// factory's options; and one more attempt on a fresh dial for a connection
// refused with SQLSTATE 28000 (automatic IAM authentication sometimes fails
// once and works on a new dial), on every path of the pool. The host name and port of the connection string are
// ignored; the user, database and password (or IAM authentication, with
// cloudsqlconn.WithIAMAuthN) are used as usual.
//
// instance is the instance connection name, "project:region:instance", or
// a DNS name (a write endpoint) when d was built with
// cloudsqlconn.WithDNSResolver: With is then [WithWriteEndpoint] with the
// default EndpointConfig, which reports a switchover when the name moves
// to another instance. It is not validated here: a malformed name fails
// the first dial with the connector's *errtype.ConfigError, which is Fatal
// and not retried.
//
// A nil dialer or an empty instance makes holdfast.New return a
// *ConfigError. The dialer stays the caller's: close the pools first, then
// the factory, then the dialer.
func With(d *cloudsqlconn.Dialer, instance string, opts ...cloudsqlconn.DialOption) holdfast.Option {
	if err := checkArgs(d, instance); err != nil {
		return holdfast.WithIntegration(holdfast.Integration{Name: "cloudsql", Err: err})
	}
	if !isConnName(instance) {
		return WithWriteEndpoint(d, instance, EndpointConfig{}, opts...)
	}
	return holdfast.WithIntegration(Integration(d, instance, opts...))
}

// Integration returns what [With] installs, for a caller that wants to
// change a field (a different policy, say) before passing it to
// holdfast.WithIntegration. It returns an Integration with no Dial if d is
// nil or instance is empty.
func Integration(d *cloudsqlconn.Dialer, instance string, opts ...cloudsqlconn.DialOption) holdfast.Integration {
	rp, sp := RetryPolicy(), StartupPolicy()
	in := holdfast.Integration{
		Name:      "cloudsql",
		Encrypted: true,
		// With automatic IAM authentication a login sometimes fails once
		// with 28000 and works on a new dial (cloud-sql-go-connector #800).
		RetryAuthFailure: true,
		Rules:            Rules(),
		TypeRules:        TypeRules(),
		RetryPolicy:      &rp,
		StartupPolicy:    &sp,
	}
	if checkArgs(d, instance) == nil {
		in.Dial = dialFunc(d, instance, opts)
	}
	return in
}

func checkArgs(d *cloudsqlconn.Dialer, instance string) error {
	switch {
	case d == nil:
		return &ConfigError{Pkg: "cloudsql", Field: "dialer", Why: "nil *cloudsqlconn.Dialer: build one with cloudsqlconn.NewDialer"}
	case instance == "":
		return &ConfigError{Pkg: "cloudsql", Field: "instance", Why: `empty instance connection name: want "project:region:instance"`}
	}
	return nil
}

// dialFunc is the connector's Dial for one instance, bounded by DialTimeout.
func dialFunc(d *cloudsqlconn.Dialer, instance string, opts []cloudsqlconn.DialOption) func(ctx context.Context, _, _ string) (net.Conn, error) {
	dialOpts := append([]cloudsqlconn.DialOption(nil), opts...)
	return func(ctx context.Context, _, _ string) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, DialTimeout)
		defer cancel()
		return d.Dial(ctx, instance, dialOpts...)
	}
}

// Configure makes every connection of a pool built from cfg go through the
// Cloud SQL connector: pgx's dial function becomes d.Dial(ctx, instance,
// opts...). It is for pools that do not use holdfast; with holdfast, use
// [With], which does not depend on the order of calls. (Configure before
// holdfast's Factory.Configure works too; after it, it would remove
// holdfast's wrapper.)
//
// instance is the instance connection name, "project:region:instance", or a
// domain name when d was built with cloudsqlconn.WithDNSResolver. It is not
// validated here: a malformed name fails the first dial with the
// connector's *errtype.ConfigError, which holdfast classifies as Fatal and
// does not retry.
//
// The connector encrypts the connection itself (TLS 1.3 with the
// instance's server CA and an ephemeral client certificate), so Configure
// turns pgx's own TLS off whatever the connection string's sslmode says:
// it clears cfg.ConnConfig.TLSConfig and cfg.ConnConfig.Fallbacks, exactly
// what sslmode=disable does. With pgx's default sslmode=prefer, pgx would
// otherwise dial twice for every failed connect (TLS first, then plain),
// doubling every retry count. Configure also installs a LookupFunc that
// returns the host name unresolved, so that pgx dials once per connect
// whatever the host name ("localhost" often resolves to two addresses) and
// never queries DNS for it; the host name and port of the connection string
// are otherwise ignored.
//
// Every Dial is bounded by [DialTimeout] (an earlier deadline of the
// caller's context still wins). pgxpool builds connections with a context
// that has none of the Acquire caller's deadline, and holdfast bounds a
// dial only when its retry policy has an AttemptTimeout ([RetryPolicy]
// does), so without this bound a Dial stuck on an Admin API call that
// never answers (with cloudsqlconn.WithLazyRefresh nothing else bounds it)
// or on a TLS handshake that never completes could hold a pool slot
// indefinitely, under a policy of your own or without holdfast.
//
// Configure keeps cfg.ConnConfig.ConnectTimeout as it is. pgx applies it to
// the whole connect, retries included, so leave connect_timeout unset, or
// set it above [RetryPolicy]'s MaxElapsed (30s, which bounds a connection's
// attempts from its first dial): a shorter one cuts holdfast's retry, or
// the connector's own Admin API retry, short.
//
// Configure returns a *ConfigError if cfg, cfg.ConnConfig or d is nil or
// instance is empty. The dialer stays the caller's: close the pool first,
// then the dialer.
func Configure(cfg *pgxpool.Config, d *cloudsqlconn.Dialer, instance string, opts ...cloudsqlconn.DialOption) error {
	switch {
	case cfg == nil:
		return &ConfigError{Pkg: "cloudsql", Field: "cfg", Why: "nil *pgxpool.Config"}
	case cfg.ConnConfig == nil:
		return &ConfigError{Pkg: "cloudsql", Field: "cfg.ConnConfig", Why: "nil: build the config with pgxpool.ParseConfig"}
	}
	if err := checkArgs(d, instance); err != nil {
		return err
	}
	cc := cfg.ConnConfig
	cc.DialFunc = dialFunc(d, instance, opts)
	cc.LookupFunc = func(_ context.Context, host string) ([]string, error) {
		return []string{host}, nil
	}
	cc.TLSConfig = nil
	cc.Fallbacks = nil
	return nil
}

// ConnectorVersion is the version of cloud.google.com/go/cloudsqlconn that
// this package was measured against ([ConnectorRetryMax], [RetryPolicy],
// the error chains of [TypeRules]). A test fails when go.mod requires
// another, so that an upgrade re-measures them.
const ConnectorVersion = "v1.26.0"

// ConnectorRetryMax is the longest the connector ([ConnectorVersion]) can
// spend inside one Dial retrying Admin API 5xx answers before it returns
// the error: five tries with a backoff of 200ms×1.618^(i+1+rand) after
// each, the fifth included, 5.3s to 8.5s in all, plus the round trips.
// Measured against the fake Cloud SQL on loopback: 5.8s to 7.5s.
const ConnectorRetryMax = 8500 * time.Millisecond

// DialTimeout bounds each Dial of the dial function that [Configure]
// installs: above [ConnectorRetryMax], so that it never cuts the
// connector's own Admin API retry short, with room for ten Admin API round
// trips and the TLS handshake. It equals [RetryPolicy]'s AttemptTimeout.
const DialTimeout = gcpconn.DialTimeout

// RetryPolicy returns the holdfast retry policy sized for the Cloud SQL
// connector, for holdfast.WithRetryPolicy:
//
//	MaxAttempts      2      one holdfast retry per connection
//	InitialInterval  250ms  ±20% jitter (MaxInterval 1s)
//	AttemptTimeout   12s    = DialTimeout, above ConnectorRetryMax
//	MaxElapsed       30s    above AttemptTimeout + the interval: the loop ends by attempts
//
// Why these numbers:
//
//   - The connector does not retry an IAM or API token failure, a refused
//     or reset connection or a failed TLS handshake: the Dial fails within
//     milliseconds. One holdfast retry after about 250ms absorbs such a
//     blip, as in the incident this library was built for (a token
//     endpoint answering 503 once): measured 0.25s to 0.3s to a working
//     connection.
//   - The connector does retry Admin API 5xx answers itself, five times
//     over 5.3s to 8.5s, before the Dial fails. A holdfast retry then runs
//     one more connector cycle (five more Admin API calls): holdfast adds
//     one cycle instead of multiplying the connector's five tries by its
//     own attempts. An outage that outlasts both cycles fails after about
//     2×(5.3s to 8.5s) + 0.25s (measured 12.3s to 14.9s) with the
//     classified cause: admin-api-503, Transient, attempts exhausted.
//   - No per-attempt bound may cut the connector's cycle short: a Dial cut
//     by its context returns context.DeadlineExceeded, the connector
//     cancels its refresh and evicts its cache, and the next attempt starts
//     the Admin API retry from zero. Hence AttemptTimeout and
//     [DialTimeout] of 12s; DialTimeout also bounds dials made under a
//     policy without AttemptTimeout.
//   - MaxElapsed bounds the retries of a connection attempt, which nothing
//     else bounds: pgxpool connects detached from the Acquire caller's
//     context.
//
// A request context with a shorter deadline still wins: the retry loop
// never sleeps past it, and the connector returns the context's error.
// Factory.Acquire does not retry again a failure that this policy already
// retried at the dial, so retries do not multiply across layers.
//
// Measured with the real connector against the fake Cloud SQL of
// fakes/cloudsqltest on loopback, with a real PostgreSQL behind it (three
// runs each, go test -race, a 2-core machine):
//
//	| Failure                                         | Dials | Outcome                                     | Time          |
//	|-------------------------------------------------|-------|---------------------------------------------|---------------|
//	| IAM login token fetch 503, once                 | 2     | connected, 1 connection                     | 0.25s – 0.30s |
//	| Admin API token fetch 503, once                 | 2     | connected                                   | 0.23s – 0.30s |
//	| instance refuses TCP, once                      | 2     | connected                                   | 0.22s – 0.31s |
//	| instance resets the TLS handshake, once         | 2     | connected                                   | 0.23s – 0.27s |
//	| reset after the handshake                       | 2     | connected                                   | 0.24s – 0.36s |
//	| Admin API 503 ×3 (inside the connector's retry) | 1     | connected; holdfast adds nothing            | 1.9s – 2.4s   |
//	| Admin API 503 ×5 (outlasts the connector once)  | 2     | connected on holdfast's retry               | 6.7s – 7.6s   |
//	| Admin API 503 without end                       | 2     | Transient admin-api-503, exhausted          | 12.3s – 14.9s |
//	| Admin API call that never answers               | 2     | cut by DialTimeout, connected on retry      | 12.2s – 12.3s |
//	| Admin API 403, 404; unknown instance            | 1     | Fatal permission-denied, instance-not-found | < 10ms        |
//	| malformed name, region mismatch                 | 1     | Fatal cloudsql-config                       | < 10ms        |
//	| IAM login token 401, invalid_grant              | 1     | Fatal token-denied, token-invalid-grant     | < 10ms        |
//	| untrusted server certificate, wrong CN          | 1     | Fatal tls-verification                      | < 15ms        |
//	| dialer closed                                   | 1     | Fatal dialer-closed                         | < 1ms         |
//
// The connector alone, one Dial against an Admin API answering 503: 5.8s to
// 7.5s. Against a metadata server whose token endpoint answers 503
// (Application Default Credentials on Google runtimes), the metadata
// client's own retries make one Dial fail after 0.6s to 1.5s.
func RetryPolicy() retry.Policy { return gcpconn.RetryPolicy() }

// StartupPolicy returns the policy for a pool's first connection
// (holdfast.WithStartupPolicy): 3 attempts, 1s doubling to at most 5s with
// 20% jitter, 90s overall, no per-attempt timeout. Each startup attempt is
// a whole connection attempt, itself bounded by [RetryPolicy] (two dials of
// at most [DialTimeout] each), so the worst case, an Admin API outage that
// outlasts everything, is about 3×17s + 3s ≈ 55s (six connector cycles)
// before startup fails with a *holdfast.ConnectError of Layer "startup"
// whose cause Factory.Classify says is Transient; a Fatal cause (permission
// denied, no such instance) fails it after one dial.
func StartupPolicy() retry.Policy { return gcpconn.StartupPolicy() }

// Rules returns the classification rules for errors that only the
// connector's root package defines, for holdfast.WithClassifier or
// classify.New:
//
//   - cloudsqlconn.ErrDialerClosed anywhere in the error → Fatal
//     "dialer-closed" (classify.ReasonDialerClosed): the application closed
//     the dialer; retrying cannot help.
//   - a TLS handshake that failed because the server's identity did not
//     match (the certificate's CN is not "project:instance", is empty, or
//     there is no certificate; the connector reports these as an
//     *errtype.DialError with no cause inside the handshake's DialError) →
//     Fatal "tls-verification" (classify.ReasonTLS). [TypeRules] alone
//     would see only a DialError without a cause, which they treat as
//     Transient. A certificate chain that does not verify is already Fatal
//     "tls-verification" in classify's built-in rules.
//
// The rules never call Error on the errors they examine. They are safe for
// concurrent use.
func Rules() []classify.Rule {
	return []classify.Rule{
		classify.Sentinel(cloudsqlconn.ErrDialerClosed,
			classify.Verdict{Class: classify.Fatal, Reason: classify.ReasonDialerClosed}),
		serverIdentity,
	}
}

// serverIdentity recognises the connector's server identity failures: the
// handshake's *errtype.DialError wrapping an *errtype.DialError with no
// cause, which only the connector's certificate verification returns.
func serverIdentity(err error) (classify.Verdict, bool) {
	outer, ok := gcpconn.FindNode[*errtype.DialError](err)
	if !ok || outer.Err == nil {
		return classify.Verdict{}, false
	}
	if inner, ok := gcpconn.FindNode[*errtype.DialError](outer.Err); ok && inner.Err == nil {
		return classify.Verdict{Class: classify.Fatal, Reason: classify.ReasonTLS}, true
	}
	return classify.Verdict{}, false
}
