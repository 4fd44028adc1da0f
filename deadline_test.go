package holdfast_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/retry"
)

// A retry that cannot finish before the caller's deadline is not slept, on
// any layer: a role whose connections are refused (53300, CONNECTION LIMIT
// 0), a backoff of 0.8–1.2 s, a caller with 600 ms. Factory.Acquire returns
// at once with the deadline stop reason and the real cause, instead of
// sleeping to the deadline and answering "context deadline exceeded" (the
// connect inside pgxpool runs without the caller's deadline; the factory
// passes it down with retry.WithCallerDeadline).
func TestRetryDoesNotSleepPastTheCallersDeadline(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	refusedRole(t, dsn, "deadline_role")
	p := retry.Default()
	p.InitialInterval, p.MaxInterval, p.Jitter = time.Second, time.Second, 0.2
	f := newFactory(t, holdfast.WithRetryPolicy(p))
	cfg, _ := poolConfig(t, dsn, "sslmode=disable", "user=deadline_role")
	pool := newPool(t, f, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := f.Acquire(ctx, pool)
	took := time.Since(start)
	t.Logf("MEASURED Acquire: %v after %v", err, took.Round(time.Millisecond))
	var re *retry.Error
	var pe *pgconn.PgError
	switch {
	case err == nil:
		t.Fatal("connected as a role with CONNECTION LIMIT 0")
	case !errors.As(err, &re) || re.Stop != retry.StopDeadline:
		t.Errorf("Acquire = %v; want a *retry.Error with StopDeadline", err)
	case !errors.As(err, &pe) || pe.Code != "53300":
		t.Errorf("Acquire = %v; want the cause, 53300, reachable", err)
	}
	if took > 300*time.Millisecond {
		t.Errorf("Acquire returned after %v: it slept toward the 600 ms deadline", took)
	}
}

// A retry inside a connect follows DNS: pgconn resolves the host once per
// connect, and retries used to dial that answer again and again. Here the
// first answer is a port where nothing listens and the name then moves to
// the server: the first retry connects to it.
func TestRetryFollowsDNS(t *testing.T) {
	t.Parallel()
	cfg, addr := poolConfig(t, pgtest.DSN(t), "sslmode=disable")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	var lookups atomic.Int64
	cfg.ConnConfig.Host = "db.moving.test"
	cfg.ConnConfig.LookupFunc = func(context.Context, string) ([]string, error) {
		if lookups.Add(1) == 1 {
			return []string{dead}, nil
		}
		return []string{addr}, nil
	}
	host, port, _ := net.SplitHostPort(addr)
	if n, _ := strconv.Atoi(port); host == "" || n == 0 {
		t.Fatalf("server address %q", addr)
	}
	f := newFactory(t)
	pool := newPool(t, f, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := pool.Ping(ctx); err != nil {
		t.Fatalf("the retry kept the first answer: %v", err)
	}
	if n := lookups.Load(); n < 2 {
		t.Errorf("%d lookups: the retry did not resolve the name again", n)
	}
}
