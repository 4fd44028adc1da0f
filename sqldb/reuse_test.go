package sqldb_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/fakes"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/sqldb"
)

// In *sql.Conn.Raw the driver connection of every sqldb *sql.DB is pgx's
// own *stdlib.Conn, as with pgx's driver: driverConn.(*stdlib.Conn).Conn()
// is the *pgx.Conn, the pool's connection.
func TestRawIsStdlibConn(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"Open", "OpenDB", "NewConnector", "RegisterDriver"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			o := openBy(t, kind)
			defer o.db.Close()
			conn, err := o.db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			var pid, rawPID uint32
			if err := conn.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
				t.Fatal(err)
			}
			err = conn.Raw(func(driverConn any) error {
				pc := driverConn.(*stdlib.Conn).Conn() // panics if it is not pgx's own
				rawPID = pc.PgConn().PID()
				return pc.Ping(ctx)
			})
			if err != nil {
				t.Fatal(err)
			}
			if rawPID != pid {
				t.Errorf("Raw's *pgx.Conn is backend %d, the *sql.Conn's statements ran on %d", rawPID, pid)
			}
		})
	}
}

// pidOf is the backend of the next statement of db.
func pidOf(ctx context.Context, t *testing.T, db *sql.DB) uint32 {
	t.Helper()
	var pid uint32
	if err := db.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return pid
}

// A connection database/sql kept idle is checked as pgxpool's Acquire
// checks one when database/sql reuses it: the pool's PrepareConn runs (the
// application's, composed after holdfast's), a connection it rejects is
// destroyed and the statement runs on another, and a PrepareConn error
// gives the connection back to the pool and fails the statement as the
// pool's Acquire does.
func TestReuseRunsPrepareConn(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"Open", "OpenDB", "NewConnector"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var (
				calls  atomic.Int32
				reject atomic.Uint32 // a backend pid PrepareConn rejects
				fail   atomic.Bool   // PrepareConn fails
			)
			errPrepare := errors.New("the application's PrepareConn fails")
			cfg, _ := config(t, "")
			cfg.PrepareConn = func(_ context.Context, c *pgx.Conn) (bool, error) {
				calls.Add(1)
				if fail.Load() {
					return true, errPrepare
				}
				return c.PgConn().PID() != reject.Load(), nil
			}
			f := newFactory(t)
			var db *sql.DB
			switch kind {
			case "Open":
				var err error
				if db, err = sqldb.Open(ctx, f, cfg); err != nil {
					t.Fatal(err)
				}
			default:
				pool, err := f.NewPool(ctx, cfg)
				if err != nil {
					t.Fatal(err)
				}
				if kind == "OpenDB" {
					t.Cleanup(pool.Close)
					db = sqldb.OpenDB(pool)
				} else {
					db = sql.OpenDB(sqldb.NewConnector(pool))
				}
			}
			defer db.Close()
			if kind != "NewConnector" {
				db.SetMaxIdleConns(1) // NewConnector's sql.OpenDB keeps database/sql's default, 2
			}

			first := pidOf(ctx, t, db)
			before := calls.Load()
			if again := pidOf(ctx, t, db); again != first {
				t.Fatalf("the second statement ran on backend %d, the first on %d: database/sql did not reuse its connection", again, first)
			}
			if n := calls.Load() - before; n != 1 {
				t.Errorf("database/sql's reuse of its connection ran PrepareConn %d times, want 1", n)
			}

			reject.Store(first)
			if next := pidOf(ctx, t, db); next == first {
				t.Errorf("the statement ran on backend %d, which PrepareConn rejects", first)
			}
			backendGone(t, first)

			fail.Store(true)
			err := db.QueryRowContext(ctx, "SELECT 1").Scan(new(int))
			if !errors.Is(err, errPrepare) {
				t.Errorf("with PrepareConn failing: %v, want its error", err)
			}
			fail.Store(false)
			if err := db.QueryRowContext(ctx, "SELECT 1").Scan(new(int)); err != nil {
				t.Errorf("once PrepareConn succeeds again: %v", err)
			}
		})
	}
}

