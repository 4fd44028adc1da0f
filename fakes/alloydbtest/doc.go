// Package alloydbtest is a fake AlloyDB cluster for tests: the real AlloyDB
// Go connector (cloud.google.com/go/alloydbconn, tested with v1.19.3) dials
// it as it would dial a real instance, and it forwards the connections to
// a real PostgreSQL server, for example one started by a test. Everything
// listens on 127.0.0.1; nothing reaches Google or any address off the
// machine.
//
// It is named as net/http/httptest is, for what it doubles, so it imports
// next to holdfast's alloydb package without renaming either.
//
// # What it fakes
//
//   - The AlloyDB Admin API, over plain HTTP, in the REST form the
//     connector's client (the v1alpha API) speaks: connectionInfo (an
//     instance's IP address) and generateClientCertificate (signs the
//     connector's client certificate for the RSA key it sends, for at most
//     an hour, and returns the cluster's CA). Calls must carry an access
//     token the fake minted; an unknown cluster or instance answers 404.
//   - An OAuth2 token endpoint (client credentials grant) that mints opaque
//     tokens valid for one hour, for the Admin API and for IAM database
//     login ([Server.TokenSource]).
//   - Each instance of the cluster, the primary and its read pools
//     ([Config].ReadPools), each with its URI and IP address: a server-side
//     proxy on TLS 1.3 whose certificate is for the instance's IP and
//     signed by the cluster's CA, which requires the client certificate,
//     does the connector's metadata exchange (see [Instance]), then pipes
//     the bytes to the instance's PostgreSQL.
//
// The connector dials IP:5433; [Server.Dial], installed by the dialer
// options, redirects that address to the instance's proxy and refuses any
// other.
//
// # Using it
//
//	srv, err := alloydbtest.New(alloydbtest.Config{Backend: pgAddr})
//	// ...
//	defer srv.Close()
//	opts, err := srv.IAMDialerOptions() // or DialerOptions, without IAM authn
//	// ...
//	d, err := alloydbconn.NewDialer(ctx, opts...)
//	// ...
//	defer d.Close()
//	conn, err := d.Dial(ctx, srv.URI())
//
// [Server.DialerOptions] and [Server.IAMDialerOptions] pass explicit
// credentials (the fake's token sources), so the dialer never looks for
// Application Default Credentials or a metadata server; they turn off the
// connector's built-in telemetry and keep it from building its Cloud
// Monitoring client, and share one RSA key between dialers. Every token
// the fake mints has an expiry.
//
// # Injecting faults
//
// Faults apply to the requests and connections that arrive after the call,
// for the next n of them, or for all of them with n < 0, until cleared:
//
//   - [Server.Fail]: an Admin API call or a token fetch answers an HTTP
//     error status: 503 (transient), 403 (permission denied), 404 (no such
//     instance), 400/401 for tokens ("invalid_grant", "invalid_client").
//   - [Server.Slow]: an Admin API call or token fetch answers late.
//   - An [Instance]'s Refuse (ECONNREFUSED, for real: how a primary looks
//     while it fails over), ResetHandshake, ResetAfterHandshake (the reset
//     comes in the metadata exchange), SlowHandshake, and
//     RejectMetadataExchange (the instance answers ERROR with a message, as
//     for a principal that may not connect or log in).
//
// The connector reacts to these faults as it does in production: its Admin
// API client retries a 503 itself, and it retries nothing else. [Stats]
// and [InstanceStats] count what the fake saw, so a test can assert how
// many calls the code under test caused.
//
// # Steps for package fakes
//
// Without a server, [TokenFetch], [TokenFetch503], [LoginTokenFetch],
// [AdminAPI], [Forbidden] and [MetadataExchange] are steps for a
// fakes.Connector or fakes.PasswordSource script: the dial fails at once
// with the errors the connector returns for that failure, built from
// Google's types and wrapped as they arrive in production.
//
// # Concurrency and cleanup
//
// A Server is safe for concurrent use. [Server.Close] closes every
// listener and connection, ends pending delays and waits for all of the
// fake's goroutines. Close the pgx pool and the dialer before the fake.
package alloydbtest
