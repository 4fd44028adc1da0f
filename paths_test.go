package holdfast_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/fakes"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
)

// poolPaths are the ways a service reaches a pool's connections: each must
// get a connection although the first connect fails with 53300.
var poolPaths = []struct {
	name string
	use  func(ctx context.Context, p *pgxpool.Pool) error
}{
	{"Acquire", func(ctx context.Context, p *pgxpool.Pool) error {
		c, err := p.Acquire(ctx)
		if err == nil {
			c.Release()
		}
		return err
	}},
	{"AcquireFunc", func(ctx context.Context, p *pgxpool.Pool) error {
		return p.AcquireFunc(ctx, func(*pgxpool.Conn) error { return nil })
	}},
	{"Query", func(ctx context.Context, p *pgxpool.Pool) error {
		rows, err := p.Query(ctx, "SELECT 1")
		if err != nil {
			return err
		}
		rows.Close()
		return rows.Err()
	}},
	{"QueryRow", func(ctx context.Context, p *pgxpool.Pool) error {
		var one int
		return p.QueryRow(ctx, "SELECT 1").Scan(&one)
	}},
	{"Exec", func(ctx context.Context, p *pgxpool.Pool) error {
		_, err := p.Exec(ctx, "SELECT 1")
		return err
	}},
	{"Begin", func(ctx context.Context, p *pgxpool.Pool) error {
		tx, err := p.Begin(ctx)
		if err != nil {
			return err
		}
		return tx.Rollback(ctx)
	}},
	{"BeginTx", func(ctx context.Context, p *pgxpool.Pool) error {
		tx, err := p.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
		if err != nil {
			return err
		}
		return tx.Rollback(ctx)
	}},
	{"SendBatch", func(ctx context.Context, p *pgxpool.Pool) error {
		b := &pgx.Batch{}
		b.Queue("SELECT 1")
		return p.SendBatch(ctx, b).Close()
	}},
	{"CopyFrom", func(ctx context.Context, p *pgxpool.Pool) error {
		_, err := p.CopyFrom(ctx, pgx.Identifier{"holdfast_paths"}, []string{"n"}, pgx.CopyFromRows([][]any{{1}}))
		return err
	}},
	{"Ping", func(ctx context.Context, p *pgxpool.Pool) error { return p.Ping(ctx) }},
}

