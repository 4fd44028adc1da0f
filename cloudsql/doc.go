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
//	pool, err := f.NewPoolFromDSN(ctx, "user=app@my-project.iam dbname=app") // the IAM user, no password;
//	// the first connection under StartupPolicy
//	if err != nil {
//		// a *holdfast.ConnectError; f.Classify(err) says Transient or Fatal
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
// [RetryPolicy]'s doc has the timings measured with the real connector,
// for each failure, and the connector's own.
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
// classifier Google's and the connector's (its doc has the table of what
// each gives, and the connector's error chains it was checked against),
// and [Rules] the two cases that need the connector's root package. A
// token or Admin API 5xx, 429 or 408 is Transient; a 400, 401, 403 or 404,
// a malformed instance name or a certificate for another instance is
// Fatal. The connector already retries Admin API 5xx answers about five
// times before it returns them, so back off generously after an
// admin-api-5xx verdict.
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
// # HA failover, maintenance and the write endpoint
//
// Through an HA failover or a maintenance, the outage hold (holdfast.WithOutage)
// makes requests wait for the instance. A write endpoint's DNS name goes to [With]
// (dialer built with cloudsqlconn.WithDNSResolver): see [WithWriteEndpoint].
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
