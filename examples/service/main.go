// Command service is a small HTTP service that keeps its PostgreSQL path
// honest with holdfast: a pgxpool built through the holdfast factory, a
// readiness probe at /readyz, a liveness probe at /livez, a drain endpoint
// at /drain, every other request counted in flight, and a shutdown on
// SIGTERM that drains before it stops, so that a rolling deploy loses no
// request.
//
// Run it with a database:
//
//	DATABASE_URL=postgres://app@localhost/app go run ./examples/service
//
// or with no DATABASE_URL, to start a throwaway PostgreSQL server (the
// server binaries must be installed: initdb, pg_ctl) that is removed on exit
// (the first log line says which database it uses):
//
//	go run ./examples/service
//
// Then:
//
//	curl -i localhost:8080/readyz?verbose            # readiness, health+json
//	curl -i 'localhost:8080/work?ms=300'             # a request that holds a connection for 300ms
//	curl -i -X POST -H 'X-Drain-Owner: me' localhost:8080/drain   # drain: 503 on /readyz, wait for traffic to go
//	curl -i -X DELETE 'localhost:8080/drain?owner=me'             # back in service
//	kill -TERM <pid>                                  # drain, shut down, close the pool, exit 0
//
// Environment: DATABASE_URL; ADDR (default 127.0.0.1:8080); DRAIN_TIMEOUT
// (the drain bound on SIGTERM, default 20s); SHUTDOWN_DELAY (how long to keep
// serving after SIGTERM at least, so that load balancers see the 503,
// default 0).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/readiness"
	"github.com/jackc/pgx/v5/pgxpool"
)

func main() {
	if err := run(context.Background(), os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "service:", err)
		os.Exit(1)
	}
}

// run is the whole service; it returns when the service has shut down.
// stdout gets one line, "listening on http://ADDR", once the listener is
// open; logs go to stderr.
func run(ctx context.Context, getenv func(string) string, stdout, stderr io.Writer) (err error) {
	logger := slog.New(slog.NewTextHandler(stderr, nil))

	drainTimeout, err := duration(getenv, "DRAIN_TIMEOUT")
	if err != nil {
		return err
	}
	delay, err := duration(getenv, "SHUTDOWN_DELAY")
	if err != nil {
		return err
	}
	addr := getenv("ADDR")
	if addr == "" {
		addr = "127.0.0.1:8080"
	}

	dsn, stop, err := database(ctx, logger, getenv("DATABASE_URL"))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stop()) }()

	// The pool, built through the factory: classified, bounded retries at
	// connect time and for requests.
	f, err := holdfast.New(holdfast.WithLogger(logger))
	if err != nil {
		return err
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return err
	}
	if err := f.Configure(cfg); err != nil {
		return err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg) // connects lazily; Serve opens the startup gate
	if err != nil {
		return err
	}
	checker, err := readiness.New(pool, readiness.Config{Factory: f, Logger: logger})
	if err != nil {
		pool.Close()
		return err
	}

	app := http.NewServeMux()
	app.HandleFunc("GET /work", work(f, pool))

	mux := http.NewServeMux()
	mux.Handle("/readyz", checker.ReadyHandler())
	mux.Handle("/livez", checker.LiveHandler())
	mux.Handle("/drain", checker.DrainHandler()) // in production: an admin port, or behind authentication
	mux.Handle("/", checker.Middleware(app))     // every request counted in flight

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		checker.Close()
		pool.Close()
		return err
	}
	fmt.Fprintf(stdout, "listening on http://%s\n", ln.Addr())

	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	return checker.Serve(ctx, srv, readiness.ServeConfig{
		Listener:      ln,
		DrainTimeout:  drainTimeout,
		ShutdownDelay: delay,
	})
}

// database returns dsn when it is set. Otherwise it starts a throwaway
// PostgreSQL server and returns its connection string and its Stop.
func database(ctx context.Context, logger *slog.Logger, dsn string) (string, func() error, error) {
	if dsn != "" {
		logger.Info("database: DATABASE_URL")
		return dsn, func() error { return nil }, nil
	}
	srv, err := pgtest.Start(ctx, pgtest.Options{})
	if err != nil {
		return "", nil, fmt.Errorf("DATABASE_URL is not set, and starting a throwaway PostgreSQL failed: %w", err)
	}
	logger.Info("database: DATABASE_URL is not set, started a throwaway PostgreSQL", "addr", srv.Addr())
	return srv.DSN(), srv.Stop, nil
}

// maxWork bounds the ms parameter of /work.
const maxWork = 10 * time.Second

// work holds a database connection for ?ms= milliseconds (default 300) with
// pg_sleep: a stand-in for a slow request.
func work(f *holdfast.Factory, pool *pgxpool.Pool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		d := 300 * time.Millisecond
		if s := r.URL.Query().Get("ms"); s != "" {
			ms, err := strconv.Atoi(s)
			if err != nil || ms < 0 || time.Duration(ms)*time.Millisecond > maxWork {
				http.Error(w, "ms must be an integer from 0 to 10000", http.StatusBadRequest)
				return
			}
			d = time.Duration(ms) * time.Millisecond
		}
		conn, err := f.Acquire(r.Context(), pool) // request-scope retry of transient connect failures
		if err != nil {
			http.Error(w, "database unavailable", http.StatusServiceUnavailable)
			return
		}
		defer conn.Release()
		if _, err := conn.Exec(r.Context(), "SELECT pg_sleep($1)", d.Seconds()); err != nil {
			http.Error(w, "query failed", http.StatusInternalServerError)
			return
		}
		fmt.Fprintf(w, "worked %s\n", d)
	}
}

// duration reads a Go duration from the environment; empty means 0 (the
// default).
func duration(getenv func(string) string, name string) (time.Duration, error) {
	s := getenv(name)
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, errors.New(name + ": want a non-negative Go duration such as 20s, got " + strconv.Quote(s))
	}
	return d, nil
}
