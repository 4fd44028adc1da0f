package faults_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/fakes"
	"github.com/holdfast-db/holdfast/sqldb"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// txRig is a table on the test server and a holdfast pool that reaches
// the server through a proxy (to lose a COMMIT's answer), with an admin
// connection straight to the server (to count rows, terminate backends).
type txRig struct {
	t     *testing.T
	table string
	proxy *proxy
	f     *holdfast.Factory
	pool  *pgxpool.Pool
	admin *pgx.Conn
	dsn   string
}

func newTxRig(t *testing.T, columns string) *txRig {
	t.Helper()
	dsn, addr := serverAddr(t)
	r := &txRig{t: t, table: tableName("tx"), proxy: newProxy(t, addr), dsn: dsn}
	var err error
	if r.admin, err = pgx.Connect(context.Background(), dsn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.admin.Close(context.Background()) })
	r.exec("CREATE TABLE " + r.table + " (" + columns + ")")
	r.f, _ = newHoldfast(t, testPolicy())
	r.pool = holdfastPool(t, r.f, configAt(t, dsn, r.proxy.addr, nil, "&pool_max_conns=4"))
	return r
}

func (r *txRig) exec(sql string, args ...any) {
	r.t.Helper()
	if _, err := r.admin.Exec(context.Background(), sql, args...); err != nil {
		r.t.Fatal(err)
	}
}

// rows returns how many rows the table has, read on the server itself.
func (r *txRig) rows() int {
	r.t.Helper()
	var n int
	if err := r.admin.QueryRow(context.Background(), "SELECT count(*) FROM "+r.table).Scan(&n); err != nil {
		r.t.Fatal(err)
	}
	return n
}

// loseAnswers makes the proxy drop everything the server sends from now
// on, and close the connections 300 ms later: a request that reached the
// server has its answer lost.
func (r *txRig) loseAnswers() {
	name := r.proxy.toxic(r.t, "timeout", "downstream", `"timeout":300`)
	r.t.Cleanup(func() { _ = r.proxy.p.Toxics.RemoveToxic(context.Background(), name) })
}

// A transaction whose connection breaks before COMMIT was sent is run
// again, and commits exactly once: the server rolled the first run back.
// Its backend is terminated either between two of its statements, or
// while it is idle between its work and COMMIT (pg_terminate_backend
// waits until it is gone: the server answers COMMIT, if at all, with
// FATAL 57P01).
func TestTxBrokenBeforeCommitIsRerun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// work runs after the run's INSERT; first: the first run, whose
		// backend it terminates.
		work func(ctx context.Context, t *testing.T, r *txRig, tx pgx.Tx, first bool) error
	}{
		{"cut between statements", func(ctx context.Context, t *testing.T, r *txRig, tx pgx.Tx, first bool) error {
			if first {
				r.exec("SELECT pg_terminate_backend($1)", tx.Conn().PgConn().PID())
			}
			_, err := tx.Exec(ctx, "SELECT 1")
			return err
		}},
		{"terminated before COMMIT", func(ctx context.Context, t *testing.T, r *txRig, tx pgx.Tx, first bool) error {
			if first {
				var gone bool
				if err := r.admin.QueryRow(ctx, "SELECT pg_terminate_backend($1, 10000)", tx.Conn().PgConn().PID()).Scan(&gone); err != nil || !gone {
					t.Errorf("pg_terminate_backend = %v, %v", gone, err)
				}
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newTxRig(t, "id int")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var runs atomic.Int64
			err := r.f.RunTx(ctx, r.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, "INSERT INTO "+r.table+" VALUES (1)"); err != nil {
					return err
				}
				return tc.work(ctx, t, r, tx, runs.Add(1) == 1)
			})
			t.Logf("MEASURED %s: %d runs, %v", tc.name, runs.Load(), err)
			if err != nil || runs.Load() != 2 {
				t.Fatalf("BeginTxFunc = %v after %d runs, want success after 2", err, runs.Load())
			}
			if n := r.rows(); n != 1 {
				t.Errorf("%d rows, want 1: the first run must not commit", n)
			}
		})
	}
}

