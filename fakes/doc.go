// Package fakes provides scripted stand-ins for the things a PostgreSQL
// connection depends on, for holdfast's own tests and for your unit tests: a
// [Connector] whose dials fail or succeed in a scripted order, and a
// [PasswordSource] that does the same for a password or IAM token function.
//
// A script is a list of [Step] values played one per call. Failing steps
// return errors built from the real types, wrapped exactly as they arrive in
// production, so code that classifies errors with errors.As and errors.Is
// sees what it would see in production:
//
//   - [Refused]: a TCP connect to a closed port (ECONNREFUSED);
//   - [Reset] and [ResetAfter]: a real connection reset by the peer
//     (ECONNRESET) at once or after some bytes;
//   - [Hang]: a connect that never answers until the context ends;
//   - [Fail]: any error of yours;
//   - [Custom]: a step another package defines, with its own error types.
//     Package cloudsqltest (fakes/cloudsqltest) defines the Cloud SQL Go
//     connector's failures this way: TokenFetch503 and TokenFetch (the IAM
//     login token fetch fails), AdminAPI and Forbidden (the Admin API
//     answers an HTTP error status).
//
// This package imports only the standard library: a vendor's error types
// stay in the packages that need them.
//
// [Connect] dials the real target, a real PostgreSQL server or any TCP
// listener. Once the script is used up, every call connects. Repeat a step
// with [Step.Times] or [Step.Forever], and extend or replace the script while
// the test runs with [Connector.Then] and [Connector.Set] (PasswordSource has
// the same methods). [Connector.Attempts], [Connector.Successes] and
// [Connector.Failures] count the calls exactly, even under heavy concurrency,
// which lets a test assert how many times the code under test retried.
//
// # With plain pgx
//
// A [Connector.Dial] is a pgconn.DialFunc. It ignores the address pgx asks
// for and dials its own target, like the Cloud SQL connector does:
//
//	cfg, err := pgx.ParseConfig(dsn)
//	// ...
//	target := net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
//	c := fakes.NewConnector(target, fakes.Refused(), fakes.Connect())
//	cfg.DialFunc = c.Dial
//	cfg.LookupFunc = func(_ context.Context, host string) ([]string, error) {
//		return []string{host}, nil // one dial per connect, no DNS
//	}
//
//	_, err = pgx.ConnectConfig(ctx, cfg) // fails: errors.Is(err, syscall.ECONNREFUSED)
//	conn, err := pgx.ConnectConfig(ctx, cfg) // connects
//	// c.Attempts() == 2
//
// Set LookupFunc as above when the host name may resolve to several
// addresses ("localhost" often resolves to both ::1 and 127.0.0.1): pgx dials
// once per address, and each dial takes a step of the script. pgx also dials
// through the DialFunc to send a cancel request when a query's context ends.
//
// # With holdfast
//
// Install the Connector as the pool's dial function (on the config, or
// with holdfast.WithDialFunc), and give the PasswordSource to
// holdfast.WithPasswordFunc:
//
//	cfg, err := pgxpool.ParseConfig(dsn)
//	// ...
//	c := fakes.NewConnector(target, fakes.Refused().Times(2), fakes.Connect())
//	cfg.ConnConfig.DialFunc = c.Dial
//	// The token endpoint's connection is reset once: transient for holdfast.
//	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
//	pw := fakes.NewPasswordSource("secret", fakes.Fail(reset))
//	f, err := holdfast.New(holdfast.WithPasswordFunc(pw.Password))
//	// ...
//	pool, err := f.NewPool(ctx, cfg) // the first connection, retried through both failures
//	// c.Attempts() == 3, pw.Attempts() == 2
//
// To test that a fatal error is surfaced at once, script it forever and
// assert that the code under test stopped after one attempt:
//
//	denied := &pgconn.PgError{Severity: "FATAL", Code: "42501"}
//	c := fakes.NewConnector(target, fakes.Fail(denied).Forever())
//	// ... connect, expect an error ...
//	// c.Attempts() == 1
//
// # Related packages
//
// Package fakes/pgtest starts throwaway PostgreSQL servers for the
// Connector to dial. Package fakes/cloudsqltest is a fake Cloud SQL that
// the real connector dials, and defines the Cloud SQL steps above. Package
// fakes/bluegreentest plays an RDS or Aurora blue/green switchover on one
// machine. The load-balancer fakes, lb/f5/f5test and lb/a10/a10test, are in
// the lb module.
//
// # Concurrency and cleanup
//
// Connectors and PasswordSources are safe for concurrent use; each call takes
// exactly one play of the script. They own no goroutines and need no Close.
// A [Hang] step blocks its caller until the caller's context is done, so
// give such calls a context that ends. Connections returned by Dial are the
// caller's to close.
//
// # Secrets
//
// The password of a PasswordSource never appears in an error, nor in the
// output of its String and GoString methods.
package fakes
