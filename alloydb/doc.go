// Package alloydb connects holdfast pools to AlloyDB for PostgreSQL through
// the AlloyDB Go connector (cloud.google.com/go/alloydbconn, the version of
// [ConnectorVersion]). A token endpoint that answers 503 for a moment
// costs one retry instead of a failed request. A real mistake (no
// permission, no such instance, a login the instance refuses, a
// malformed instance URI) fails at once, after one attempt, with a hint
// that names what to check.
//
// # Usage
//
//	d, err := alloydbconn.NewDialer(ctx, alloydbconn.WithIAMAuthN()) // Application Default Credentials
//	// ...
//	defer d.Close() // after the pool
//
//	f, err := holdfast.New(alloydb.With(d, "projects/p/locations/r/clusters/c/instances/i"))
//	// ...
//	pool, err := f.NewPoolFromDSN(ctx, "user=app@p.iam dbname=app") // the IAM user, no password
//
// [With] is one holdfast.Integration, applied whatever the order of the
// options. It dials through the connector (once per connect, each dial
// bounded by [DialTimeout]), turns pgx's own TLS off (the connector
// encrypts with TLS 1.3), classifies Google's and the connector's errors
// ([TypeRules], [Rules]), and sets [RetryPolicy] and [StartupPolicy]
// unless WithRetryPolicy or WithStartupPolicy says otherwise. A malformed
// instance URI is a *ConfigError from holdfast.New. [Integration] returns
// the integration for a caller that wants to change a field first.
//
// # Composition with the connector's own retry
//
// The connector's Admin API client retries a 503 itself, inside one Dial
// (a random wait up to 1s, growing ×1.3, for up to 60s a call); it retries
// nothing else: a token failure, a refused or reset connection, a failed
// handshake or metadata exchange fail the Dial within milliseconds, and
// [RetryPolicy] gives them one more attempt after about 250ms.
// [RetryPolicy]'s doc has each setting, why, and the timings measured with
// the real connector for each failure.
//
// # Classification
//
// Package classify knows no vendor's error types. [TypeRules] teaches a
// classifier Google's and the connector's, with a table. A token or Admin
// API 5xx, 429 or 408 is Transient; a 400, 401, 403 or 404 is Fatal, with
// the reasons "alloydb-permission-denied" and
// "alloydb-instance-not-found" whose hints name the IAM roles and the
// instance URI. The connector reports an instance's refusal of its
// metadata exchange (the check, after the TLS handshake, that the identity
// may connect and, with IAM authentication, log in) as an error of no
// particular type: the dial function of [With] wraps it in a
// [MetadataExchangeError], Fatal "alloydb-metadata-exchange" unless its
// cause is recognised (a token 503 inside it is Transient).
//
// # IAM database authentication and passwords
//
// With alloydbconn.WithIAMAuthN the connector sends an OAuth2 token in the
// metadata exchange and the instance logs the IAM principal in: the
// connection string has no password, and no holdfast.WithPasswordFunc is
// needed. A failing token fetch fails the Dial (Transient for 5xx, 429 and
// 408; Fatal for 400, 401 and 403) and is retried at the dial. For a
// built-in database user, the password comes from the connection string or
// from holdfast.WithPasswordFunc or WithCredentials as for any pool, with
// holdfast's one retry on a fresh password after SQLSTATE 28P01; on a
// dialer built with WithIAMAuthN, turn IAM off for that pool's dials:
//
//	holdfast.New(alloydb.With(d, uri, alloydbconn.WithDialIAMAuthN(false)), holdfast.WithPasswordFunc(secret))
//
// # Read pools
//
// A read pool is an instance of the cluster with its own URI, its nodes
// behind one IP address; it stays up while the primary fails over. Give
// each instance URI a pool of its own. Either build one factory per URI,
// or use one factory for both and name the read pool's URI as the host of
// the reader's connection string: a host that is an instance URI is the
// instance that pool dials (any other host is ignored, and With's URI is
// dialed). holdfast's Factory.NewReadWrite then sends writes to the
// primary and reads to the read pool:
//
//	f, err := holdfast.New(alloydb.With(d, cluster+"/instances/primary"))
//	writer, err := pgxpool.ParseConfig("user=app dbname=app")
//	reader, err := pgxpool.ParseConfig("host=" + cluster + "/instances/read-pool-1 user=app dbname=app")
//	rw, err := f.NewReadWrite(ctx, writer, reader)
//
// The reader pool is not routed by holdfast's failover monitor: AlloyDB's
// load balancer spreads its connections over the read pool's nodes.
//
// # sslmode, host names and connect_timeout
//
// With turns pgx's TLS off, as sslmode=disable does, whatever the
// connection string says (with pgx's default sslmode=prefer, pgx would
// dial twice for every failed connect), and passes the host name to the
// dial function unresolved, so pgx dials once per connect. Leave
// connect_timeout unset, or set it above 42s ([DialTimeout] plus
// RetryPolicy's MaxElapsed): pgx applies it to the whole connect, retries
// included.
//
// # Testing without Google
//
// Package fakes/alloydbtest is a fake AlloyDB cluster on loopback (Admin
// API, token endpoint, and a server-side proxy per instance that does the
// metadata exchange) that the real connector dials, forwarding to a test
// PostgreSQL, with faults to inject. Its steps (TokenFetch503, AdminAPI,
// MetadataExchange, ...) script a fakes.Connector without a server.
//
// # Closing
//
// Close the pools first, then the factory, then the dialer.
package alloydb