// A BEGIN that could not connect — every attempt of its connect refused,
// the connect layer gave up — is run again, as a request-level retry
// would: nothing was sent. The function runs once, after the fourth dial.
func TestTxBeginConnectGaveUpIsRerun(t *testing.T) {
	t.Parallel()
	dsn, addr := serverAddr(t)
	f, _ := newHoldfast(t, testPolicy())
	cfg := configAt(t, dsn, addr, nil, "")
	refused := fakes.NewConnector(addr, fakes.Refused().Times(3)) // the connect's 3 attempts
	cfg.ConnConfig.DialFunc = refused.Dial
	pool := holdfastPool(t, f, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	runs := 0
	err := f.RunTx(ctx, pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		runs++
		_, err := tx.Exec(ctx, "SELECT 1")
		return err
	})
	t.Logf("MEASURED a BEGIN whose connect gave up: %d runs of the function, %d dials, %v", runs, refused.Attempts(), err)
	if err != nil || runs != 1 || refused.Attempts() != 4 {
		t.Fatalf("BeginTxFunc = %v, %d runs, %d dials; want success, 1 run, 4 dials", err, runs, refused.Attempts())
	}
}

// The same through database/sql, which connects inside the run (at
// db.BeginTx): a connect the connect layer gave up on is run again (the
// outage layer off). With the outage layer (on by default) the pool,
// which connected before, finds its database down at that connect, and
// the connect waits for it instead of giving up: the checks are the only
// dials meanwhile (two refused, then one that connects: back), the
// waiting connect's own dial being the check of its step (internal/outage
// Config.Lead), so the check that connects is the pool's connection, no
// second handshake after it; and the BEGIN goes through at the first run.
func TestSQLTxBeginConnectGaveUpIsRerun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		opts  []holdfast.Option
		dials int
	}{
		{"outage layer off", []holdfast.Option{holdfast.WithOutage(holdfast.Outage{Off: true})}, 5}, // 1 + the connect's 3 + the re-run's 1
		{"outage layer on", nil, 5}, // 1 + the connect's 1 + 2 refused checks + the check that connects, the pool's
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dsn, addr := serverAddr(t)
			f, _ := newHoldfast(t, testPolicy(), tc.opts...)
			cfg := configAt(t, dsn, addr, nil, "")
			dials := fakes.NewConnector(addr, fakes.Connect(), fakes.Refused().Times(3)) // the pool's first connection, then 3 refused
			cfg.ConnConfig.DialFunc = dials.Dial
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			pool, err := f.NewPool(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			pool.Reset() // the next BEGIN connects
			db := sqldb.OpenDB(pool)
			t.Cleanup(func() { db.Close() })
			runs := 0
			err = sqldb.RunTx(ctx, f, db, nil, func(tx *sql.Tx) error {
				runs++
				_, err := tx.ExecContext(ctx, "SELECT 1")
				return err
			})
			t.Logf("MEASURED database/sql, a BEGIN whose connect gave up, %s: %d runs of the function, %d dials, %v", tc.name, runs, dials.Attempts(), err)
			if err != nil || runs != 1 || dials.Attempts() != tc.dials {
				t.Fatalf("sqldb.RunTx = %v, %d runs, %d dials; want success, 1 run, %d dials", err, runs, dials.Attempts(), tc.dials)
			}
		})
	}
}

// A COMMIT that reached the server and whose answer was lost (the proxy
// drops what the server sends once COMMIT is on its way): the server
// committed. BeginTxFunc returns ErrOutcomeUnknown, Fatal, and does not
// run the function again: the row is there once. The control, a naive
// retry loop over pgx.BeginTxFunc (retry when it fails), applies it twice.
func TestTxCommitAnswerLostIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	for _, naive := range []bool{false, true} {
		name := "holdfast"
		if naive {
			name = "control: naive retry of pgx.BeginTxFunc"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := newTxRig(t, "id int")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var runs atomic.Int64
			fn := func(tx pgx.Tx) error {
				runs.Add(1)
				if _, err := tx.Exec(ctx, "INSERT INTO "+r.table+" VALUES (1)"); err != nil {
					return err
				}
				if runs.Load() == 1 {
					r.loseAnswers() // COMMIT comes next
				}
				return nil
			}
			var err error
			if naive {
				for range 3 {
					if err = pgx.BeginTxFunc(ctx, r.pool, pgx.TxOptions{}, fn); err == nil {
						break
					}
					r.proxy.p.Toxics.ResetToxics(context.Background())
				}
			} else {
				err = r.f.RunTx(ctx, r.pool, pgx.TxOptions{}, fn)
			}
			n := r.rows()
			t.Logf("MEASURED %s: %d runs, %d rows, %v", name, runs.Load(), n, err)
			if naive {
				if n < 2 {
					t.Errorf("control: %d rows: the fault does not bite", n)
				}
				return
			}
			var oe *holdfast.OutcomeUnknownError
			if !errors.Is(err, holdfast.ErrOutcomeUnknown) || !errors.As(err, &oe) || oe.Statement != "COMMIT" {
				t.Errorf("BeginTxFunc = %v, want an *OutcomeUnknownError for the COMMIT", err)
			}
			if v := r.f.Classify(err); v.Class != classify.Fatal || v.Reason != classify.ReasonOutcomeUnknown {
				t.Errorf("Classify = %v, want fatal %s", v, classify.ReasonOutcomeUnknown)
			}
			if runs.Load() != 1 || n != 1 {
				t.Errorf("%d runs, %d rows: want the function run once and the row there once", runs.Load(), n)
			}
		})
	}
}

