package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"
)

// EnvDSN names the environment variable that, when set, makes [DSN] return
// its value instead of starting a server.
const EnvDSN = "PGTEST_DSN"

// EnvRequire names the environment variable that, when set to "1", makes
// [DSN] fail the test instead of skipping it when the PostgreSQL binaries are
// missing. CI sets it so that a broken installation cannot pass silently.
const EnvRequire = "HOLDFAST_REQUIRE_PG"

// startTimeout bounds starting the shared server.
const startTimeout = 2 * time.Minute

var shared struct {
	mu     sync.Mutex
	done   bool // a start was attempted
	server *Server
	err    error
}

// DSN returns a connection string for the test binary's shared server. If
// PGTEST_DSN is set, it returns that. Otherwise the first call starts a server
// with default [Options], which later calls reuse and [Main] stops. DSN is
// safe for concurrent use, including from parallel tests.
//
// If the PostgreSQL binaries are absent, DSN calls t.Skip with a message
// saying how to install them, or t.Fatal with the same message when
// HOLDFAST_REQUIRE_PG=1. If the server fails to start, DSN calls t.Fatal with
// the error and log tail; it never skips on a start failure.
func DSN(t testing.TB) string {
	t.Helper()
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		return dsn
	}
	s, err := sharedServer()
	if err != nil {
		failStart(t, err)
		return "" // not reached with a real testing.TB
	}
	return s.DSN()
}

// Addr returns the "host:port" of the server of [DSN] (of PGTEST_DSN when
// it is set), for a test that forwards connections to it (a fake proxy, a
// fake managed instance). It skips or fails as DSN does, and fails the
// test if the connection string does not parse.
func Addr(t testing.TB) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(DSN(t))
	if err != nil {
		t.Fatalf("pgtest: %v", err)
		return ""
	}
	return net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
}

// NewServer starts a server of the test's own (for a test that changes
// server-wide settings, pg_hba.conf or roles it must not share), stopped
// when the test ends. Without the binaries it skips, or fails under
// HOLDFAST_REQUIRE_PG=1, as DSN does; a server that does not start within
// two minutes fails the test.
func NewServer(t testing.TB) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Start(ctx, Options{})
	if err != nil {
		failStart(t, err)
		return nil // not reached with a real testing.TB
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

// failStart ends the test because the shared server is unavailable: a skip
// when the binaries are missing (a failure under HOLDFAST_REQUIRE_PG=1), and
// always a failure when they exist but the server did not start.
func failStart(t testing.TB, err error) {
	t.Helper()
	switch {
	case errors.Is(err, ErrNotFound) && os.Getenv(EnvRequire) == "1":
		t.Fatal(ErrNotFound.Error())
	case errors.Is(err, ErrNotFound):
		t.Skip(ErrNotFound.Error())
	default:
		t.Fatalf("pgtest: starting a server: %v", err)
	}
}

func sharedServer() (*Server, error) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.done {
		shared.done = true
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		shared.server, shared.err = Start(ctx, Options{})
		cancel()
	}
	return shared.server, shared.err
}

// stopShared stops the shared server, if one was started.
func stopShared() error {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.server == nil {
		return nil
	}
	return shared.server.Stop()
}

// Main runs the tests of a package that uses [DSN]. Call it from TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// It runs the tests, stops the shared server, and, if the tests passed,
// checks for leaked goroutines with [goleak.Find], failing the run if any
// remain. The one goroutine it ignores is the OpenCensus worker that
// importing cloud.google.com/go/cloudsqlconn starts at init and never stops.
// It then exits the process with the run's status and does not return.
//
// A package with its own TestMain need not use Main, but then the shared
// server of [DSN] keeps running until the machine reboots; use [Start] and
// [Server.Stop] there instead.
func Main(m *testing.M) {
	code := m.Run()
	if err := stopShared(); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: stopping the shared server: %v\n", err)
		code = 1
	}
	if code == 0 {
		// Importing the cloudsqlconn root package starts an OpenCensus
		// worker at init that never stops; it is not a leak of the tests.
		if err := goleak.Find(goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start")); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: goroutines leaked by the tests:\n%v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// Database creates database name on the server of DSN(t), dropped (WITH
// FORCE) when the test ends, and returns a connection to it, closed when
// the test ends. name is an SQL identifier, used as given.
func Database(t testing.TB, name string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		admin, err := pgx.Connect(context.Background(), DSN(t))
		if err == nil {
			_, _ = admin.Exec(context.Background(), "DROP DATABASE "+name+" WITH (FORCE)")
			admin.Close(context.Background())
		}
	})
	cfg, err := pgx.ParseConfig(DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Database = name
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}