// Every path of a plain *pgxpool.Pool built from a config the factory
// configured retries a transient failure of the startup handshake (53300,
// too many connections for the role) under the factory's policy; a plain
// pgxpool fails there (the control), and a fatal failure (a role that does
// not exist, 28000) is tried once.
func TestEveryPoolPathRetriesTheHandshake(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	admin, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	var adminMu sync.Mutex // the admin connection is shared by parallel subtests
	exec := func(sql string) {
		adminMu.Lock()
		defer adminMu.Unlock()
		mustExec(t, admin, sql)
	}
	exec("CREATE TABLE IF NOT EXISTS holdfast_paths (n int)")
	exec("GRANT INSERT ON holdfast_paths TO PUBLIC")

	// limitedPool returns a pool for a fresh role that may not connect
	// (CONNECTION LIMIT 0) until the factory's first retry raises its
	// limit: the database recovers while holdfast backs off.
	limitedPool := func(t *testing.T, role string, configure bool) (*pgxpool.Pool, *fakes.Connector) {
		exec(fmt.Sprintf("CREATE ROLE %s LOGIN CONNECTION LIMIT 0", role))
		t.Cleanup(func() { exec("DROP ROLE " + role) })
		cfg, addr := poolConfig(t, dsn, "sslmode=disable", "user="+role)
		conn := fakes.NewConnector(addr)
		cfg.ConnConfig.DialFunc = conn.Dial
		if !configure {
			pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			return pool, conn
		}
		var once sync.Once
		raise := hookHandler{fn: func(slog.Record) {
			once.Do(func() { exec(fmt.Sprintf("ALTER ROLE %s CONNECTION LIMIT -1", role)) })
		}}
		f := newFactory(t, holdfast.WithLogger(slog.New(raise)))
		if err := f.Configure(cfg); err != nil {
			t.Fatal(err)
		}
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return pool, conn
	}

	for i, path := range poolPaths {
		t.Run(path.name, func(t *testing.T) {
			t.Parallel()
			pool, conn := limitedPool(t, fmt.Sprintf("paths_role_%d", i), true)
			if err := path.use(context.Background(), pool); err != nil {
				t.Fatalf("%s = %v, want success after one retried 53300", path.name, err)
			}
			if conn.Attempts() != 2 || pool.Stat().NewConnsCount() != 1 {
				t.Errorf("dials = %d (want 2: the refused handshake and the retry), connections = %d (want 1)",
					conn.Attempts(), pool.Stat().NewConnsCount())
			}
		})
	}
	t.Run("control: plain pgxpool", func(t *testing.T) {
		t.Parallel()
		pool, conn := limitedPool(t, "paths_role_control", false)
		var one int
		err := pool.QueryRow(context.Background(), "SELECT 1").Scan(&one)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "53300" {
			t.Fatalf("plain pgxpool QueryRow = %v, want 53300: the fault must bite without holdfast", err)
		}
		if conn.Attempts() != 1 {
			t.Errorf("plain pgxpool dials = %d, want 1", conn.Attempts())
		}
	})
	t.Run("missing role tried once", func(t *testing.T) {
		t.Parallel()
		cfg, addr := poolConfig(t, dsn, "sslmode=disable", "user=no_such_role_paths")
		conn := fakes.NewConnector(addr)
		cfg.ConnConfig.DialFunc = conn.Dial
		pool := newPool(t, newFactory(t), cfg)
		for _, path := range poolPaths {
			err := path.use(context.Background(), pool)
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != "28000" {
				t.Errorf("%s = %v, want 28000", path.name, err)
			}
		}
		if got, want := conn.Attempts(), len(poolPaths); got != want {
			t.Errorf("dials = %d, want %d (one per call: a fatal failure is not retried)", got, want)
		}
	})
}

// An integration whose dial authenticates by itself (the Cloud SQL
// connector's automatic IAM login) gets one more attempt, on a fresh dial,
// after SQLSTATE 28000, on every path of the pool; without it a 28000 is
// tried once. Here the role does not exist, so the retry fails too, and
// the connection is not retried again by Factory.Acquire.
func TestRetryAuthFailureOnAFreshDial(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	for _, on := range []bool{false, true} {
		cfg, addr := poolConfig(t, dsn, "sslmode=disable", "user=no_such_iam_role")
		conn := fakes.NewConnector(addr)
		f := newFactory(t, holdfast.WithIntegration(holdfast.Integration{Name: "iam-dialer", Dial: conn.Dial, RetryAuthFailure: on}))
		pool := newPool(t, f, cfg)
		var one int
		err := pool.QueryRow(context.Background(), "SELECT 1").Scan(&one)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "28000" {
			t.Fatalf("RetryAuthFailure %v: QueryRow = %v, want 28000", on, err)
		}
		want := 1
		if on {
			want = 2
		}
		if conn.Attempts() != want {
			t.Errorf("RetryAuthFailure %v: dials = %d, want %d", on, conn.Attempts(), want)
		}
		if _, err := f.Acquire(context.Background(), pool); err == nil {
			t.Fatal("Acquire succeeded")
		}
		if conn.Attempts() != 2*want {
			t.Errorf("RetryAuthFailure %v: after Factory.Acquire, dials = %d, want %d (no retry on top)", on, conn.Attempts(), 2*want)
		}
	}
}

