// Command service is a small HTTP service that keeps its PostgreSQL path
// honest with holdfast: two databases, "orders" through a pgxpool and
// "reports" through database/sql (a *sql.DB of package sqldb), both built
// through the holdfast factory and gated by one readiness Checker; a
// readiness probe at /readyz (status and reason only) and a liveness probe
// at /livez on the service's port, every other request there counted in
// flight; on an admin listener of its own, loopback by default, the
// details of each database's check at /readyz and the drain endpoint at
// /drain; and a shutdown on SIGTERM that drains both databases'
// connections before it stops, so that a rolling deploy loses no request.
//
// "reports" is an optional target: when it is down, /readyz answers 200
// with status "warn" and the service keeps serving /work; /report fails.
//
// Run it with a database:
//
//	DATABASE_URL=postgres://app@localhost/app go run ./examples/service
//
// or with no DATABASE_URL, to start a throwaway PostgreSQL server (the
// server binaries must be installed: initdb, pg_ctl), with a database
// "reports" of its own, that is removed on exit (the first log line says
// which database it uses):
//
//	go run ./examples/service
//
// Then:
//
//	curl -i localhost:8080/readyz                    # readiness: "ok", or "not ready: <reason>"
//	curl -i 'localhost:8080/work?ms=300'             # a request that holds an orders (pgxpool) connection for 300ms
//	curl -i 'localhost:8080/report?ms=300'           # a request that holds a reports (database/sql) connection for 300ms
//	curl -i localhost:8081/readyz                    # the details, health+json: from this host only
//	curl -i -X POST -H 'X-Drain-Owner: me' localhost:8081/drain   # drain: 503 on /readyz, wait for traffic to go
//	curl -i -X DELETE -H 'X-Drain-Owner: me' localhost:8081/drain # back in service
//	kill -TERM <pid>                                  # drain, shut down, close the pool, exit 0
//
// The admin listener answers only requests from this host (readiness's
// default). With ADMIN_TOKEN set it answers only those with the header
// "Authorization: Bearer $ADMIN_TOKEN", from anywhere, and the owner of a
// drain is "ops/" and the X-Drain-Owner the caller gives: then ADMIN_ADDR
// may be an admin port that other hosts reach.
//
// Environment: DATABASE_URL; REPORTS_DATABASE_URL (default DATABASE_URL);
// ADDR (default 127.0.0.1:8080); ADMIN_ADDR (default 127.0.0.1:8081);
// ADMIN_TOKEN (default none: local callers only); DRAIN_TIMEOUT (the
// drain bound on SIGTERM, default 20s); SHUTDOWN_DELAY (how long to keep
// serving after SIGTERM at least, so that load balancers see the 503,
// default readiness's 10s; 0 for none).
package main

import (
	"cmp"
	"context"
	"crypto/subtle"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/readiness"
	"github.com/holdfast-db/holdfast/sqldb"
	"github.com/jackc/pgx/v5/pgxpool"
)

func main() {
	if err := run(context.Background(), os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "service:", err)
		os.Exit(1)
	}
}

// run is the whole service; it returns when the service has shut down.
// stdout gets two lines, "listening on http://ADDR" and
// "admin on http://ADMIN_ADDR", once the listeners are open; logs go to
// stderr.
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
	if delay == 0 && getenv("SHUTDOWN_DELAY") != "" {
		delay = -1 // none; readiness reads 0 as its default
	}
	addr := cmp.Or(getenv("ADDR"), "127.0.0.1:8080")
	adminAddr := cmp.Or(getenv("ADMIN_ADDR"), "127.0.0.1:8081")

	dsn, reportsDSN, stop, err := database(ctx, logger, getenv("DATABASE_URL"), getenv("REPORTS_DATABASE_URL"))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stop()) }()
	// What run opens is closed, last first, if it fails before Serve takes
	// it over.
	var opened undo
	defer opened.run()

	// The pools, built through the factory: classified, bounded retries at
	// connect time and for requests. Each has a name of its own, which
	// names its readiness check, its log lines and its metrics.
	f, err := holdfast.New(holdfast.WithLogger(logger))
	if err != nil {
		return err
	}
	pool, err := newPool(ctx, f, dsn, "orders")
	if err != nil {
		return err
	}
	opened.add(pool.Close)
	reportsPool, err := newPool(ctx, f, reportsDSN, "reports")
	if err != nil {
		return err
	}
	opened.add(reportsPool.Close)
	// database/sql code (sqlx, sqlc's database/sql mode, ...) gets a
	// *sql.DB over the holdfast pool; sqldb.PoolOf(reports) finds the pool
	// for readiness.
	reports := sqldb.OpenDB(reportsPool)
	opened.add(func() { reports.Close() })

	// One Checker over both: readiness fails when orders fails, and only
	// warns when reports does; Serve drains and closes both.
	checker, err := readiness.New(readiness.Config{Factory: f, Logger: logger, Authorize: authorize(getenv("ADMIN_TOKEN"))},
		readiness.Pool(pool),
		readiness.Target{DB: reports, Optional: true},
	)
	if err != nil {
		return err
	}
	opened.add(checker.Close)

	app := http.NewServeMux()
	app.HandleFunc("GET /work", work(f, pool))
	app.HandleFunc("GET /report", report(reports))

	mux := http.NewServeMux()
	mux.Handle("/readyz", checker.ReadyHandler()) // status and reason only
	mux.Handle("/livez", checker.LiveHandler())
	mux.Handle("/", checker.Middleware(app)) // every request counted in flight

	// The details and the drain: on a listener of their own, which the
	// handlers guard too (local callers only, or ADMIN_TOKEN's).
	admin := http.NewServeMux()
	admin.Handle("/readyz", checker.AdminHandler())
	admin.Handle("/drain", checker.DrainHandler())

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	opened.add(func() { ln.Close() })
	adminLn, err := net.Listen("tcp", adminAddr)
	if err != nil {
		return err
	}
	opened = nil // Serve closes them all
	fmt.Fprintf(stdout, "listening on http://%s\n", ln.Addr())
	fmt.Fprintf(stdout, "admin on http://%s\n", adminLn.Addr())

	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	return checker.Serve(ctx, srv, readiness.ServeConfig{
		Listener:      ln,
		Admin:         &http.Server{Handler: admin, ReadHeaderTimeout: 10 * time.Second},
		AdminListener: adminLn,
		DrainTimeout:  drainTimeout,
		ShutdownDelay: delay,
	})
}

