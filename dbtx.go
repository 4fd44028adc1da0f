package holdfast

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/internal/conn"
	"github.com/holdfast-db/holdfast/internal/obs"
	"github.com/holdfast-db/holdfast/retry"
)

// DBTX runs statements on a pool the way *pgxpool.Pool does, but takes
// each connection through [Factory.Acquire]: a connection refused with an
// authentication failure (28P01, 28000) is retried once with a freshly
// fetched password, and a transient connect failure that the connect
// layer gave up on is retried under the factory's policy and budget. It
// has the methods of sqlc's DBTX interface (Exec, Query, QueryRow,
// CopyFrom, SendBatch), so generated code takes it in place of the pool,
// and BeginTx, so that [Factory.RunTx] runs transactions on it:
//
//	q := db.New(f.DBTX(pool)) // sqlc's db.New(DBTX)
//
// Only the connection is retried. A statement that was sent is never sent
// again: its failure is returned as pgx returns it (see the package
// documentation's "Transactions, and what was in flight"), but for the
// runner of a ReadWrite's readers ([ReadWrite.Read]), which runs a read
// whose standby's connection died once more. Get one with [Factory.DBTX];
// it is safe for concurrent use.
type DBTX struct {
	f    *Factory
	pool *pgxpool.Pool
	// reread, for ReadWrite.Read's runner, re-runs a read (Query,
	// QueryRow) lost on a server in hot standby once; nil: never.
	reread *retry.Retrier
}

// DBTX returns the statement runner of pool (see [DBTX]). pool should be
// one this factory configured; another pool's connections are acquired
// with Factory.Acquire's retry all the same.
func (f *Factory) DBTX(pool *pgxpool.Pool) *DBTX { return &DBTX{f: f, pool: pool} }

// Exec acquires a connection, runs sql on it and releases it.
func (d *DBTX) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c, err := d.f.Acquire(ctx, d.pool)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := c.Exec(ctx, sql, args...)
	if err != nil {
		err = lostOnStandby(c.Conn(), err)
	}
	c.Release()
	return tag, err
}

// Query acquires a connection and runs sql on it; the connection is
// released when the rows are closed or read to the end. On ReadWrite.Read's
// runner, a read whose standby's connection died before its first row
// runs once more (see [ReadWrite.Read]).
func (d *DBTX) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	rows, again, err := d.query(ctx, sql, args)
	if again {
		return d.requery(ctx, sql, args, err)
	}
	if err != nil {
		return nil, err
	}
	if d.reread != nil {
		rows.d, rows.ctx, rows.sql, rows.args = d, ctx, sql, args
	}
	return rows, nil
}

// query is one run of Query; again says that its failure makes the read
// run once more (rereads).
func (d *DBTX) query(ctx context.Context, sql string, args []any) (_ *releasingRows, again bool, _ error) {
	c, err := d.f.Acquire(ctx, d.pool)
	if err != nil {
		return nil, false, err
	}
	rows, err := c.Query(ctx, sql, args...)
	if err != nil {
		err = lostOnStandby(c.Conn(), err)
		again = d.rereads(ctx, sql, c.Conn(), err) // before the release: c may be handed out again
		c.Release()
		return nil, again, err
	}
	return &releasingRows{Rows: rows, c: c, conn: c.Conn()}, false, nil
}

// QueryRow acquires a connection and runs sql on it; the connection is
// released by the row's Scan. An acquire that fails is the error of Scan.
// On ReadWrite.Read's runner, a read whose standby's connection died runs
// once more (see [ReadWrite.Read]).
func (d *DBTX) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c, err := d.f.Acquire(ctx, d.pool)
	if err != nil {
		return errRow{err}
	}
	r := &releasingRow{row: c.QueryRow(ctx, sql, args...), c: c}
	if d.reread != nil {
		r.d, r.ctx, r.sql, r.args = d, ctx, sql, args
	}
	return r
}

