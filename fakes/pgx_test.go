package fakes_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/fakes"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// pgxConfig returns a config for the test server and its "host:port".
func pgxConfig(t *testing.T) (*pgx.ConnConfig, string) {
	t.Helper()
	cfg, err := pgx.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	// One dial per connect whatever the host resolves to.
	cfg.LookupFunc = func(_ context.Context, host string) ([]string, error) { return []string{host}, nil }
	return cfg, net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
}

// TestPgxCustomThenConnect: the first connect fails with a Custom step's
// error, kept intact inside pgx's ConnectError; the second connects.
// (Package cloudsqltest runs its Cloud SQL steps through pgx the same way.)
func TestPgxCustomThenConnect(t *testing.T) {
	if testing.Short() {
		t.Skip("plays a scripted outage on a real server: skipped with -short")
	}
	t.Parallel()
	cfg, target := pgxConfig(t)
	c := fakes.NewConnector(target, status(503), fakes.Connect())
	cfg.DialFunc = c.Dial
	ctx := testCtx(t)

	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err == nil {
		conn.Close(ctx)
		t.Fatal("the first connect succeeded, want the token fetch failure")
	}
	var ce *pgconn.ConnectError
	var se *statusError
	if !errors.As(err, &ce) || !errors.As(err, &se) || se.at != "dial" || se.code != 503 {
		t.Fatalf("err = %v; want *pgconn.ConnectError wrapping the dial's *statusError 503", err)
	}

	conn, err = pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("second connect: %v", err)
	}
	defer conn.Close(ctx)
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1 = %d, %v", one, err)
	}
	if c.Attempts() != 2 || c.Successes() != 1 || c.Failures() != 1 {
		t.Errorf("attempts/successes/failures = %d/%d/%d, want 2/1/1", c.Attempts(), c.Successes(), c.Failures())
	}
}

// TestPgxSteps: each failing step surfaces through pgx.ConnectConfig with
// its identity intact, and the next connect succeeds.
func TestPgxSteps(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		step  fakes.Step
		check func(t *testing.T, err error)
		waits bool // it fails at the connect timeout only
	}{
		{"Custom", status(403), func(t *testing.T, err error) {
			var se *statusError
			if !errors.As(err, &se) || se.code != 403 {
				t.Errorf("err = %v, want *statusError 403", err)
			}
		}, false},
		{"Refused", fakes.Refused(), func(t *testing.T, err error) {
			if !errors.Is(err, syscall.ECONNREFUSED) {
				t.Errorf("err = %v, want ECONNREFUSED", err)
			}
		}, false},
		{"Reset during startup", fakes.Reset(), func(t *testing.T, err error) {
			if !errors.Is(err, syscall.ECONNRESET) {
				t.Errorf("err = %v, want ECONNRESET", err)
			}
		}, false},
		{"Hang until the connect timeout", fakes.Hang(), func(t *testing.T, err error) {
			if !pgconn.Timeout(err) || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("err = %v, want a pgconn timeout", err)
			}
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, target := pgxConfig(t)
			// Only Hang waits for its timeout, so only Hang gets a short
			// one: on two cores busy with -race, a step that fails at once
			// (a reset) once took longer than 100 ms to reach.
			cfg.ConnectTimeout = 10 * time.Second
			if tt.waits {
				cfg.ConnectTimeout = 100 * time.Millisecond
			}
			c := fakes.NewConnector(target, tt.step)
			cfg.DialFunc = c.Dial
			ctx := testCtx(t)
			conn, err := pgx.ConnectConfig(ctx, cfg)
			if err == nil {
				conn.Close(ctx)
				t.Fatal("connect succeeded, want an error")
			}
			var ce *pgconn.ConnectError
			if !errors.As(err, &ce) {
				t.Errorf("err = %v, want a *pgconn.ConnectError", err)
			}
			tt.check(t, err)
			cfg.ConnectTimeout = 0
			conn, err = pgx.ConnectConfig(ctx, cfg)
			if err != nil {
				t.Fatalf("connect after the script: %v", err)
			}
			if err := conn.Ping(ctx); err != nil {
				t.Errorf("Ping: %v", err)
			}
			conn.Close(ctx)
			if c.Attempts() != 2 {
				t.Errorf("Attempts = %d, want 2", c.Attempts())
			}
		})
	}
}

// TestPgxResetMidQuery: ResetAfter(the startup's byte count) lets the
// connection start, then resets it during the first query.
func TestPgxResetMidQuery(t *testing.T) {
	if testing.Short() {
		t.Skip("drops real connections mid-query under load: skipped with -short")
	}
	t.Parallel()
	cfg, target := pgxConfig(t)
	ctx := testCtx(t)

	// Count the bytes a startup reads.
	var startup atomic.Int64
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: conn, n: &startup}, nil
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	conn.Close(ctx)
	n := int(startup.Load())
	if n == 0 {
		t.Fatal("startup read no bytes")
	}

	c := fakes.NewConnector(target, fakes.ResetAfter(n))
	cfg.DialFunc = c.Dial
	conn, err = pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("connect with ResetAfter(%d): %v", n, err)
	}
	defer conn.Close(ctx)
	var one int
	err = conn.QueryRow(ctx, "SELECT 1").Scan(&one)
	if err == nil {
		t.Fatal("the query succeeded, want a reset")
	}
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("query error %v, want ECONNRESET", err)
	}
	if !conn.IsClosed() {
		t.Error("pgx did not close the reset connection")
	}
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}
