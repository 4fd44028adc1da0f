// Command demo shows holdfast absorbing the failure from the Cloud SQL IAM
// incident that the project grew from: the access-token fetch for a new
// connection returns 503. It starts a throwaway PostgreSQL (needs only the
// PostgreSQL server binaries), then makes the same connection three ways:
//
//  1. a plain pgxpool whose connector fails once with the token-fetch 503:
//     the request fails;
//  2. the same pool configured by holdfast: the 503 is retried after a short
//     backoff and the request succeeds with one connection;
//  3. holdfast facing a real mistake (an Admin API 403, a role that does not
//     exist): one attempt, an immediate, classified failure.
//
// Run it with: go run ./examples/demo
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/fakes"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/retry"
	"github.com/jackc/pgx/v5/pgxpool"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(w io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	fmt.Fprintln(w, "starting a throwaway PostgreSQL ...")
	srv, err := pgtest.Start(ctx, pgtest.Options{})
	if err != nil {
		return err
	}
	defer srv.Stop()
	fmt.Fprintf(w, "PostgreSQL is listening on %s\n\n", srv.Addr())

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
	f, err := holdfast.New(holdfast.WithLogger(logger), holdfast.WithRetryBudget(budget))
	if err != nil {
		return err
	}

	fmt.Fprintln(w, "== 1. plain pgxpool, the IAM token fetch returns 503 once")
	{
		cfg, conn, err := config(srv, fakes.TokenFetch503())
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
		cfg, conn, err := config(srv, fakes.TokenFetch503())
		if err != nil {
			return err
		}
		if err := f.Configure(cfg); err != nil {
			return err
		}
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
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
		name  string
		step  fakes.Step
		extra string
	}{
		{"Admin API 403 (the IAM role lacks permission)", fakes.Forbidden().Forever(), ""},
		{"role does not exist (SQLSTATE 28000)", fakes.Connect(), "user=no_such_role"},
	} {
		cfg, conn, err := config(srv, c.step, c.extra)
		if err != nil {
			return err
		}
		if err := f.Configure(cfg); err != nil {
			return err
		}
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
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

// config parses the server's DSN and replaces the dialer with a fake
// connector that plays step first, then connects for real.
func config(srv *pgtest.Server, step fakes.Step, extra ...string) (*pgxpool.Config, *fakes.Connector, error) {
	dsn := srv.DSN()
	for _, e := range extra {
		if e != "" {
			dsn += "&" + e
		}
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, nil, err
	}
	conn := fakes.NewConnector(net.JoinHostPort(srv.Host, strconv.Itoa(srv.Port)), step)
	cfg.ConnConfig.DialFunc = conn.Dial
	return cfg, conn, nil
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
