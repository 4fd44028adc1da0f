package holdfast_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/fakes"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/retry"
	"github.com/holdfast-db/holdfast/sqldb"
)

// One failure, one line (issue 29, item 3): a connection that failed reads
// as pgx's own error plus one holdfast clause — the attempts, the stop, what
// to check — with no "not dialed" line, no retry summary nested in another,
// "not retried" for what was not, the hint in the returned error
// (errors.As to a type with Hint) where the log line has one; on every door
// of holdfast (NewPool, Factory.Acquire, DBTX, RunTx, database/sql through
// sqldb) and, for a failed
// dial, on the pool's own paths too (pgx's error, which pgxpool returns
// unchanged). The causes stay reachable (errors.As to pgx's
// *pgconn.ConnectError and *pgconn.PgError, the *retry.Error) and
// Factory.Classify keeps its verdicts.
func TestOneFailureOneLine(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	s, err := pgtest.Start(ctx, pgtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	if err := s.PasswordRole(ctx, "oneline_pw", "right-password"); err != nil {
		t.Fatal(err)
	}
	if err := s.Exec(ctx, "CREATE ROLE oneline_limited LOGIN CONNECTION LIMIT 0"); err != nil {
		t.Fatal(err)
	}
	dead := deadAddr(t)
	socketDir := filepath.Join(t.TempDir(), "cloudsql", "proj:region:inst")
	startup := fastPolicy()
	startup.MaxAttempts = 2

	newPoolErr := func(t *testing.T, f *holdfast.Factory, dsn string) error {
		cfg, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		pool, err := f.NewPool(ctx, cfg)
		if err == nil {
			pool.Close()
			t.Fatal("NewPool succeeded")
		}
		return err
	}

	refused := want{has: []string{"dial error: dial tcp " + dead + ": connect: connection refused (holdfast: ", " attempts in ", "gave up: attempts exhausted"},
		hint: "nothing accepts connections at " + dead, verdict: "transient/conn-refused", retryErr: true}
	sqlDBs := map[*pgxpool.Pool]*sql.DB{} // sqldb.Open's, by their pool
	tests := []struct {
		name string
		gone string // the sslmode of a pool on a server that then went away, given to err; "": none
		err  func(t *testing.T, f *holdfast.Factory, gone *pgxpool.Pool) error
		want want
	}{
		{"NewPool, a refused port", "", func(t *testing.T, f *holdfast.Factory, _ *pgxpool.Pool) error {
			return newPoolErr(t, f, "postgres://app@"+dead+"/orders?sslmode=disable")
		}, with(refused, func(w *want) { w.door = true; w.has = append(w.has, "(holdfast: 6 attempts in ") })},
		{"pool.Exec, the server gone", "disable", func(t *testing.T, f *holdfast.Factory, gone *pgxpool.Pool) error {
			_, err := gone.Exec(ctx, "SELECT 1")
			return err
		}, want{has: []string{"dial error: dial tcp", "connect: connection refused (holdfast: 3 attempts in "}, verdict: "transient/conn-refused", retryErr: true}},
		{"pool.Query, the server gone, sslmode=prefer", "prefer", func(t *testing.T, f *holdfast.Factory, gone *pgxpool.Pool) error {
			rows, err := gone.Query(ctx, "SELECT 1")
			if err == nil {
				rows.Close()
				err = rows.Err()
			}
			return err
		}, want{has: []string{"connect: connection refused (holdfast: 3 attempts in "}, verdict: "transient/conn-refused", retryErr: true}},
		{"DBTX, the server gone", "disable", func(t *testing.T, f *holdfast.Factory, gone *pgxpool.Pool) error {
			_, err := f.DBTX(gone).Exec(ctx, "SELECT 1")
			return err
		}, want{door: true, has: []string{"connect: connection refused (holdfast: 3 attempts in "}, hint: "nothing accepts connections at", verdict: "transient/conn-refused", retryErr: true}},
		{"RunTx, the server gone", "disable", func(t *testing.T, f *holdfast.Factory, gone *pgxpool.Pool) error {
			return f.RunTx(ctx, gone, pgx.TxOptions{}, func(pgx.Tx) error { return nil })
		}, want{door: true, has: []string{"connect: connection refused (holdfast: 9 attempts in ", "gave up: attempts exhausted"}, hint: "nothing accepts connections at", verdict: "transient/conn-refused", retryErr: true}},
		{"database/sql over the pool (sqldb.OpenDB), the server gone", "disable", func(t *testing.T, f *holdfast.Factory, gone *pgxpool.Pool) error {
			db := sqldb.OpenDB(gone)
			defer db.Close()
			return db.PingContext(ctx)
		}, want{door: true, has: []string{"connect: connection refused (holdfast: 3 attempts in "}, hint: "nothing accepts connections at", verdict: "transient/conn-refused", retryErr: true}},
		{"database/sql (sqldb.Open), the server gone", "sqldb", func(t *testing.T, f *holdfast.Factory, gone *pgxpool.Pool) error {
			return sqldb.RunTx(ctx, f, sqlDBs[gone], nil, func(*sql.Tx) error { return nil })
		}, want{door: true, has: []string{"connect: connection refused (holdfast: ", "gave up: attempts exhausted"}, hint: "nothing accepts connections at", verdict: "transient/conn-refused", retryErr: true}},
		{"NewPool, a wrong password (28P01)", "", func(t *testing.T, f *holdfast.Factory, _ *pgxpool.Pool) error {
			return newPoolErr(t, f, "postgres://oneline_pw:wrong-password@"+s.Addr()+"/postgres?sslmode=disable")
		}, want{door: true, has: []string{"failed SASL auth", "(SQLSTATE 28P01) (holdfast: not retried; "}, hint: `password authentication failed for "oneline_pw"`, verdict: "fatal/sqlstate-28P01", code: "28P01", retryErr: true}},
		{"NewPool, a missing database (3D000)", "", func(t *testing.T, f *holdfast.Factory, _ *pgxpool.Pool) error {
			return newPoolErr(t, f, "postgres://postgres@"+s.Addr()+"/oneline_missing?sslmode=disable")
		}, want{door: true, has: []string{`database "oneline_missing" does not exist (SQLSTATE 3D000) (holdfast: not retried; `}, hint: "check dbname in the connection string", verdict: "fatal/sqlstate-3D000", code: "3D000", retryErr: true}},
		{"Factory.Acquire, 53300 on every attempt", "", func(t *testing.T, f *holdfast.Factory, _ *pgxpool.Pool) error {
			cfg, _ := poolConfig(t, s.DSN(), "sslmode=disable", "user=oneline_limited")
			_, err := f.Acquire(ctx, newPool(t, f, cfg))
			return err
		}, want{door: true, has: []string{"(SQLSTATE 53300) (holdfast: 3 attempts in ", "gave up: attempts exhausted"}, hint: "too many connections", verdict: "transient/sqlstate-53300", code: "53300", retryErr: true}},
		{"NewPool, a missing Unix socket", "", func(t *testing.T, f *holdfast.Factory, _ *pgxpool.Pool) error {
			return newPoolErr(t, f, "host="+socketDir+" user=app dbname=orders")
		}, want{door: true, has: []string{"dial error: dial unix " + socketDir + "/.s.PGSQL.5432: connect: no such file or directory (holdfast: 6 attempts in "},
			hint: "Cloud SQL Auth Proxy", verdict: "transient/socket-missing", retryErr: true}},
		{"pool.Ping, a missing Unix socket", "", func(t *testing.T, f *holdfast.Factory, _ *pgxpool.Pool) error {
			cfg, err := pgxpool.ParseConfig("host=" + socketDir + " user=app dbname=orders")
			if err != nil {
				t.Fatal(err)
			}
			return newPool(t, f, cfg).Ping(ctx)
		}, want{has: []string{"no such file or directory (holdfast: 3 attempts in "}, verdict: "transient/socket-missing", retryErr: true}},
		{"pool.Ping, a host that does not resolve, sslmode=prefer", "", func(t *testing.T, f *holdfast.Factory, _ *pgxpool.Pool) error {
			cfg, err := pgxpool.ParseConfig("postgres://app@db.example.invalid/orders?sslmode=prefer")
			if err != nil {
				t.Fatal(err)
			}
			cfg.ConnConfig.LookupFunc = func(context.Context, string) ([]string, error) {
				return nil, &net.DNSError{Err: "no such host", Name: "db.example.invalid", IsNotFound: true}
			}
			return newPool(t, f, cfg).Ping(ctx)
		}, want{has: []string{"hostname resolving error: lookup db.example.invalid: no such host (holdfast: not retried; the host name does not resolve"}, verdict: "fatal/dns-not-found", retryErr: true}},
		{"pool.Ping, two hosts refused", "", func(t *testing.T, f *holdfast.Factory, _ *pgxpool.Pool) error {
			host, port, _ := net.SplitHostPort(dead)
			cfg, err := pgxpool.ParseConfig(fmt.Sprintf("host=%s,%s port=%s,%s user=app dbname=orders sslmode=disable", host, host, port, port))
			if err != nil {
				t.Fatal(err)
			}
			return newPool(t, f, cfg).Ping(ctx)
		}, want{has: []string{"connect: connection refused (holdfast: 3 attempts in "}, verdict: "transient/conn-refused", retryErr: true}},
	}
	// One server for the pools whose server goes away, each pool of its
	// case's factory.
	g, err := pgtest.Start(ctx, pgtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	factories := make([]*holdfast.Factory, len(tests))
	logs := make([]*fakes.LogBuffer, len(tests))
	pools := make([]*pgxpool.Pool, len(tests))
	for i, tt := range tests {
		logs[i] = &fakes.LogBuffer{}
		opts := []holdfast.Option{holdfast.WithStartupPolicy(startup), holdfast.WithLogger(slog.New(slog.NewJSONHandler(logs[i], nil)))}
		if tt.gone != "" {
			// The connect's own retries against a refused port: with the
			// outage hold (on by default) a pool that connected once waits
			// for its server instead, and its error is the wait's
			// (TestOutageErrorOneLine).
			opts = append(opts, holdfast.WithOutage(holdfast.Outage{Off: true}))
		}
		factories[i] = newFactory(t, opts...)
		t.Cleanup(factories[i].Close)
		switch tt.gone {
		case "":
		case "sqldb":
			cfg, _ := poolConfig(t, g.DSN(), "sslmode=disable")
			db, err := sqldb.Open(ctx, factories[i], cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			pools[i] = sqldb.PoolOf(db)
			sqlDBs[pools[i]] = db
		default:
			cfg, _ := poolConfig(t, g.DSN(), "sslmode="+tt.gone)
			if pools[i], err = factories[i].NewPool(ctx, cfg); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pools[i].Close)
		}
	}
	if err := g.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, p := range pools {
		if p != nil {
			p.Reset() // the next statement connects
		}
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, logs := factories[i], logs[i]
			err := tt.err(t, f, pools[i])
			if err == nil {
				t.Fatal("no error")
			}
			text := err.Error()
			t.Logf("%T: %s", err, text)
			if strings.Contains(text, "\n") {
				t.Errorf("%d lines, want one", strings.Count(text, "\n")+1)
			}
			if !strings.HasPrefix(text, "failed to connect to `user=") {
				t.Errorf("does not start as pgx's error does")
			}
			for _, bad := range []string{"not dialed", "retry: gave up", "gave up after 1 attempt", "holdfast: first connection failed", "wrong-password", "right-password"} {
				if strings.Contains(text, bad) {
					t.Errorf("says %q", bad)
				}
			}
			if n := strings.Count(text, "(holdfast: "); n != 1 {
				t.Errorf("%d holdfast clauses, want 1", n)
			}
			for _, w := range tt.want.has {
				if !strings.Contains(text, w) {
					t.Errorf("does not say %q", w)
				}
			}
			if tt.want.hint != "" && !strings.Contains(text, tt.want.hint) {
				t.Errorf("the text lacks the hint %q", tt.want.hint)
			}
			var ce *holdfast.ConnectError
			if got := errors.As(err, &ce); tt.want.door && (!got || fmt.Sprintf("%T", err) != "*holdfast.ConnectError") {
				t.Errorf("%T, want a *holdfast.ConnectError", err)
			}
			if tt.want.door && tt.want.hint != "" && (ce == nil || !strings.Contains(ce.Hint, tt.want.hint)) {
				t.Errorf("Hint = %q, want it to say %q", hintOf(ce), tt.want.hint)
			}
			if tt.want.door && ce != nil && ce.Attempts < 1 {
				t.Errorf("Attempts = %d", ce.Attempts)
			}
			if v := f.Classify(err).String(); v != tt.want.verdict {
				t.Errorf("Classify = %s, want %s", v, tt.want.verdict)
			}
			var pce *pgconn.ConnectError
			if !errors.As(err, &pce) {
				t.Errorf("pgx's *pgconn.ConnectError is not reachable")
			}
			var pe *pgconn.PgError
			if tt.want.code != "" && (!errors.As(err, &pe) || pe.Code != tt.want.code) {
				t.Errorf("no *pgconn.PgError %s reachable", tt.want.code)
			}
			var re *retry.Error
			if got := errors.As(err, &re); got != tt.want.retryErr {
				t.Errorf("*retry.Error reachable: %v, want %v", got, tt.want.retryErr)
			}
			if hint, _ := json.Marshal(tt.want.hint); tt.want.hint != "" && strings.Contains(logs.String(), `"level":"ERROR"`) &&
				!strings.Contains(logs.String(), string(hint[1:len(hint)-1])) {
				t.Errorf("the ERROR line's hint differs from the error's:\n%s", logs.String())
			}
		})
	}
}

