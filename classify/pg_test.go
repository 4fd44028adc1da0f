package classify_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// withURL returns dsn with its user and/or database replaced.
func withURL(t *testing.T, dsn, user, db string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		u.User = url.User(user)
	}
	if db != "" {
		u.Path = "/" + db
	}
	return u.String()
}

func connect(ctx context.Context, t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// assertVerdict checks the verdict and, when code is set, that the error
// really carries that SQLSTATE (so the test fails if pgx changes shape).
func assertVerdict(t *testing.T, err error, code string, want classify.Verdict) {
	t.Helper()
	if err == nil {
		t.Fatal("got nil error")
	}
	if code != "" {
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != code {
			t.Fatalf("error %v: want SQLSTATE %s", err, code)
		}
	}
	if got := classify.Classify(err); got != want {
		t.Fatalf("Classify(%v) = %v, want %v", err, got, want)
	}
}

var roleSeq atomic.Int64

func TestRealPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("provokes every classified error on a real server of its own: skipped with -short")
	}
	dsn := pgtest.DSN(t)
	t.Parallel()

	t.Run("missing role", func(t *testing.T) {
		t.Parallel()
		_, err := pgx.Connect(testCtx(t), withURL(t, dsn, "no_such_role_classify", ""))
		assertVerdict(t, err, "28000", fatal("sqlstate-28000"))
	})

	t.Run("missing database", func(t *testing.T) {
		t.Parallel()
		_, err := pgx.Connect(testCtx(t), withURL(t, dsn, "", "no_such_db_classify"))
		assertVerdict(t, err, "3D000", fatal("sqlstate-3D000"))
	})

	t.Run("role connection limit", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		admin := connect(ctx, t, dsn)
		role := fmt.Sprintf("classify_limited_%d", roleSeq.Add(1))
		if _, err := admin.Exec(ctx, "CREATE ROLE "+role+" LOGIN CONNECTION LIMIT 0"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+role) })
		_, err := pgx.Connect(ctx, withURL(t, dsn, role, ""))
		assertVerdict(t, err, "53300", transient("sqlstate-53300"))
	})

	t.Run("query errors", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		conn := connect(ctx, t, dsn)
		if _, err := conn.Exec(ctx, "CREATE TEMP TABLE u (id int PRIMARY KEY)"); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, "INSERT INTO u VALUES (1)"); err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			name, sql, code string
		}{
			{"missing table", "SELECT * FROM no_such_table_classify", "42P01"},
			{"syntax error", "SELEC 1", "42601"},
			{"unique violation", "INSERT INTO u VALUES (1)", "23505"},
			{"division by zero", "SELECT 1/0", "22012"},
		}
		for _, tt := range tests {
			_, err := conn.Exec(ctx, tt.sql)
			t.Run(tt.name, func(t *testing.T) {
				assertVerdict(t, err, tt.code, fatal("sqlstate-"+tt.code))
			})
		}
	})

	t.Run("terminated backend", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		victim := connect(ctx, t, dsn)
		admin := connect(ctx, t, dsn)
		pid := victim.PgConn().PID()
		var ok bool
		if err := admin.QueryRow(ctx, "SELECT pg_terminate_backend($1)", pid).Scan(&ok); err != nil || !ok {
			t.Fatalf("pg_terminate_backend: %v %v", ok, err)
		}
		// Wait until the backend is gone, so the FATAL is surely sent.
		for {
			var n int
			if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatal("backend did not exit")
			case <-time.After(10 * time.Millisecond):
			}
		}
		// pgx reads the FATAL ErrorResponse the server sent before closing.
		_, err := victim.Exec(ctx, "SELECT 1")
		assertVerdict(t, err, "57P01", transient("sqlstate-57P01"))

		// The conn is now closed; the next use reports pgconn's "conn
		// closed": the connection is lost, as after an EOF.
		_, err = victim.Exec(ctx, "SELECT 1")
		if !errors.Is(err, pgconn.ErrConnClosed) {
			t.Fatalf("second use: got %v, want ErrConnClosed", err)
		}
		assertVerdict(t, err, "", transient("conn-closed"))
	})
}

func TestRealNetwork(t *testing.T) {
	t.Parallel()

	t.Run("closed port", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		_ = ln.Close()
		_, err = pgconn.Connect(testCtx(t), "postgres://u@"+addr+"/d?sslmode=disable")
		assertVerdict(t, err, "", transient("conn-refused"))
	})

	t.Run("context already canceled", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := pgconn.Connect(ctx, "postgres://u@127.0.0.1:1/d?sslmode=disable")
		assertVerdict(t, err, "", fatal("canceled"))
	})

	t.Run("connect_timeout against a silent server", func(t *testing.T) {
		t.Parallel()
		addr := silentServer(t)
		cfg, err := pgconn.ParseConfig("postgres://u@" + addr + "/d?sslmode=disable&connect_timeout=1")
		if err != nil {
			t.Fatal(err)
		}
		cfg.ConnectTimeout = 200 * time.Millisecond // keep the test fast
		_, err = pgconn.ConnectConfig(testCtx(t), cfg)
		if !pgconn.Timeout(err) {
			t.Fatalf("got %v, want a pgconn timeout", err)
		}
		assertVerdict(t, err, "", transient("timeout"))
	})
}

// A connection lost under a statement is the same failure whichever
// protocol pgx sends the statement with: with arguments (the extended
// protocol) pgx reports the EOF; without (the simple protocol: BEGIN,
// COMMIT) pgx v5.13 reports pgconn.ErrConnClosed. Both are Transient, so a
// caller's transaction retry classified here treats them alike.
func TestConnectionLostUnderAStatement(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	for _, tc := range []struct {
		name string
		args []any
		want classify.Verdict
	}{
		{"simple protocol", nil, transient("conn-closed")},
		{"extended protocol", []any{1}, transient("eof")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			cfg, err := pgx.ParseConfig(dsn)
			if err != nil {
				t.Fatal(err)
			}
			var lost atomic.Bool
			cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
				var d net.Dialer
				c, err := d.DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return &losableConn{Conn: c, lost: &lost}, nil
			}
			conn, err := pgx.ConnectConfig(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = conn.Close(context.Background()) })
			lost.Store(true)
			sql := "BEGIN"
			if tc.args != nil {
				sql = "SELECT $1::int"
			}
			_, err = conn.Exec(ctx, sql, tc.args...)
			assertVerdict(t, err, "", tc.want)
		})
	}
}

// losableConn reads EOF once lost is set, as a connection whose peer
// vanished.
type losableConn struct {
	net.Conn
	lost *atomic.Bool
}

func (c *losableConn) Read(b []byte) (int, error) {
	if c.lost.Load() {
		return 0, io.EOF
	}
	return c.Conn.Read(b)
}

// silentServer accepts TCP connections and never writes to them. Everything
// is closed and joined at cleanup.
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}
