package sqldb_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/sqldb"
)

// A sqldb *sql.DB and, when its constructor gives one, its pool.
type opened struct {
	db   *sql.DB
	pool *pgxpool.Pool    // nil for RegisterDriver (Open's: PoolOf)
	c    *sqldb.Connector // NewConnector's
	kind string           // the constructor
}

// openBy opens a *sql.DB on the test server by one of sqldb's four
// constructors. The pool of OpenDB is closed when the test ends.
func openBy(t *testing.T, kind string) opened {
	t.Helper()
	ctx := context.Background()
	f := newFactory(t)
	cfg, _ := config(t, "")
	switch kind {
	case "Open":
		db, err := sqldb.Open(ctx, f, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return opened{db: db, pool: sqldb.PoolOf(db), kind: kind}
	case "OpenDB", "NewConnector":
		pool, err := f.NewPool(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if kind == "OpenDB" {
			t.Cleanup(pool.Close)
			return opened{db: sqldb.OpenDB(pool), pool: pool, kind: kind}
		}
		c := sqldb.NewConnector(pool)
		return opened{db: sql.OpenDB(c), pool: pool, c: c, kind: kind}
	case "RegisterDriver":
		name := fmt.Sprintf("holdfast-sqldb-close-%d", registered.Add(1))
		if err := sqldb.RegisterDriver(name, f); err != nil {
			t.Fatal(err)
		}
		db, err := sql.Open(name, pgtest.DSN(t)+"&sslmode=disable")
		if err != nil {
			t.Fatal(err)
		}
		return opened{db: db, kind: kind}
	}
	t.Fatalf("no constructor %q", kind)
	return opened{}
}

// backendGone waits (5 s at most) until the server has no backend pid.
func backendGone(t *testing.T, pid uint32) {
	t.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	deadline := time.Now().Add(5 * time.Second)
	for {
		var n int
		if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("backend %d is still connected 5 s after its connection was released: the pool did not close it", pid)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A held resource of a *sql.DB: its backend, a use after DB.Close, and
// its release.
type held struct {
	pid     uint32
	use     func() error
	release func() error
}

func hold(ctx context.Context, t *testing.T, db *sql.DB, what string) held {
	t.Helper()
	var h held
	switch what {
	case "Rows":
		rows, err := db.QueryContext(ctx, "SELECT pg_backend_pid() FROM generate_series(1, 3)")
		if err != nil {
			t.Fatal(err)
		}
		if !rows.Next() {
			t.Fatal(rows.Err())
		}
		if err := rows.Scan(&h.pid); err != nil {
			t.Fatal(err)
		}
		h.use = func() error {
			n := 1
			for rows.Next() {
				n++
			}
			if err := rows.Err(); err != nil {
				return err
			}
			if n != 3 {
				return fmt.Errorf("read %d rows, want 3", n)
			}
			return nil
		}
		h.release = rows.Close
	case "Tx":
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&h.pid); err != nil {
			t.Fatal(err)
		}
		h.use = func() error {
			_, err := tx.ExecContext(ctx, "SELECT 1")
			return err
		}
		h.release = tx.Commit
	case "Conn":
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := conn.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&h.pid); err != nil {
			t.Fatal(err)
		}
		h.use = func() error {
			var one int
			return conn.QueryRowContext(ctx, "SELECT 1").Scan(&one)
		}
		h.release = conn.Close
	default:
		t.Fatalf("nothing to hold called %q", what)
	}
	return h
}

// DB.Close returns at once while the application holds a Rows, a Tx or a
// *sql.Conn (database/sql never waits for them; pgxpool.Close would): the
// pool's idle connections close, the pool acquires nothing more, the held
// connection keeps working, and its release closes it and ends the close
// of the pool (pgxpool.Close returns; the goroutine that ran it is gone
// when pgtest.Main's goleak check runs).
func TestCloseWhileHeld(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"Open", "NewConnector", "RegisterDriver"} {
		for _, what := range []string{"Rows", "Tx", "Conn"} {
			t.Run(kind+"/"+what, func(t *testing.T) {
				t.Parallel()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				o := openBy(t, kind)
				if o.pool != nil {
					// An idle connection in the pool besides the held one:
					// Close closes it at once.
					a, err := o.pool.Acquire(ctx)
					if err != nil {
						t.Fatal(err)
					}
					b, err := o.pool.Acquire(ctx)
					if err != nil {
						t.Fatal(err)
					}
					a.Release()
					b.Release()
				}
				h := hold(ctx, t, o.db, what)

				done := make(chan error, 1)
				go func() { done <- o.db.Close() }()
				select {
				case err := <-done:
					if err != nil {
						t.Errorf("DB.Close = %v", err)
					}
				case <-time.After(2 * time.Second):
					t.Errorf("DB.Close has not returned 2 s after it was called while a %s is held", what)
					if err := h.release(); err != nil {
						t.Error(err)
					}
					select {
					case <-done:
					case <-time.After(10 * time.Second):
						t.Fatal("DB.Close still has not returned 10 s after the release")
					}
					return
				}

				if o.pool != nil {
					waitFor(t, "the pool's idle connection closed", func() bool { return o.pool.Stat().TotalConns() == 1 })
					// The pool's close has begun: it makes no connection.
					waitFor(t, "the pool refusing Acquire", func() bool {
						c, err := o.pool.Acquire(ctx)
						if err == nil {
							c.Release()
						}
						return err != nil
					})
				}
				if p := sqldb.PoolOf(o.db); p != nil {
					t.Errorf("PoolOf after DB.Close = %p, want nil", p)
				}
				if o.c != nil {
					if _, err := o.c.Connect(ctx); !errors.Is(err, sqldb.ErrClosed) {
						t.Errorf("Connect after Close = %v, want ErrClosed", err)
					}
				}
				// Reading a Rows to its end releases it.
				if err := h.use(); err != nil {
					t.Errorf("the held %s after DB.Close: %v, want it to work until released", what, err)
				}
				if err := h.release(); err != nil {
					t.Errorf("releasing the %s: %v", what, err)
				}
				if o.pool != nil {
					if err := o.pool.Ping(ctx); err == nil {
						t.Error("the pool is open after the release of the last held connection")
					}
					if n := o.pool.Stat().TotalConns(); n != 0 {
						t.Errorf("the closed pool has %d connections", n)
					}
				}
				backendGone(t, h.pid)
			})
		}
	}
}

// DB.Close with nothing held closes the pool at once, the pool's idle
// connections and the ones database/sql kept idle too.
func TestCloseIdle(t *testing.T) {
	t.Parallel()
	for _, maxIdle := range []int{-1, 0} { // -1: database/sql's default (2), kept acquired from the pool
		t.Run(fmt.Sprintf("maxIdle=%d", maxIdle), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			o := openBy(t, "NewConnector")
			if maxIdle >= 0 {
				o.db.SetMaxIdleConns(maxIdle)
			}
			var pid uint32
			if err := o.db.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
				t.Fatal(err)
			}
			if st := o.pool.Stat(); st.TotalConns() != 1 || (st.IdleConns() == 1) != (maxIdle == 0) {
				t.Fatalf("the pool has %d connections, %d idle; want 1, idle only with SetMaxIdleConns(0)", st.TotalConns(), st.IdleConns())
			}
			if err := o.db.Close(); err != nil {
				t.Fatal(err)
			}
			if err := o.pool.Ping(ctx); err == nil {
				t.Error("DB.Close left the Connector's pool open")
			}
			backendGone(t, pid)
			if err := o.c.Close(); err != nil { // a second Close does nothing
				t.Error(err)
			}
		})
	}
}

