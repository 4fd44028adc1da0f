// Package cloudsql connects holdfast pools to Cloud SQL for PostgreSQL
// through the Cloud SQL Go connector (cloud.google.com/go/cloudsqlconn, the
// version of [ConnectorVersion]). A token endpoint or Admin API that
// answers 503 for a moment costs one retry instead of a failed request. A
// real mistake (no permission, no such instance, a malformed instance name,
// a server certificate for another instance) fails at once, after one
// attempt.
//
// # Usage
//
//	d, err := cloudsqlconn.NewDialer(ctx, cloudsqlconn.WithIAMAuthN()) // Application Default Credentials
//	// ...
//	defer d.Close() // after the pool
//
//	f, err := holdfast.New(cloudsql.With(d, "my-project:europe-west1:my-instance"))
//	// ...
//	cfg, err := pgxpool.ParseConfig("user=app@my-project.iam dbname=app") // the IAM user, no password
//	// ...
//	pool, err := f.NewPool(ctx, cfg) // the first connection under StartupPolicy
//	if err != nil {
//		// a *holdfast.StartupError: its Verdict says Transient or Fatal
//	}
//	defer pool.Close()
//
// [With] is one holdfast.Integration, applied whatever the order of the
// options. It dials through the connector (once per connect, each dial
// bounded by [DialTimeout]), turns pgx's own TLS off, classifies Google's
// and the connector's errors ([TypeRules], [Rules]), and sets
// [RetryPolicy] and [StartupPolicy] unless WithRetryPolicy or
// WithStartupPolicy says otherwise. [Integration] returns it for a caller
// that wants to change a field first. [Configure] does the dialing part
// for a pool that does not use holdfast. examples/cloudsql is a whole
// program.
//
// # Composition with the connector's own retry
//
// The connector retries Admin API 5xx answers itself: five tries, 5.3s to
// 8.5s, inside one Dial ([ConnectorRetryMax]). It does not retry token
// failures, refused or reset connections or failed handshakes; those fail
// the Dial within milliseconds. [RetryPolicy] adds one holdfast retry,
// after about 250ms, and never cuts a connector cycle short: its
// documentation gives each setting and why. Failures of the startup
// handshake after the dial (53300, 57P03) are retried on a fresh dial on
// every pool path, as for any holdfast pool. [StartupPolicy] is for the
// pool's first connection.
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
//
// # sslmode, host names and connect_timeout
//
// The connector encrypts the connection itself (TLS 1.3, the instance's
// server CA, an ephemeral client certificate). So With and Configure turn
// pgx's TLS off, as sslmode=disable does, whatever the connection string
// says. With pgx's default sslmode=prefer, pgx would otherwise dial twice
// for every failed connect (TLS first, then plain), and every retry count
// would double. They also pass the host name to the connector unresolved,
// so pgx dials once per connect; the host and port of the connection
// string are ignored. The user, database and password (or IAM
// authentication) are used as usual.
//
// Leave connect_timeout unset, or set it above 42s ([DialTimeout] plus
// RetryPolicy's MaxElapsed): pgx applies it to the whole connect, retries
// included, and a shorter one cuts holdfast's retry or the connector's own
// retry short.
//
// # Classification
//
// Package classify knows no vendor's error types. [TypeRules] teaches a
// classifier Google's and the connector's, and they take part in
// classify's walk of the error tree, so the innermost recognised cause
// still decides for its wrapper (a refused connection inside a DialError
// is "conn-refused"):
//
//	| Error                                         | Class     | Reason                      |
//	|-----------------------------------------------|-----------|-----------------------------|
//	| *errtype.ConfigError                          | Fatal     | cloudsql-config             |
//	| *errtype.RefreshError                         | its cause | its cause's Reason          |
//	| *errtype.RefreshError, nil Err                | Transient | cloudsql-refresh            |
//	| *errtype.DialError                            | its cause | its cause's Reason          |
//	| *errtype.DialError, nil Err                   | Transient | cloudsql-dial               |
//	| *errtype.ResourceExhaustedError               | Transient | cloudsql-resource-exhausted |
//	| *googleapi.Error 408, 429, 500–599            | Transient | admin-api-<code>            |
//	| *googleapi.Error 400                          | Fatal     | bad-request                 |
//	| *googleapi.Error 401, 403                     | Fatal     | permission-denied           |
//	| *googleapi.Error 404                          | Fatal     | instance-not-found          |
//	| *googleapi.Error, other codes                 | Fatal     | admin-api-<code>            |
//	| *oauth2.RetrieveError, invalid_grant          | Fatal     | token-invalid-grant         |
//	| token error 408, 429, 500–599                 | Transient | token-fetch-<code>          |
//	| token error 400, 401, 403                     | Fatal     | token-denied                |
//	| token error, other codes                      | Fatal     | token-fetch-<code>          |
//	| token error without a Response                | Fatal     | token-error                 |
//
// A "token error" is an *oauth2.RetrieveError or *auth.Error (their
// Response.StatusCode) or a *metadata.Error (its Code). *errtype.ConfigError
// outranks every other cause but cancellation and TLS verification. A
// RefreshError or DialError whose cause is not recognised is Fatal
// "unknown". The rules never call Error on the errors they examine
// (auth.Error's Error dereferences its Response).
//
// The connector's own chains (of [ConnectorVersion]: a test fails when
// go.mod requires another version, so that an upgrade re-checks them) are
// handled, for example:
//
//	fmt "failed to get instance" → *errtype.RefreshError → *googleapi.Error{503}   → Transient admin-api-503
//	fmt → *errtype.RefreshError → *auth.Error → *oauth2.RetrieveError{503}           → Transient token-fetch-503
//	fmt → *errtype.RefreshError → *url.Error → fmt → *metadata.Error{503}            → Transient token-fetch-503
//	*errtype.DialError → Join[*net.OpError → *os.SyscallError → ECONNREFUSED]        → Transient conn-refused
//	*errtype.DialError → *errtype.DialError → *tls.CertificateVerificationError      → Fatal tls-verification
//
// [Rules] adds the two cases that need the connector's root package or the
// structure of its errors: cloudsqlconn.ErrDialerClosed (Fatal
// "dialer-closed") and a server certificate for another instance (Fatal
// "tls-verification", which TypeRules alone would see as a transient
// DialError without a cause).
//
// The connector already retries Admin API 5xx answers about five times
// before it returns them, so back off generously after an admin-api-5xx
// verdict.
//
// # IAM database authentication
//
// With cloudsqlconn.WithIAMAuthN the login token travels in the ephemeral
// client certificate, not as the PostgreSQL password, so no
// holdfast.WithPasswordFunc is needed. A failing login token fetch fails
// the Dial (Transient for 5xx, 429 and 408; Fatal for 400, 401 and 403)
// and is retried at the dial. A login that the server refuses with
// SQLSTATE 28000 gets one more attempt on a fresh dial, on every pool
// path: automatic IAM authentication sometimes fails once and works on a
// new dial
// (https://github.com/GoogleCloudPlatform/cloud-sql-go-connector/issues/800).
//
// # Testing without Google
//
// Package fakes/cloudsqltest is a fake SQL Admin API, token endpoint and
// instance on loopback that the real connector dials, forwarding to a test
// PostgreSQL, with faults to inject. Its TokenFetch503, TokenFetch,
// AdminAPI and Forbidden are also steps for a fakes.Connector, for tests
// without a server.
//
// # Closing
//
// Close the pools first, then the factory, then the dialer: Dialer.Close
// does not close connections it has handed out.
package cloudsql
