// Package pgtest starts throwaway PostgreSQL servers for tests.
//
// A server is a fresh cluster (initdb) in a temporary directory, started with
// pg_ctl and tuned for speed rather than durability (fsync, synchronous_commit
// and full_page_writes off, a small shared_buffers). It has one superuser,
// "postgres", trust authentication, the database "postgres" and no TLS, and
// it listens on a loopback address and a free port.
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
// Setting PGTEST_DSN makes [DSN] use that server instead of starting one.
//
// # Own servers
//
// Tests that restart, kill or reconfigure a server, or need several, call
// [Start] with [Options] and [Server.Stop] it when done. Any 127.x.y.z address
// works as [Options.Host] on Linux, so tests can simulate distinct hosts.
//
// # Finding PostgreSQL
//
// [BinDir] looks for initdb on PATH, then in "pg_config --bindir", then in
// the newest /usr/lib/postgresql/*/bin (where Debian's postgresql package
// puts it). When the binaries are missing, [DSN] skips the test, unless
// HOLDFAST_REQUIRE_PG=1, as in CI, where it fails it.
//
// # Running as root
//
// PostgreSQL refuses to run as root. When the test process is root, pgtest
// runs initdb, pg_ctl and the server as the "postgres" OS user (or "nobody"),
// in a directory under /tmp owned by that user.
//
// # Leftovers
//
// A test binary that is killed leaves its server running in a
// /tmp/holdfast-pg-* directory. That does not disturb later runs, which pick
// free ports; remove such servers with pg_ctl -D DIR/data stop, or reboot.
package pgtest
