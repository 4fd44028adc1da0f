package pgtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A restart of one PostgreSQL, the shape of issue 30 that publishes no
// topology, against plain pgxpool as the control: its connection dies
// with 57P01 at the fast shutdown, every request while the server is down
// fails (refused at once), and the first request after the restart goes
// through, on the same address and port, with the data kept.
func TestShutdownRestart(t *testing.T) {
	t.Parallel()
	requireBinaries(t)
	ctx := testContext(t)
	s, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	})
	cfg, err := pgxpool.ParseConfig(s.DSN() + "&connect_timeout=2&pool_max_conns=1")
	if err != nil {
		t.Fatal(err)
	}
	// No ping at acquire, however long the connection was idle (a busy
	// pool's): each request meets the connection as it is.
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	exec := func() error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := pool.Exec(ctx, "INSERT INTO t VALUES (1)")
		return err
	}
	if _, err := pool.Exec(ctx, "CREATE TABLE t (id int)"); err != nil {
		t.Fatal(err)
	}
	if err := exec(); err != nil {
		t.Fatal(err)
	}
	port := s.Port

	began := time.Now()
	if err := s.Shutdown(ctx, ShutdownFast); err != nil {
		t.Fatal(err)
	}
	t.Logf("MEASURED shutdown -m fast: %v", time.Since(began).Round(time.Millisecond))
	if err := s.Shutdown(ctx, ShutdownFast); err != nil {
		t.Errorf("Shutdown of a server that is down: %v", err)
	}
	// The pool's idle connection got 57P01; the request on it fails, and
	// so does each one after (refused).
	err = exec()
	if pe := (*pgconn.PgError)(nil); !errors.As(err, &pe) || pe.Code != "57P01" {
		t.Errorf("first request after the shutdown: %v; want 57P01", err)
	}
	for i := range 3 {
		if err := exec(); err == nil {
			t.Fatalf("request %d while the server is down succeeded", i)
		}
	}

	began = time.Now()
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("MEASURED restart (pg_ctl start -w): %v", time.Since(began).Round(time.Millisecond))
	if s.Port != port {
		t.Errorf("port %d after the restart, want %d", s.Port, port)
	}
	if err := exec(); err != nil {
		t.Fatalf("first request after the restart: %v", err)
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 2 {
		t.Fatalf("rows after the restart: %d, %v; want 2", n, err)
	}

	// Restart of a running server: a fast shutdown first.
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := exec(); err == nil {
		t.Error("request on a connection of before the restart succeeded")
	}
	if err := exec(); err != nil {
		t.Errorf("request after the restart: %v", err)
	}

	if err := s.Shutdown(ctx, "slow"); err == nil {
		t.Error("Shutdown with an unknown mode succeeded")
	}
	if err := s.Shutdown(ctx, ShutdownImmediate); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(ctx); !errors.Is(err, ErrStopped) {
		t.Errorf("Restart after Stop: %v; want ErrStopped", err)
	}
}
