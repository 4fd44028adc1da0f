package holdfast

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
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
// documentation's "Transactions, and what was in flight"). Get one with
// [Factory.DBTX]; it is safe for concurrent use.
type DBTX struct {
	f    *Factory
	pool *pgxpool.Pool
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
	defer c.Release()
	return c.Exec(ctx, sql, args...)
}

// Query acquires a connection and runs sql on it; the connection is
// released when the rows are closed or read to the end.
func (d *DBTX) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	c, err := d.f.Acquire(ctx, d.pool)
	if err != nil {
		return nil, err
	}
	rows, err := c.Query(ctx, sql, args...)
	if err != nil {
		c.Release()
		return nil, err
	}
	return &releasingRows{Rows: rows, c: c}, nil
}

// QueryRow acquires a connection and runs sql on it; the connection is
// released by the row's Scan. An acquire that fails is the error of Scan.
func (d *DBTX) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c, err := d.f.Acquire(ctx, d.pool)
	if err != nil {
		return errRow{err}
	}
	return &releasingRow{row: c.QueryRow(ctx, sql, args...), c: c}
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

// releasingRows releases its connection once the rows are done.
type releasingRows struct {
	pgx.Rows
	c    *pgxpool.Conn
	once sync.Once
}

func (r *releasingRows) release() { r.once.Do(r.c.Release) }

func (r *releasingRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.release() // pgx closed the rows
	return false
}

func (r *releasingRows) Close() {
	r.Rows.Close()
	r.release()
}

type releasingRow struct {
	row pgx.Row
	c   *pgxpool.Conn
}

func (r *releasingRow) Scan(dest ...any) error {
	defer r.c.Release()
	return r.row.Scan(dest...)
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
