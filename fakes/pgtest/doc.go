// Package pgtest starts throwaway PostgreSQL servers from the server
// binaries installed on the machine, for holdfast's tests and yours, and for
// example programs that should run with no database set up.
//
// A server is a fresh cluster (initdb) in a new temporary directory, started
// with pg_ctl and tuned for speed rather than durability (fsync,
// synchronous_commit and full_page_writes off, a small shared_buffers). It
// has one superuser, "postgres", trust authentication, the database
// "postgres" and no TLS, and it listens on a loopback address and a free
// port. It needs no Docker, no network and no system PostgreSQL service.
//
// # Shared server
//
// Most tests need just a database. They call [DSN], which starts one server
// per test binary on first use, and register [Main] so that the server is
// stopped and goroutine leaks are checked when the tests end:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
//	func TestQuery(t *testing.T) {
//		conn, err := pgx.Connect(ctx, pgtest.DSN(t))
//		...
//	}
//
// Setting PGTEST_DSN ([EnvDSN]) makes [DSN] return that connection string
// instead of starting a server, for example to run the tests against a
// server you manage.
//
// # Own servers
//
// Tests that restart, kill or reconfigure a server, or need several, call
// [Start] with [Options] and [Server.Stop] it when done. [Server.Shutdown]
// takes a server down (pg_ctl stop, in a [ShutdownMode]) and
// [Server.Restart] brings it back on the same address, port and data: a
// restart of the database, as a client sees it (measured on two loaded
// cores: 0.2 to 0.3 s to stop fast, 0.5 to 0.7 s to start). Any 127.x.y.z
// address works as [Options.Host] on Linux, so tests can simulate distinct
// hosts. [Start] takes no testing.TB, so a program can call it too: the
// examples under examples/ connect to DATABASE_URL when it is set and
// otherwise start a server with [Start] (see the package example).
//
// # Finding PostgreSQL
//
// [BinDir] looks for initdb on PATH, then in "pg_config --bindir", then in
// the newest /usr/lib/postgresql/*/bin (where Debian's postgresql package
// puts it). When the binaries are missing, [Start] returns an error wrapping
// [ErrNotFound] and [DSN] skips the test, unless HOLDFAST_REQUIRE_PG=1
// ([EnvRequire]), as in CI, where it fails it. Any other start failure fails
// the test; it is never skipped.
//
// # Running as root
//
// PostgreSQL refuses to run as root. When the process is root, pgtest runs
// initdb, pg_ctl and the server as the "postgres" OS user (or "nobody"), in
// a directory directly under /tmp owned by that user, since that user cannot
// reach a test's t.TempDir(). Otherwise the directory is under
// [os.TempDir].
//
// # Concurrency
//
// [DSN], [Start] and the methods of [Server] are safe for concurrent use,
// including from parallel tests.
//
// # Leftovers
//
// A process that is killed before it stops its servers leaves them running
// in /tmp/holdfast-pg-* directories. That does not disturb later runs, which
// pick free ports; remove such servers with pg_ctl -D DIR/data stop, or
// reboot.
package pgtest
