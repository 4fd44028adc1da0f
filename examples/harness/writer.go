package harness

import (
	"context"
	"database/sql"
	"errors"
	"sync/atomic"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/retry"
	"github.com/holdfast-db/holdfast/sqldb"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Writer runs a write demo's transactions the way one client does. The
// holdfast clients (F set) run them with the factory's runner,
// Factory.RunTx on Pool, or sqldb.RunTx on DB for the
// database/sql client, which re-runs a transaction only when nothing
// committed; the plain client runs them with the retry loop an
// application writes by hand around an idempotent transaction (Retrier),
// on connections from Acquire.
type Writer struct {
	F       *holdfast.Factory
	Pool    *pgxpool.Pool
	DB      *sql.DB
	Acquire func(context.Context) (*pgxpool.Conn, error)
	Retrier *retry.Retrier
}

// Runner reports whether the client's transactions run through holdfast's
// runner.
func (w *Writer) Runner() bool { return w.F != nil }

// Insert is the transaction's write, stmt an INSERT of a row keyed by id:
// as it is for the holdfast clients, whose runner never applies a
// transaction twice (a second apply would fail: 23505), and with ON
// CONFLICT DO NOTHING for the plain client, whose retry loop re-runs a
// COMMIT whose answer was lost.
func (w *Writer) Insert(stmt string) string {
	if w.Runner() {
		return stmt
	}
	return stmt + " ON CONFLICT (id) DO NOTHING"
}

// Tx is what a transaction's work runs its statements on: a pgx.Tx, or a
// *sql.Tx for the database/sql client.
type Tx interface {
	Exec(ctx context.Context, sql string, args ...any) error
	QueryRow(ctx context.Context, sql string, args ...any) Row
}

// Row is the row of Tx.QueryRow.
type Row interface{ Scan(dest ...any) error }

type pgxTx struct{ tx pgx.Tx }

func (t pgxTx) Exec(ctx context.Context, sql string, args ...any) error {
	_, err := t.tx.Exec(ctx, sql, args...)
	return err
}

func (t pgxTx) QueryRow(ctx context.Context, sql string, args ...any) Row {
	return t.tx.QueryRow(ctx, sql, args...)
}

type sqlTx struct{ tx *sql.Tx }

func (t sqlTx) Exec(ctx context.Context, sql string, args ...any) error {
	_, err := t.tx.ExecContext(ctx, sql, args...)
	return err
}

func (t sqlTx) QueryRow(ctx context.Context, sql string, args ...any) Row {
	return t.tx.QueryRowContext(ctx, sql, args...)
}

// Do runs work as one request, in a transaction; r.Attempts counts its
// runs. When holdfast's runner says the COMMIT's outcome is unknown
// (holdfast.ErrOutcomeUnknown: sent, its answer lost), Do settles it as an
// application with an idempotency key does: it looks the key up on the
// writer in a new transaction through the runner (found, in a
// transaction); found, the request is done; absent, the transaction did
// not commit, and it runs again (a plain INSERT: had it committed, the
// new run would fail with 23505, not apply twice). r.Unknown records it.
func (w *Writer) Do(ctx context.Context, r *Record, work func(context.Context, Tx) error, found func(context.Context, Tx) (bool, error)) error {
	attempt := func() { r.Attempts++ }
	err := w.run(ctx, attempt, work)
	if !errors.Is(err, holdfast.ErrOutcomeUnknown) {
		return err
	}
	r.Unknown = true
	var done bool
	if err := w.run(ctx, func() {}, func(ctx context.Context, tx Tx) (err error) { done, err = found(ctx, tx); return err }); err != nil {
		return err
	}
	if done {
		return nil
	}
	return w.run(ctx, attempt, work)
}

// run runs work in a transaction, the client's way, calling attempt at
// the start of each run (the runner's, or the retry loop's, before its
// Acquire).
func (w *Writer) run(ctx context.Context, attempt func(), work func(context.Context, Tx) error) error {
	switch {
	case w.F != nil && w.DB != nil:
		return sqldb.RunTx(ctx, w.F, w.DB, nil, func(tx *sql.Tx) error { attempt(); return work(ctx, sqlTx{tx}) })
	case w.F != nil:
		return w.F.RunTx(ctx, w.Pool, pgx.TxOptions{}, func(tx pgx.Tx) error { attempt(); return work(ctx, pgxTx{tx}) })
	}
	return w.Retrier.Do(ctx, func(ctx context.Context) error {
		attempt()
		conn, err := w.Acquire(ctx)
		if err != nil {
			return err
		}
		defer conn.Release()
		return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return work(ctx, pgxTx{tx}) })
	})
}

// Classifier classifies errors: a *classify.Classifier, or a
// *holdfast.Factory (its rules, then the engine's and the built-in ones).
type Classifier interface {
	Classify(err error) classify.Verdict
}

// ErrorKey is the key of err in a demo's table: its SQLSTATE, else its
// class and reason by c.
func ErrorKey(c Classifier, err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return c.Classify(err).String()
}

// WriteErrorKey is the key of a write demo's failed request: holdfast's
// reason when the outcome of its COMMIT is unknown (and could not be
// resolved), else [ErrorKey].
func WriteErrorKey(c Classifier, err error) string {
	if errors.Is(err, holdfast.ErrOutcomeUnknown) {
		return classify.ReasonOutcomeUnknown
	}
	return ErrorKey(c, err)
}

// RetryPolicy is a write demo's retry around each transaction: attempts
// attempts at most, 50 ms apart at first, each bounded by the default
// AttemptTimeout (3 s), all within timeout.
func RetryPolicy(attempts int, timeout time.Duration) retry.Policy {
	p := retry.Default()
	p.MaxAttempts = attempts
	p.InitialInterval = 50 * time.Millisecond
	p.MaxElapsed = timeout
	return p
}

// WriteDDL creates the table of a [WriteClient] (fmt its name in): public,
// keyed by id.
const WriteDDL = `CREATE TABLE IF NOT EXISTS public.%s (
	id     bigint PRIMARY KEY,
	worker integer NOT NULL,
	at     timestamptz NOT NULL DEFAULT now()
)`

// WriteClient is a client of a write demo that runs its transactions as w
// says (set before the workload starts): each request inserts a row with
// a new id into table (in public, made by [WriteDDL]), reads it back with
// the address of the server answering (which instance answered, and at
// COMMIT acknowledged, the transaction) and commits; a request whose
// COMMIT's outcome is unknown is resolved by looking the id up on the
// writer ([Writer.Do]).
func WriteClient(name, table string, w *Writer) *Client {
	table = "public." + table
	const server = "host(inet_server_addr()) || ':' || inet_server_port()"
	readBack := "SELECT " + server + " FROM " + table + " WHERE id = $1"
	lookup := "SELECT EXISTS (SELECT 1 FROM " + table + " WHERE id = $1), " + server
	var ids atomic.Int64
	return &Client{Name: name, Writer: w, Request: func(ctx context.Context, worker int, r *Record) error {
		r.ID = ids.Add(1)
		insert := w.Insert("INSERT INTO " + table + " (id, worker) VALUES ($1, $2)")
		return w.Do(ctx, r, func(ctx context.Context, tx Tx) error {
			if err := tx.Exec(ctx, insert, r.ID, worker); err != nil {
				return err
			}
			return tx.QueryRow(ctx, readBack, r.ID).Scan(&r.Server)
		}, func(ctx context.Context, tx Tx) (found bool, err error) {
			err = tx.QueryRow(ctx, lookup, r.ID).Scan(&found, &r.Server)
			return found, err
		})
	}}
}