// A connection database/sql kept past the pool's MaxConnLifetime is
// destroyed when database/sql would reuse it, as pgxpool destroys one at
// Acquire, whatever the *sql.DB's own SetConnMaxLifetime (unset here).
func TestReuseHonoursLifetime(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"Open", "RegisterDriver"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var db *sql.DB
			if kind == "Open" {
				cfg, _ := config(t, "&pool_max_conn_lifetime=1s")
				var err error
				if db, err = sqldb.Open(ctx, newFactory(t), cfg); err != nil {
					t.Fatal(err)
				}
				db.SetMaxIdleConns(1)
			} else {
				name := fmt.Sprintf("holdfast-sqldb-lifetime-%d", registered.Add(1))
				if err := sqldb.RegisterDriver(name, newFactory(t)); err != nil {
					t.Fatal(err)
				}
				var err error
				if db, err = sql.Open(name, pgtest.DSN(t)+"&sslmode=disable&pool_max_conn_lifetime=1s"); err != nil {
					t.Fatal(err)
				}
			}
			defer db.Close()
			first := pidOf(ctx, t, db)
			if again := pidOf(ctx, t, db); again != first {
				t.Fatalf("within its lifetime the connection was not reused: backends %d, %d", first, again)
			}
			time.Sleep(1200 * time.Millisecond)
			if next := pidOf(ctx, t, db); next == first {
				t.Errorf("the statement ran on backend %d past the pool's MaxConnLifetime", first)
			}
			backendGone(t, first)
		})
	}
}

// holdfast's eviction reaches a connection database/sql kept: after an
// established connection to the server fails (a reset), the connections
// to it made before are presumed dead and destroyed when next acquired —
// and when database/sql next reuses the one it kept, also through
// RegisterDriver's sql.Open, on which sqldb cannot set SetMaxIdleConns(0).
func TestReuseSeesEviction(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"Open", "RegisterDriver"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cfg, err := pgxpool.ParseConfig(pgtest.DSN(t) + "&sslmode=disable")
			if err != nil {
				t.Fatal(err)
			}
			// The first connection stays, the second is reset once 20 kB
			// were read from it, the others stay.
			dial := fakes.NewConnector(net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))),
				fakes.Connect(), fakes.ResetAfter(20_000))
			f := newFactory(t, holdfast.WithIntegration(holdfast.Integration{Dial: dial.Dial}))
			var db *sql.DB
			if kind == "Open" {
				cfg.MinConns = 0
				if db, err = sqldb.Open(ctx, f, cfg); err != nil {
					t.Fatal(err)
				}
				db.SetMaxIdleConns(2)
			} else {
				name := fmt.Sprintf("holdfast-sqldb-evict-%d", registered.Add(1))
				if err := sqldb.RegisterDriver(name, f); err != nil {
					t.Fatal(err)
				}
				if db, err = sql.Open(name, pgtest.DSN(t)+"&sslmode=disable"); err != nil {
					t.Fatal(err)
				}
			}
			defer db.Close()

			kept, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var keptPID uint32
			if err := kept.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&keptPID); err != nil {
				t.Fatal(err)
			}
			failing, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := kept.Close(); err != nil { // database/sql keeps it idle
				t.Fatal(err)
			}
			if st := db.Stats(); st.Idle != 1 {
				t.Fatalf("database/sql keeps %d idle connections, want 1", st.Idle)
			}
			var big string
			if err := failing.QueryRowContext(ctx, "SELECT repeat('x', 100000)").Scan(&big); err == nil || !strings.Contains(err.Error(), "reset") {
				t.Fatalf("the query on the connection to reset: %v, want a reset", err)
			}
			failing.Close()

			if next := pidOf(ctx, t, db); next == keptPID {
				t.Errorf("the statement ran on backend %d, made before the server failed a connection: eviction did not see database/sql's reuse", keptPID)
			}
			backendGone(t, keptPID)
		})
	}
}

// On a pool with the deprecated BeforeAcquire and no PrepareConn (one no
// holdfast factory configured: Configure turns it into PrepareConn), a
// reuse runs BeforeAcquire, as pgxpool's Acquire does.
func TestReuseRunsBeforeAcquire(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var reject atomic.Uint32
	cfg, _ := config(t, "")
	//lint:ignore SA1019 the deprecated hook is what this tests
	cfg.BeforeAcquire = func(_ context.Context, c *pgx.Conn) bool { return c.PgConn().PID() != reject.Load() }
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(sqldb.NewConnector(pool))
	defer db.Close()
	first := pidOf(ctx, t, db)
	if again := pidOf(ctx, t, db); again != first {
		t.Fatalf("the connection was not reused: backends %d, %d", first, again)
	}
	reject.Store(first)
	if next := pidOf(ctx, t, db); next == first {
		t.Errorf("the statement ran on backend %d, which BeforeAcquire rejects", first)
	}
	backendGone(t, first)
}