// Two SERIALIZABLE transactions that conflict (each reads the highest n and
// inserts the next): one fails with 40001, is run again, and both commit,
// one after the other.
func TestTxSerializationFailureIsRerun(t *testing.T) {
	t.Parallel()
	r := newTxRig(t, "n int")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var read sync.WaitGroup
	read.Add(2) // both first runs read before either writes
	var runs atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() {
			first := true
			errs[i] = r.f.RunTx(ctx, r.pool, pgx.TxOptions{IsoLevel: pgx.Serializable}, func(tx pgx.Tx) error {
				runs.Add(1)
				var n int
				if err := tx.QueryRow(ctx, "SELECT coalesce(max(n), 0) FROM "+r.table).Scan(&n); err != nil {
					return err
				}
				if first {
					first = false
					read.Done()
					read.Wait()
				}
				_, err := tx.Exec(ctx, "INSERT INTO "+r.table+" VALUES ($1)", n+1)
				return err
			})
		})
	}
	wg.Wait()
	t.Logf("MEASURED two conflicting serializable transactions: %d runs, errors %v", runs.Load(), errs)
	for _, err := range errs {
		if err != nil {
			t.Errorf("BeginTxFunc = %v, want both to commit", err)
		}
	}
	if runs.Load() < 3 || r.rows() != 2 {
		t.Errorf("%d runs, %d rows: want a re-run and both rows", runs.Load(), r.rows())
	}
	var distinct int
	if err := r.admin.QueryRow(ctx, "SELECT count(DISTINCT n) FROM "+r.table).Scan(&distinct); err != nil || distinct != 2 {
		t.Errorf("%d distinct values (%v): the transactions did not serialize", distinct, err)
	}
}

// A function that returns an error of its own runs once, and its error is
// returned as it is.
func TestTxOwnErrorRunsOnce(t *testing.T) {
	t.Parallel()
	r := newTxRig(t, "id int")
	mine := errors.New("insufficient funds")
	var runs atomic.Int64
	err := r.f.RunTx(context.Background(), r.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		runs.Add(1)
		if _, err := tx.Exec(context.Background(), "INSERT INTO "+r.table+" VALUES (1)"); err != nil {
			return err
		}
		return mine
	})
	if !errors.Is(err, mine) || runs.Load() != 1 || r.rows() != 0 {
		t.Errorf("BeginTxFunc = %v after %d runs, %d rows; want the function's error, one run, rolled back", err, runs.Load(), r.rows())
	}
}

