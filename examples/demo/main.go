// Command demo shows holdfast absorbing the failure from the Cloud SQL IAM
// incident that the project grew from: the access-token fetch for a new
// connection returns 503. It connects to DATABASE_URL, or, when that is
// unset, to a throwaway PostgreSQL it starts itself (it needs the PostgreSQL
// server binaries: initdb, pg_ctl), then makes the same connection three
// ways:
//
//  1. a plain pgxpool whose connector fails once with the token-fetch 503:
//     the request fails;
//  2. the same pool configured by holdfast: the 503 is retried after a short
//     backoff and the request succeeds with one connection;
//  3. holdfast facing a real mistake (an Admin API 403, a role that does not
//     exist): one attempt, an immediate, classified failure.
//
// Run it with:
//
//	go run ./examples/demo
//	DATABASE_URL=postgres://app@localhost/app go run ./examples/demo
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/cloudsql"
	"github.com/holdfast-db/holdfast/examples/harness"
	"github.com/holdfast-db/holdfast/fakes"
	"github.com/holdfast-db/holdfast/fakes/cloudsqltest"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/retry"
	"github.com/jackc/pgx/v5/pgxpool"
)

func main() {
	if err := run(os.Stdout, os.Getenv("DATABASE_URL")); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// run tells the story on w, against dsn, or against a throwaway PostgreSQL
// when dsn is empty.
func run(w io.Writer, dsn string) (err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	dsn, stop, err := database(ctx, w, dsn)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stop()) }()
	fmt.Fprintln(w)

	logger := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // keep the output short
			}
			return a
		},
	}))
	budget, err := retry.NewBudget(retry.DefaultBudget())
	if err != nil {
		return err
	}
	// The fake connector plays the Cloud SQL connector's errors; the
	// factory classifies them as cloudsql.With makes it do.
	f, err := holdfast.New(holdfast.WithLogger(logger), holdfast.WithRetryBudget(budget),
		holdfast.WithIntegration(holdfast.Integration{Name: "cloudsql-errors", Rules: cloudsql.Rules(), TypeRules: cloudsql.TypeRules()}))
	if err != nil {
		return err
	}

	fmt.Fprintln(w, "== 1. plain pgxpool, the IAM token fetch returns 503 once")
	{
		cfg, conn, err := config(dsn, cloudsqltest.TokenFetch503())
		if err != nil {
			return err
		}
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return err
		}
		err = query(ctx, pool)
		pool.Close()
		fmt.Fprintf(w, "   request: %s\n   dial attempts: %d\n\n", outcome(f, err), conn.Attempts())
	}

	fmt.Fprintln(w, "== 2. the same pool through holdfast")
	{
		cfg, conn, err := config(dsn, cloudsqltest.TokenFetch503())
		if err != nil {
			return err
		}
		pool, err := throughHoldfast(ctx, f, cfg)
		if err != nil {
			return err
		}
		start := time.Now()
		err = query(ctx, pool)
		fmt.Fprintf(w, "   request: %s in %v\n   dial attempts: %d, connections created: %d\n\n",
			outcome(f, err), time.Since(start).Round(time.Millisecond), conn.Attempts(), pool.Stat().NewConnsCount())
		pool.Close()
		if err != nil {
			return fmt.Errorf("holdfast did not absorb the 503: %w", err)
		}
	}

	fmt.Fprintln(w, "== 3. holdfast facing real mistakes: no retry, a classified error at once")
	for _, c := range []struct {
		name string
		step fakes.Step
		user string // empty: DSN's user
	}{
		{"Admin API 403 (the IAM role lacks permission)", cloudsqltest.Forbidden().Forever(), ""},
		{"a role that does not exist", fakes.Connect(), "no_such_role"},
	} {
		cfg, conn, err := config(dsn, c.step)
		if err != nil {
			return err
		}
		if c.user != "" {
			cfg.ConnConfig.User = c.user
		}
		pool, err := throughHoldfast(ctx, f, cfg)
		if err != nil {
			return err
		}
		start := time.Now()
		c2, err := f.Acquire(ctx, pool)
		if err == nil {
			c2.Release()
		}
		v := f.Classify(err)
		fmt.Fprintf(w, "   %s:\n     %s after %d dial attempt(s) in %v\n", c.name, v, conn.Attempts(), time.Since(start).Round(time.Microsecond))
		pool.Close()
	}
	fmt.Fprintf(w, "\nretry budget: %d retries allowed, %d refused, %.0f tokens left\n", budget.Retries(), budget.Denied(), budget.Available())
	return nil
}

// database returns dsn when it is set. Otherwise it starts a throwaway
// PostgreSQL server and returns its connection string and its Stop.
func database(ctx context.Context, w io.Writer, dsn string) (string, func() error, error) {
	if dsn != "" {
		fmt.Fprintln(w, "database: DATABASE_URL")
		return dsn, func() error { return nil }, nil
	}
	fmt.Fprintln(w, "DATABASE_URL is not set: starting a throwaway PostgreSQL ...")
	srv, err := pgtest.Start(ctx, pgtest.Options{})
	if err != nil {
		return "", nil, fmt.Errorf("DATABASE_URL is not set, and starting a throwaway PostgreSQL failed: %w", err)
	}
	fmt.Fprintf(w, "database: a throwaway PostgreSQL on %s\n", srv.Addr())
	return srv.DSN(), srv.Stop, nil
}

// config parses dsn and replaces the dialer with a fake connector that
// plays step first, then connects for real to dsn's host and port, one
// dial per connect, so that the counts the demo prints are exact.
func config(dsn string, step fakes.Step) (*pgxpool.Config, *fakes.Connector, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, nil, err
	}
	return cfg, harness.FakeConnector(cfg.ConnConfig, step), nil
}

// throughHoldfast opens the pool of cfg configured by f: holdfast's
// layers on the plain pgxpool config.
func throughHoldfast(ctx context.Context, f *holdfast.Factory, cfg *pgxpool.Config) (*pgxpool.Pool, error) {
	if err := f.Configure(cfg); err != nil {
		return nil, err
	}
	return pgxpool.NewWithConfig(ctx, cfg)
}

func query(ctx context.Context, pool *pgxpool.Pool) error {
	var one int
	return pool.QueryRow(ctx, "SELECT 1").Scan(&one)
}

func outcome(f *holdfast.Factory, err error) string {
	if err == nil {
		return "OK"
	}
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i] + " ..."
	}
	return fmt.Sprintf("FAILED (%s)\n     %s", f.Classify(err), msg)
}