// undo is what closes what is open, in the order it was opened.
type undo []func()

func (u *undo) add(f func()) { *u = append(*u, f) }

// run closes it all, last first.
func (u *undo) run() {
	for i := len(*u) - 1; i >= 0; i-- {
		(*u)[i]()
	}
}

// authorize is the admin listener's Config.Authorize: nil (local callers
// only) without a token; with one, a request must carry it as a bearer
// token, and the owner of its drain is "ops/" and the X-Drain-Owner it
// gives ("ops/deploy-42").
func authorize(token string) func(*http.Request) (string, error) {
	if token == "" {
		return nil
	}
	want := []byte("Bearer " + token)
	return func(r *http.Request) (string, error) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			return "", errors.New("no valid admin token")
		}
		return "ops/" + r.Header.Get("X-Drain-Owner"), nil
	}
}

// newPool configures a pool named name for dsn through f. It connects
// lazily: Serve opens the startup gate.
func newPool(ctx context.Context, f *holdfast.Factory, dsn, name string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	if err := f.Configure(cfg, holdfast.PoolName(name)); err != nil {
		return nil, err
	}
	return pgxpool.NewWithConfig(ctx, cfg)
}

// database returns dsn, and reports (dsn when empty), when dsn is set.
// Otherwise it starts a throwaway PostgreSQL server with a database
// "reports", and returns the connection strings of its postgres and
// reports databases and its Stop.
func database(ctx context.Context, logger *slog.Logger, dsn, reports string) (string, string, func() error, error) {
	if dsn != "" {
		logger.Info("database: DATABASE_URL")
		if reports == "" {
			reports = dsn
		}
		return dsn, reports, func() error { return nil }, nil
	}
	srv, err := pgtest.Start(ctx, pgtest.Options{})
	if err != nil {
		return "", "", nil, fmt.Errorf("DATABASE_URL is not set, and starting a throwaway PostgreSQL failed: %w", err)
	}
	if err := srv.Exec(ctx, "CREATE DATABASE reports"); err != nil {
		return "", "", nil, errors.Join(err, srv.Stop())
	}
	logger.Info("database: DATABASE_URL is not set, started a throwaway PostgreSQL", "addr", srv.Addr())
	u, err := url.Parse(srv.DSN())
	if err != nil {
		return "", "", nil, errors.Join(err, srv.Stop())
	}
	u.Path = "/reports"
	return srv.DSN(), u.String(), srv.Stop, nil
}

// maxWork bounds the ms parameter of /work.
const maxWork = 10 * time.Second

// work holds a database connection for ?ms= milliseconds (default 300) with
// pg_sleep: a stand-in for a slow request.
func work(f *holdfast.Factory, pool *pgxpool.Pool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		d, ok := sleepOf(w, r)
		if !ok {
			return
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

// report holds a database/sql connection of reports for ?ms= milliseconds
// (default 300) with pg_sleep, as /work does with the pgxpool.
func report(db *sql.DB) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		d, ok := sleepOf(w, r)
		if !ok {
			return
		}
		if _, err := db.ExecContext(r.Context(), "SELECT pg_sleep($1)", d.Seconds()); err != nil {
			http.Error(w, "reports unavailable", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintf(w, "reported %s\n", d)
	}
}

// sleepOf reads ?ms= (default 300), or answers 400.
func sleepOf(w http.ResponseWriter, r *http.Request) (time.Duration, bool) {
	d := 300 * time.Millisecond
	if s := r.URL.Query().Get("ms"); s != "" {
		ms, err := strconv.Atoi(s)
		if err != nil || ms < 0 || time.Duration(ms)*time.Millisecond > maxWork {
			http.Error(w, "ms must be an integer from 0 to 10000", http.StatusBadRequest)
			return 0, false
		}
		d = time.Duration(ms) * time.Millisecond
	}
	return d, true
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