// rereads reports whether a read that failed with err on c runs once
// more: on ReadWrite.Read's runner, a read (conn.IsRead) whose connection
// to a server in hot standby died (c is closed: its answer lost, a
// conn.StandbyLostError, or the failure came before it ran, while it was
// prepared or sent), while ctx lasts. Nothing commits on a standby, so
// whatever of it reached the server, running it again runs it once. Never
// a write, never after a writer's failure. c must not be released yet.
func (d *DBTX) rereads(ctx context.Context, sql string, c *pgx.Conn, err error) bool {
	if d.reread == nil || err == nil || c == nil || ctx.Err() != nil {
		return false
	}
	return c.PgConn().IsClosed() && conn.OnStandby(c) && conn.IsRead(sql)
}

// again runs op, the read once more, after first, its failure: through
// the reader runner's retrier (one re-run, the retry budget, holdfast.layer
// "read": a WARN line and holdfast.retries), on a new connection that the
// pool's routing chooses (the one that died was closed).
func (d *DBTX) again(ctx context.Context, first error, op func(context.Context) error) error {
	ctx = obs.WithTarget(ctx, conn.OfPool(d.pool).Target()) // the line names the pool
	r := *d.reread
	once := false
	r.Classify = func(err error) classify.Verdict {
		v := d.f.Classify(err)
		if !once && !v.Retryable() {
			// The first failure: rereads decided (a FATAL as the standby
			// went away, say); the re-run's failure is classified as it is.
			v = classify.Verdict{Class: classify.Transient, Reason: classify.ReasonStandbyLost}
		}
		once = true
		return v
	}
	return d.f.e.RetryFrom(ctx, &r, conn.LayerRead, first, op)
}

