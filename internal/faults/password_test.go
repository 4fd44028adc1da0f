package faults_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
)

// passwordServer starts a server of the test's own where role pwRole
// logs in with password pwRight (SCRAM; pgtest's servers trust everyone
// else), and returns it.
func passwordServer(t *testing.T) *pgtest.Server {
	t.Helper()
	s := ownServer(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.Exec(ctx, "CREATE ROLE "+pwRole+" LOGIN PASSWORD '"+pwRight+"'"); err != nil {
		t.Fatal(err)
	}
	hba := filepath.Join(s.Dir, "data", "pg_hba.conf")
	old, err := os.ReadFile(hba)
	if err != nil {
		t.Fatal(err)
	}
	line := "host all " + pwRole + " 127.0.0.1/32 scram-sha-256\n" // first: it wins over trust
	if err := os.WriteFile(hba, append([]byte(line), old...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		t.Fatal(err)
	}
	// The postmaster reloads on its own time: wait until a wrong password
	// is refused (bounded by ctx).
	cfg, err := pgx.ParseConfig(s.DSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.User, cfg.Password = pwRole, "wrong"
	for {
		c, err := pgx.ConnectConfig(ctx, cfg)
		if err == nil {
			c.Close(ctx)
		}
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "28P01" {
			return s
		}
		if ctx.Err() != nil {
			t.Fatalf("the server never asked %s for a password: %v", pwRole, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

const (
	pwRole  = "faults_pw"
	pwRight = "right-token"
)

// errTokenEndpoint is a token endpoint that refused the connection:
// transient.
var errTokenEndpoint = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}

// tokenFunc is a password (IAM token) function whose n-th call (from 1)
// returns play(ctx, n); it counts its calls.
type tokenFunc struct {
	calls atomic.Int64
	play  func(ctx context.Context, n int64) (string, error)
}

func (f *tokenFunc) token(ctx context.Context) (string, error) { return f.play(ctx, f.calls.Add(1)) }

// Token functions, by what they do.
var (
	hangs = func(ctx context.Context, _ int64) (string, error) { <-ctx.Done(); return "", ctx.Err() }
	fails = func(_ context.Context, n int64) (string, error) {
		if n == 1 {
			return "", errTokenEndpoint
		}
		return pwRight, nil
	}
	wrongOnce = func(_ context.Context, n int64) (string, error) {
		if n == 1 {
			return "wrong", nil
		}
		return pwRight, nil
	}
	staleOnce = func(_ context.Context, n int64) (string, error) {
		if n == 1 {
			return "stale", nil
		}
		return pwRight, nil
	}
	wrong = func(context.Context, int64) (string, error) { return "wrong", nil }
	empty = func(context.Context, int64) (string, error) { return "", nil }
)

// A password (IAM token) function that hangs, fails or returns garbage:
//   - hanging: each fetch is bounded by AttemptTimeout (500 ms), the
//     connect by MaxAttempts (3 fetches, no dial), transient; the control,
//     plain pgxpool with the same function in BeforeConnect, holds its
//     caller for the caller's whole deadline (2 s);
//   - failing transiently once: fetched again, then connected (2 fetches,
//     1 dial); the control fails at once;
//   - garbage (a wrong or empty token; 28P01 from a SCRAM role): pgx stops
//     at an authentication failure, so pool.Ping fails after 1 dial;
//     Factory.Acquire retries it once with a fresh token, which connects
//     when the fresh token is right (2 fetches, 2 dials) and fails fatal
//     28P01 otherwise; the control fails at once;
//   - a stale token refused with 28000 (as RDS refuses a stale IAM token;
//     a front end answers the first connection so): the connect layer
//     retries it once with a fresh token on every pool path (pool.Ping: 2
//     fetches, 2 dials); the control fails at once.
func TestPasswordFunc(t *testing.T) {
	if testing.Short() {
		t.Skip("plays outages on a real server: skipped with -short")
	}
	t.Parallel()
	s := passwordServer(t)
	for _, tc := range []struct {
		name    string
		plain   bool
		acquire bool // Factory.Acquire, else pool.Ping
		stale   bool // a front end refuses the first connection with 28000
		play    func(ctx context.Context, n int64) (string, error)
		wantOK  bool
		fetches int64         // exactly
		dials   int64         // exactly
		within  time.Duration // the call's bound
	}{
		{name: "hanging", play: hangs, fetches: 3, dials: 0, within: 2500 * time.Millisecond},
		{name: "hanging/control: plain pgxpool", plain: true, play: hangs, fetches: 1, dials: 0},
		{name: "failing once", play: fails, wantOK: true, fetches: 2, dials: 1, within: time.Second},
		{name: "failing once/control: plain pgxpool", plain: true, play: fails, fetches: 1, dials: 0},
		{name: "wrong once/pool.Ping", play: wrongOnce, fetches: 1, dials: 1, within: time.Second},
		{name: "wrong once/Factory.Acquire", acquire: true, play: wrongOnce, wantOK: true, fetches: 2, dials: 2, within: time.Second},
		{name: "wrong/Factory.Acquire", acquire: true, play: wrong, fetches: 2, dials: 2, within: time.Second},
		{name: "empty/Factory.Acquire", acquire: true, play: empty, fetches: 2, dials: 2, within: time.Second},
		{name: "wrong once/control: plain pgxpool", plain: true, play: wrongOnce, fetches: 1, dials: 1},
		{name: "stale once (28000)/pool.Ping", stale: true, play: staleOnce, wantOK: true, fetches: 2, dials: 2, within: time.Second},
		{name: "stale once (28000)/control: plain pgxpool", stale: true, plain: true, play: staleOnce, fetches: 1, dials: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := &tokenFunc{play: tc.play}
			d := &dialCounter{}
			addr := s.Addr()
			if tc.stale {
				addr = refusing(t, addr, 1, "28000")
			}
			cfg := configAt(t, s.DSN(), addr, d, "")
			cfg.ConnConfig.User = pwRole
			f, b := newHoldfast(t, testPolicy(), holdfast.WithPasswordFunc(func(ctx context.Context, _ string) (string, error) { return src.token(ctx) }))
			var pool *pgxpool.Pool
			deadline := 20 * time.Second
			if tc.plain {
				cfg.BeforeConnect = func(ctx context.Context, cc *pgx.ConnConfig) error {
					pw, err := src.token(ctx)
					cc.Password = pw
					return err
				}
				pool = plainPool(t, cfg)
				deadline = 2 * time.Second
			} else {
				pool = holdfastPool(t, f, cfg)
			}
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			began := time.Now()
			var err error
			if tc.acquire {
				var c *pgxpool.Conn
				if c, err = f.Acquire(ctx, pool); err == nil {
					c.Release()
				}
			} else {
				err = pool.Ping(ctx)
			}
			took := time.Since(began)
			fetches := src.calls.Load()
			t.Logf("MEASURED password func %s: %d fetches, %d dials, %d retries, %v, %s",
				tc.name, fetches, d.dials(), b.Retries(), took.Round(time.Millisecond), outcome(f, err))
			if (err == nil) != tc.wantOK {
				t.Errorf("err = %v, want success %v", err, tc.wantOK)
			}
			if fetches != tc.fetches || d.dials() != tc.dials {
				t.Errorf("%d fetches and %d dials, want %d and %d", fetches, d.dials(), tc.fetches, tc.dials)
			}
			if tc.within > 0 {
				within(t, "the connect", took, tc.within)
			}
			if tc.name == "hanging/control: plain pgxpool" && took < 1900*time.Millisecond {
				t.Errorf("control: returned after %v, before its caller's 2 s deadline: the fault does not bite", took)
			}
		})
	}
}