// An autocommit INSERT whose answer is lost committed on the server: the
// pool's Exec returns an error that is Fatal "outcome-unknown", not a
// Transient "conn-closed" that a caller would retry (and apply twice).
// With arguments (pgx's extended protocol) it is an *OutcomeUnknownError;
// without (the simple protocol), pgx reports pgconn.ErrConnClosed "after
// a request may already have been sent", which the classifier reads the
// same way (pgx drops the connection's own error on that path).
func TestAutocommitAnswerLostIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []any
	}{
		{"extended protocol", []any{pgx.QueryExecModeExec, 1}}, // Parse, Bind, Execute in one round trip
		{"simple protocol", []any{pgx.QueryExecModeSimpleProtocol, 1}},
		// pgx's default mode prepares first: a lost answer to the
		// Prepare leaves nothing run, and the error is not unknown.
		{"prepare", []any{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newTxRig(t, "id int")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := r.pool.Ping(ctx); err != nil { // a connection, before the answers are lost
				t.Fatal(err)
			}
			r.loseAnswers()
			_, err := r.pool.Exec(ctx, "INSERT INTO "+r.table+" VALUES ($1)", tc.args...)
			t.Logf("MEASURED an autocommit INSERT whose answer is lost (%s): %v; %d rows", tc.name, err, r.rows())
			if tc.name == "prepare" {
				if errors.Is(err, holdfast.ErrOutcomeUnknown) || r.rows() != 0 {
					t.Errorf("Exec = %v with %d rows: a lost Prepare runs nothing", err, r.rows())
				}
				return
			}
			if tc.name == "extended protocol" && !errors.Is(err, holdfast.ErrOutcomeUnknown) {
				t.Errorf("Exec = %v, want ErrOutcomeUnknown", err)
			}
			if v := r.f.Classify(err); v.Retryable() || v.Reason != classify.ReasonOutcomeUnknown {
				t.Errorf("Classify = %v, want fatal %s", v, classify.ReasonOutcomeUnknown)
			}
			if n := r.rows(); n != 1 {
				t.Errorf("%d rows, want 1 (the server committed it)", n)
			}
		})
	}
}

// The database/sql runner through sqldb: a transaction cut before COMMIT
// is run again and commits once; a COMMIT whose answer is lost is
// ErrOutcomeUnknown after one run; a function's own error runs once.
func TestSQLTxRunner(t *testing.T) {
	t.Parallel()
	open := func(t *testing.T, r *txRig) *sql.DB {
		cfg := configAt(t, r.dsn, r.proxy.addr, nil, "&pool_max_conns=4")
		db, err := sqldb.Open(context.Background(), r.f, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	t.Run("cut before COMMIT", func(t *testing.T) {
		t.Parallel()
		r := newTxRig(t, "id int")
		db := open(t, r)
		var runs atomic.Int64
		err := sqldb.RunTx(context.Background(), r.f, db, nil, func(tx *sql.Tx) error {
			if _, err := tx.Exec("INSERT INTO " + r.table + " VALUES (1)"); err != nil {
				return err
			}
			if runs.Add(1) == 1 {
				var pid int
				if err := tx.QueryRow("SELECT pg_backend_pid()").Scan(&pid); err != nil {
					return err
				}
				r.exec("SELECT pg_terminate_backend($1)", pid)
			}
			_, err := tx.Exec("SELECT 1")
			return err
		})
		if err != nil || runs.Load() != 2 || r.rows() != 1 {
			t.Errorf("BeginTxFunc = %v after %d runs, %d rows; want success after 2, one row", err, runs.Load(), r.rows())
		}
	})
	t.Run("COMMIT answer lost", func(t *testing.T) {
		t.Parallel()
		r := newTxRig(t, "id int")
		db := open(t, r)
		var runs atomic.Int64
		err := sqldb.RunTx(context.Background(), r.f, db, nil, func(tx *sql.Tx) error {
			runs.Add(1)
			if _, err := tx.Exec("INSERT INTO " + r.table + " VALUES (1)"); err != nil {
				return err
			}
			if runs.Load() == 1 {
				r.loseAnswers()
			}
			return nil
		})
		if !errors.Is(err, holdfast.ErrOutcomeUnknown) || runs.Load() != 1 || r.rows() != 1 {
			t.Errorf("BeginTxFunc = %v after %d runs, %d rows; want ErrOutcomeUnknown after one run, one row", err, runs.Load(), r.rows())
		}
	})
	t.Run("own error", func(t *testing.T) {
		t.Parallel()
		r := newTxRig(t, "id int")
		db := open(t, r)
		mine := errors.New("mine")
		var runs atomic.Int64
		err := sqldb.RunTx(context.Background(), r.f, db, nil, func(*sql.Tx) error { runs.Add(1); return mine })
		if !errors.Is(err, mine) || runs.Load() != 1 {
			t.Errorf("BeginTxFunc = %v after %d runs, want the function's error after one", err, runs.Load())
		}
	})
}