// A failed startup against a dead port writes at most one WARN line per
// round of the startup policy (issue 29, item 3): the rounds' connections
// retry their dials with DEBUG lines, and each round's WARN line carries
// the round's cause and attempts in one line. Before, each round also
// wrote the connection's own retrying and giving-up lines: 12 WARN lines
// for one failed NewPool.
func TestFailedStartupWarnsOncePerRound(t *testing.T) {
	t.Parallel()
	var logs fakes.LogBuffer
	startup := fastPolicy()
	startup.MaxAttempts = 4
	f := newFactory(t, holdfast.WithStartupPolicy(startup), holdfast.WithLogger(slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	t.Cleanup(f.Close)
	cfg, err := pgxpool.ParseConfig("postgres://app@" + deadAddr(t) + "/orders?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.NewPool(context.Background(), cfg); err == nil {
		t.Fatal("NewPool succeeded")
	}
	warn, debug := 0, 0
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		switch {
		case strings.Contains(l, `"level":"WARN"`):
			warn++
			if !strings.Contains(l, `"holdfast.layer":"startup"`) {
				t.Errorf("a WARN line that is not the startup loop's: %s", l)
			}
			if strings.Contains(l, `\n`) {
				t.Errorf("a WARN line whose error is several lines: %s", l)
			}
		case strings.Contains(l, `"level":"DEBUG"`) && strings.Contains(l, `"holdfast.layer":"connect"`):
			debug++
		}
	}
	if warn < 1 || warn > startup.MaxAttempts {
		t.Errorf("%d WARN lines for %d rounds, want 1..%d:\n%s", warn, startup.MaxAttempts, startup.MaxAttempts, logs.String())
	}
	if debug == 0 {
		t.Errorf("no DEBUG line of the rounds' own dial retries:\n%s", logs.String())
	}
}

// want is what TestOneFailureOneLine wants of one error.
type want struct {
	door     bool     // a *holdfast.ConnectError (else pgx's error, on a pool's own path)
	has      []string // in the text
	hint     string   // in Hint (door) and the text
	verdict  string   // Factory.Classify
	code     string   // a *pgconn.PgError reachable with this code
	retryErr bool     // a *retry.Error reachable (Start's loop's, the dial's)
}

// with returns w changed by edit.
func with(w want, edit func(*want)) want { edit(&w); return w }

// deadAddr returns a 127.0.0.1 address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func hintOf(ce *holdfast.ConnectError) string {
	if ce == nil {
		return ""
	}
	return ce.Hint
}
