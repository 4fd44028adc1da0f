// Package cloudsql connects holdfast pools to Cloud SQL for PostgreSQL
// through the Cloud SQL Go connector (cloud.google.com/go/cloudsqlconn, the
// version in go.mod; see [ConnectorVersion]), so that a new connection survives a token endpoint or Admin API
// that answers 503 for a moment, and a real mistake (no permission, no such
// instance, a malformed instance name) fails at once.
//
// # Usage
//
//	d, err := cloudsqlconn.NewDialer(ctx, cloudsqlconn.WithIAMAuthN())
//	// ...
//	defer d.Close() // after the pool
//
//	cfg, err := pgxpool.ParseConfig("user=app@my-project.iam dbname=app")
//	// ...
//	if err := cloudsql.Configure(cfg, d, "my-project:europe-west1:my-instance"); err != nil {
//		// ...
//	}
//	f, err := holdfast.New(cloudsql.Options()...)
//	// ...
//	pool, err := f.NewPool(ctx, cfg)
//
// [Configure] makes pgx dial through the connector (once per connect, no
// pgx-side TLS, no DNS lookup of the host name) and bounds each dial by
// [DialTimeout]. [Options] gives the Factory [RetryPolicy], [StartupPolicy]
// and [Rules]. Call Configure before the Factory configures the pool.
//
// # Composition with the connector's own retry
//
// The connector retries Admin API 5xx answers itself: five tries, 5.3s to
// 8.5s, inside one Dial. It does not retry token failures, refused or reset
// connections or failed handshakes. [RetryPolicy] adds one holdfast retry,
// after about 250ms, and never cuts a connector cycle short. Measured with
// the real connector against the fake Cloud SQL of fakes/cloudsqltest on
// loopback (three runs each, go test -race):
//
//	| Failure                                         | Dials | Outcome                                     | Time          |
//	|-------------------------------------------------|-------|---------------------------------------------|---------------|
//	| IAM login token fetch 503, once                 | 2     | connected, 1 connection                     | 0.25s – 0.30s |
//	| Admin API token fetch 503, once                 | 2     | connected                                   | 0.23s – 0.30s |
//	| instance refuses TCP, once                      | 2     | connected                                   | 0.22s – 0.31s |
//	| instance resets the TLS handshake, once         | 2     | connected                                   | 0.23s – 0.27s |
//	| reset after the handshake (Factory.Acquire)     | 2     | connected                                   | 0.24s – 0.36s |
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
// 7.5s ([ConnectorRetryMax] is the 8.5s upper bound of its backoff).
// Against a metadata server whose token endpoint answers 503 (Application
// Default Credentials on Google runtimes), the metadata client's own
// retries make one Dial fail after 0.6s to 1.5s.
//
// # sslmode and host names
//
// With pgx's default sslmode=prefer, pgx dials twice for every failed
// connect (TLS first, then plain) and once per address the host name
// resolves to, so every retry count would double. The connector encrypts
// the connection itself (TLS 1.3, the instance's server CA, an ephemeral
// client certificate), so Configure turns pgx's TLS off (sslmode=disable
// semantics) and skips the host lookup, whatever the connection string
// says.
//
// # Classification
//
// The built-in rules of package classify recognise the connector's error
// types (errtype.ConfigError, RefreshError, DialError), the Admin API's
// googleapi.Error and the token errors (auth.Error, oauth2.RetrieveError,
// metadata.Error). [Rules] adds the two cases that need the connector's
// root package or its structure: cloudsqlconn.ErrDialerClosed (Fatal
// "dialer-closed") and a server certificate for another instance (Fatal
// "tls-verification", which the built-in rules see as a transient
// DialError without a cause).
//
// # IAM database authentication
//
// With cloudsqlconn.WithIAMAuthN the login token travels in the ephemeral
// client certificate, not as the PostgreSQL password: no
// holdfast.WithPasswordFunc is needed. A failing login token fetch fails
// the Dial (Transient for 5xx, 429 and 408; Fatal for 400, 401 and 403) and
// is retried at the dial.
//
// # Closing
//
// Close the pool first, then the dialer: Dialer.Close does not close
// connections it has handed out.
package cloudsql