// waitFor polls cond for 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("%s: not after 5 s", what)
			return
		}
	}
}

// Which connections database/sql keeps idle: none for Open and OpenDB
// (SetMaxIdleConns(0), as pgx's stdlib.OpenDBFromPool) unless the
// application raises SetMaxIdleConns; database/sql's default (2) for
// RegisterDriver's sql.Open and NewConnector's sql.OpenDB, which sqldb
// cannot set, unless the application sets SetMaxIdleConns(0). Either way
// the next statement runs on the same backend: the pool's connection, or
// the one database/sql kept, reused.
func TestIdleConnections(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"Open", "OpenDB", "NewConnector", "RegisterDriver"} {
		for _, maxIdle := range []int{-1, 0, 2} { // -1: not set
			t.Run(fmt.Sprintf("%s/maxIdle=%d", kind, maxIdle), func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				o := openBy(t, kind)
				defer o.db.Close()
				if maxIdle >= 0 {
					o.db.SetMaxIdleConns(maxIdle)
				}
				kept := 0 // idle connections database/sql keeps after a query
				if maxIdle > 0 || maxIdle < 0 && (kind == "NewConnector" || kind == "RegisterDriver") {
					kept = 1
				}
				var pids [2]uint32
				for i := range pids {
					if err := o.db.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pids[i]); err != nil {
						t.Fatal(err)
					}
					if st := o.db.Stats(); st.Idle != kept || st.OpenConnections != kept {
						t.Errorf("after a query database/sql holds %d connections, %d idle; want %d idle", st.OpenConnections, st.Idle, kept)
					}
					if o.pool != nil {
						if st := o.pool.Stat(); st.IdleConns() != int32(1-kept) || st.AcquiredConns() != int32(kept) {
							t.Errorf("after a query the pool has %d idle, %d acquired connections; want %d, %d", st.IdleConns(), st.AcquiredConns(), 1-kept, kept)
						}
					}
				}
				if pids[0] != pids[1] {
					t.Errorf("the second query ran on backend %d, the first on %d: the connection was not reused", pids[1], pids[0])
				}
			})
		}
	}
}

// What database/sql does on a connection it does not keep idle: prepared
// statements (re-prepared on each connection), transactions, a *sql.Conn
// and its Raw driver connection, pgx's *stdlib.Conn with the *pgx.Conn.
func TestConnUses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := openBy(t, "Open")
	defer o.db.Close()
	db := o.db
	if _, err := db.ExecContext(ctx, "CREATE TEMPORARY TABLE IF NOT EXISTS x (n int)"); err != nil {
		t.Fatal(err)
	}
	stmt, err := db.PrepareContext(ctx, "SELECT $1::int + 1")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		var n int
		if err := stmt.QueryRowContext(ctx, i).Scan(&n); err != nil || n != i+1 {
			t.Errorf("prepared statement, run %d: %d, %v", i, n, err)
		}
	}
	if err := stmt.Close(); err != nil {
		t.Error(err)
	}

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "CREATE TEMPORARY TABLE t (n int)"); err != nil {
		t.Fatal(err)
	}
	txStmt, err := tx.PrepareContext(ctx, "INSERT INTO t VALUES ($1)")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := txStmt.ExecContext(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 3 {
		t.Errorf("in the transaction: %d rows, %v; want 3", n, err)
	}
	if err := tx.Rollback(); err != nil {
		t.Error(err)
	}

	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	err = conn.Raw(func(driverConn any) error {
		sc, ok := driverConn.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("Raw's driver connection is a %T, want pgx's *stdlib.Conn", driverConn)
		}
		return sc.Conn().Ping(ctx)
	})
	if err != nil {
		t.Error(err)
	}
	if st := db.Stats(); st.InUse != 1 || st.Idle != 0 {
		t.Errorf("with a *sql.Conn held: %d in use, %d idle; want 1, 0", st.InUse, st.Idle)
	}
}
