// Package cloudsqltest is a fake Cloud SQL for tests: the real Cloud SQL Go
// connector (cloud.google.com/go/cloudsqlconn, tested with v1.26.0) dials
// it as it would dial a real instance, and it forwards the connections to a
// real PostgreSQL server, for example one started by a test. Everything
// listens on 127.0.0.1; nothing reaches Google or any address off the
// machine.
//
// It is named as net/http/httptest is, for what it doubles, so it imports
// next to holdfast's cloudsql package without renaming either.
//
// # What it fakes
//
//   - The SQL Admin API, over plain HTTP: the two calls the connector makes,
//     connectSettings (instance metadata: region, database version, the
//     public IP [InstanceIP], the server CA) and generateEphemeralCert (signs
//     the connector's client certificate for one hour). Calls must carry an
//     access token the fake minted; an unknown project or instance answers
//     404 as the real API does.
//   - An OAuth2 token endpoint (client credentials grant) that mints opaque
//     tokens valid for one hour, for the Admin API and for IAM database
//     login ([Server.TokenSource]).
//   - The instance: a TLS 1.3 listener whose certificate has the Subject CN
//     "project:instance" and is signed by the server CA, which requires and
//     verifies the connector's client certificate, then pipes the bytes to
//     [Config].Backend.
//
// The connector dials InstanceIP:3307; [Server.Dial], installed by the
// dialer options, redirects that address to the instance listener and
// refuses any other.
//
// # Using it
//
//	srv, err := cloudsqltest.New(cloudsqltest.Config{Backend: pgAddr})
//	// ...
//	defer srv.Close()
//	opts, err := srv.IAMDialerOptions() // or DialerOptions, without IAM authn
//	// ...
//	d, err := cloudsqlconn.NewDialer(ctx, opts...)
//	// ...
//	defer d.Close()
//	conn, err := d.Dial(ctx, srv.ConnName())
//
// [Server.DialerOptions] and [Server.IAMDialerOptions] pass explicit
// credentials (the fake's token sources), so the dialer never looks for
// Application Default Credentials or a metadata server; they turn off the
// connector's built-in metrics (which otherwise export to Cloud Monitoring
// and probe the metadata server), and share one RSA key between dialers
// ([RSAKey]) instead of generating one per dialer. Every token the fake
// mints has an expiry: the connector clamps its client certificate to the
// IAM login token's expiry, and a token without one makes every dial wait
// for a forced refresh.
//
// # Injecting faults
//
// Faults apply to the requests and connections that arrive after the call,
// for the next n of them, or for all of them with n < 0, until
// [Server.Clear]:
//
//   - [Server.Fail]: an Admin API call or a token fetch answers an HTTP
//     error status: 503 (transient), 403 (permission denied), 404 (no such
//     instance), 429, 400/401 for tokens ("invalid_grant",
//     "invalid_client").
//   - [Server.Slow]: an Admin API call or token fetch answers late.
//   - [Server.Refuse]: the instance refuses the TCP connection
//     (ECONNREFUSED, for real: a bound port that does not listen).
//   - [Server.ResetHandshake]: the instance resets the connection in the
//     middle of the TLS handshake (ECONNRESET in the dialer).
//   - [Server.ResetAfterHandshake]: the handshake completes, then the
//     connection is reset before any PostgreSQL byte.
//   - [Server.SlowHandshake]: the instance waits before the handshake.
//
// [Config].UntrustedServerCert and [Config].ServerCN make the instance
// present a certificate the connector must reject. [Server.Failover],
// [Server.Maintenance] and [Server.Switchover] (with [Config].DRBackend,
// behind [Server.WriteEndpoint]) play Cloud SQL's HA, maintenance and DR.
//
// The connector reacts to these faults as it does in production: it
// retries an Admin API 5xx answer itself (five tries over 5 to 8.5
// seconds) before the Dial fails, and does not retry a token failure, a
// refused or reset connection, or a failed handshake. [Server.Stats]
// counts what the fake saw, so a test can assert how many calls the code
// under test caused.
//
// # Steps for package fakes
//
// Without a server, [TokenFetch], [TokenFetch503], [AdminAPI] and
// [Forbidden] are steps for a fakes.Connector or fakes.PasswordSource
// script: the dial or token fetch fails at once with the errors the
// connector returns for that failure, built from Google's types and
// wrapped as they arrive in production (the connector's own retries of
// Admin API 5xx answers are not played). They carry [ConnName]:
//
//	c := fakes.NewConnector(target, cloudsqltest.TokenFetch503(), fakes.Connect())
//	cfg.ConnConfig.DialFunc = c.Dial
//	// the first dial fails: errors.As finds *errtype.RefreshError, *auth.Error
//
// Package fakes itself knows no vendor's error types; these steps are
// [fakes.Custom] steps.
//
// # Concurrency and cleanup
//
// A Server is safe for concurrent use. It owns a goroutine for its HTTP
// server, one for the instance's accept loop, and one or two per open
// connection and request; [Server.Close] closes every listener and
// connection, ends pending delays and waits for all of them. Close the pgx
// pool and the dialer before the fake.
package cloudsqltest