// A transient DNS failure (a timeout) is retried under the policy, on every
// path; a lasting one gives up after MaxAttempts lookups, is classified
// transient, and Factory.Acquire does not retry it again. No lookup or dial
// is ever made for holdfast's internal entries.
func TestDNSFailuresAreRetried(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	for _, lasting := range []bool{false, true} {
		cfg, addr := poolConfig(t, dsn, "sslmode=disable")
		host, _, _ := net.SplitHostPort(addr)
		cfg.ConnConfig.Host = "db.dns.test"
		var lookups atomic.Int64
		cfg.ConnConfig.LookupFunc = func(_ context.Context, name string) ([]string, error) {
			if name != "db.dns.test" {
				t.Errorf("lookup of %q", name)
			}
			if n := lookups.Add(1); lasting || n == 1 {
				return nil, &net.DNSError{Err: "i/o timeout", Name: name, IsTimeout: true}
			}
			return []string{host}, nil
		}
		conn := fakes.NewConnector(addr)
		cfg.ConnConfig.DialFunc = conn.Dial
		f := newFactory(t)
		pool := newPool(t, f, cfg)
		var one int
		err := pool.QueryRow(context.Background(), "SELECT 1").Scan(&one)
		switch {
		case !lasting && (err != nil || lookups.Load() != 2 || conn.Attempts() != 1):
			t.Errorf("one DNS timeout: QueryRow = %v, lookups = %d (want 2), dials = %d (want 1)", err, lookups.Load(), conn.Attempts())
		case lasting:
			if v := f.Classify(err); !v.Retryable() || v.Reason != "dns-temporary" {
				t.Errorf("lasting DNS timeouts: Classify = %v, want transient/dns-temporary (%v)", v, err)
			}
			if lookups.Load() != 3 || conn.Attempts() != 0 {
				t.Errorf("lasting DNS timeouts: lookups = %d (want MaxAttempts = 3), dials = %d (want 0)", lookups.Load(), conn.Attempts())
			}
			if _, err := f.Acquire(context.Background(), pool); err == nil || lookups.Load() != 6 {
				t.Errorf("Factory.Acquire: %v, lookups = %d, want 6 (one more connect, not retried on top)", err, lookups.Load())
			}
		}
	}
}

// After a 28000 (a stale IAM token), the connect layer's one retry with a
// fresh token sends the fresh token: pgx connects with a copy of the
// config that BeforeConnect prepared, so the token must reach that copy.
// A fake server refuses the first connection with 28000 and records the
// password of the second.
func TestFreshTokenReachesTheServer(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for n := 1; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			be := pgproto3.NewBackend(c, c)
			if _, err := be.ReceiveStartupMessage(); err == nil {
				if n == 1 {
					be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", Code: "28000", Message: "PAM authentication failed"})
				} else {
					be.Send(&pgproto3.AuthenticationCleartextPassword{})
					if be.Flush() == nil && be.SetAuthType(pgproto3.AuthTypeCleartextPassword) == nil {
						if msg, err := be.Receive(); err == nil {
							if pm, ok := msg.(*pgproto3.PasswordMessage); ok {
								select {
								case got <- pm.Password:
								default: // only the first is checked
								}
							}
						}
					}
					be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", Code: "28P01", Message: "done"})
				}
				_ = be.Flush()
			}
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	var calls atomic.Int64
	f := newFactory(t, holdfast.WithPasswordFunc(func(context.Context, string) (string, error) {
		if calls.Add(1) == 1 {
			return "stale", nil
		}
		return "fresh", nil
	}))
	cfg, err := pgxpool.ParseConfig("postgres://u@" + ln.Addr().String() + "/db?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	pool := newPool(t, f, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = pool.Ping(ctx) // the fake ends with 28P01
	select {
	case pw := <-got:
		if pw != "fresh" {
			t.Errorf("the retry sent password %q, want the fresh token", pw)
		}
	default:
		t.Fatalf("no second connection sent a password (%d token fetches)", calls.Load())
	}
}