// requery runs a Query once more after first, its failure (rereads):
// its rows are read up to the first, so that a second loss is seen here.
func (d *DBTX) requery(ctx context.Context, sql string, args []any, first error) (pgx.Rows, error) {
	var out *releasingRows
	err := d.again(ctx, first, func(ctx context.Context) error {
		rows, _, err := d.query(ctx, sql, args) // its rows run no re-run of their own (no d)
		if err != nil {
			return err
		}
		if rows.Rows.Next() {
			rows.primed, out = true, rows
			return nil
		}
		err = lostOnStandby(rows.conn, rows.Rows.Err())
		rows.release()
		if err != nil {
			return err
		}
		out = rows // no row
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// CopyFrom acquires a connection, copies rowSrc into tableName and
// releases it.
func (d *DBTX) CopyFrom(ctx context.Context, tableName pgx.Identifier, columnNames []string, rowSrc pgx.CopyFromSource) (int64, error) {
	c, err := d.f.Acquire(ctx, d.pool)
	if err != nil {
		return 0, err
	}
	defer c.Release()
	return c.CopyFrom(ctx, tableName, columnNames, rowSrc)
}

// SendBatch acquires a connection and sends b on it; the connection is
// released when the results are closed. An acquire that fails is the
// error of every result.
func (d *DBTX) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	c, err := d.f.Acquire(ctx, d.pool)
	if err != nil {
		return pgx.FailedBatchResults(b, err)
	}
	br := c.SendBatch(ctx, b)
	if tx := br.Tx(); tx != nil { // the batch began a transaction: it owns the connection
		return &releasingBatch{BatchResults: br, tx: &releasingTx{Tx: tx, c: c}}
	}
	return &releasingBatch{BatchResults: br, c: c}
}

// BeginTx acquires a connection and begins a transaction on it; the
// connection is released when the transaction commits or rolls back.
// For a transaction re-run when it provably did not commit, pass d to
// [Factory.RunTx].
func (d *DBTX) BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	c, err := d.f.Acquire(ctx, d.pool)
	if err != nil {
		return nil, err
	}
	tx, err := c.BeginTx(ctx, opts)
	if err != nil {
		c.Release()
		return nil, err
	}
	return &releasingTx{Tx: tx, c: c}, nil
}

// releasingRows releases its connection once the rows are done. On
// ReadWrite.Read's runner (d set), a read whose standby's connection died
// before its first row runs once more, and the rows go on with the new
// run's.
type releasingRows struct {
	pgx.Rows
	c        *pgxpool.Conn
	conn     *pgx.Conn // c's, for lostOnStandby after c's release
	released bool      // c was released (rows are used by one goroutine)

	d      *DBTX // nil: no re-run (not a reader's runner, or re-run already)
	ctx    context.Context
	sql    string
	args   []any
	seen   bool  // a row was returned: never re-run
	primed bool  // a re-run's first row is read and not yet returned
	err    error // the re-run's failure
}

func (r *releasingRows) release() {
	if !r.released {
		r.released = true
		r.c.Release()
	}
}

func (r *releasingRows) Next() bool {
	if r.primed {
		r.primed, r.seen = false, true
		return true
	}
	if r.Rows.Next() {
		r.seen = true
		return true
	}
	d, err := r.d, error(nil)
	r.d = nil // one re-run at most
	if d != nil && (r.seen || r.err != nil || !d.rereads(r.ctx, r.sql, r.conn, r.Err())) {
		d = nil // decided before the release: the connection may be handed out again
	}
	if d != nil {
		err = r.Err()
	}
	r.release() // pgx closed the rows
	if d == nil {
		return false
	}
	rows, err := d.requery(r.ctx, r.sql, r.args, err)
	if err != nil {
		r.err = err
		return false
	}
	next := rows.(*releasingRows)
	r.Rows, r.c, r.conn, r.released, r.primed = next.Rows, next.c, next.conn, next.released, next.primed
	return r.Next()
}

// Err returns the rows' error: the re-run's when one failed; a loss on a
// standby marked as such (lostOnStandby).
func (r *releasingRows) Err() error {
	if r.err != nil {
		return r.err
	}
	return lostOnStandby(r.conn, r.Rows.Err())
}

func (r *releasingRows) Close() {
	r.Rows.Close()
	r.release()
}

// releasingRow releases its connection in Scan. On ReadWrite.Read's
// runner (d set), a read whose standby's connection died runs once more.
type releasingRow struct {
	row pgx.Row
	c   *pgxpool.Conn

	d    *DBTX // nil: no re-run
	ctx  context.Context
	sql  string
	args []any
}

func (r *releasingRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if err != nil {
		err = lostOnStandby(r.c.Conn(), err)
	}
	again := r.d != nil && r.d.rereads(r.ctx, r.sql, r.c.Conn(), err) // before the release: the connection may be handed out again
	r.c.Release()
	if again {
		d := r.d
		return d.again(r.ctx, err, func(ctx context.Context) error {
			c, err := d.f.Acquire(ctx, d.pool)
			if err != nil {
				return err
			}
			err = c.QueryRow(ctx, r.sql, r.args...).Scan(dest...)
			if err != nil {
				err = lostOnStandby(c.Conn(), err)
			}
			c.Release()
			return err
		})
	}
	return err
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// releasingBatch releases its connection at Close, unless the batch began
// a transaction (Batch.BeginTx): then the transaction releases it.
type releasingBatch struct {
	pgx.BatchResults
	c    *pgxpool.Conn // nil when tx owns it
	tx   *releasingTx
	once sync.Once
}

func (b *releasingBatch) Close() error {
	err := b.BatchResults.Close()
	if b.c != nil {
		b.once.Do(b.c.Release)
	}
	return err
}

func (b *releasingBatch) Tx() pgx.Tx {
	if b.tx == nil {
		return nil
	}
	return b.tx
}

type releasingTx struct {
	pgx.Tx
	c    *pgxpool.Conn
	once sync.Once
}

func (t *releasingTx) release() { t.once.Do(t.c.Release) }

func (t *releasingTx) Commit(ctx context.Context) error {
	err := t.Tx.Commit(ctx)
	t.release()
	return err
}

func (t *releasingTx) Rollback(ctx context.Context) error {
	err := t.Tx.Rollback(ctx)
	t.release()
	return err
}
