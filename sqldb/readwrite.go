package sqldb

import (
	"context"
	"database/sql"
	"errors"

	"github.com/holdfast-db/holdfast"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ReadWrite is holdfast's read/write splitting (holdfast.ReadWrite) for
// database/sql: a *sql.DB on the cluster's writer (cluster) endpoint and
// one on its reader endpoint, over two pools of one factory, which share
// the cluster's failover monitor with WithFailover. Build one with
// [OpenReadWrite].
//
//	rw, err := sqldb.OpenReadWrite(ctx, f, cfg, nil, holdfast.PoolName("orders"))
//	defer rw.Close()
//	_, err = rw.Writer().ExecContext(ctx, "INSERT ...")            // the writer
//	err = rw.WriteTx(ctx, nil, func(tx *sql.Tx) error { ... })     // the writer, re-run when it provably did not commit
//	rows, err := rw.Read(ctx).QueryContext(ctx, "SELECT ...")     // a reader (the writer under holdfast.ReadYourWrites)
//	err = rw.ReadTx(ctx, nil, func(tx *sql.Tx) error { ... })      // a read-only transaction on a reader
//
// A read that must see the caller's own writes goes to the writer: mark
// its context with holdfast.ReadYourWrites (a reader trails the writer
// by its replica lag). For pgx stdlib options, build a holdfast.ReadWrite
// and call [OpenDB] on each of its pools instead.
type ReadWrite struct {
	f              *holdfast.Factory
	writer, reader *sql.DB
}

// OpenReadWrite builds the two pools with f.NewReadWrite (writer: the
// cluster endpoint's config; reader: the reader endpoint's, or nil to
// derive it, see holdfast.Factory.ReaderConfig; opts apply to both, a
// PoolName names the reader pool name+"-ro") and returns a *sql.DB over
// each, as [Open] does: closing one closes its pool. It returns
// NewReadWrite's errors.
func OpenReadWrite(ctx context.Context, f *holdfast.Factory, writer, reader *pgxpool.Config, opts ...holdfast.PoolOption) (*ReadWrite, error) {
	if f == nil {
		return nil, &ConfigError{Pkg: "sqldb", Field: "factory", Why: "nil: build one with holdfast.New"}
	}
	rw, err := f.NewReadWrite(ctx, writer, reader, opts...)
	if err != nil {
		return nil, err
	}
	owned := func(pool *pgxpool.Pool) *sql.DB { return open(newConnector(pool, true, f, nil)) }
	return &ReadWrite{f: f, writer: owned(rw.Writer()), reader: owned(rw.Reader())}, nil
}

// Writer returns the *sql.DB on the writer (cluster) endpoint.
func (rw *ReadWrite) Writer() *sql.DB { return rw.writer }

// Reader returns the *sql.DB on the reader endpoint.
func (rw *ReadWrite) Reader() *sql.DB { return rw.reader }

// Read returns the reader's *sql.DB, or the writer's when ctx is marked
// with holdfast.ReadYourWrites.
func (rw *ReadWrite) Read(ctx context.Context) *sql.DB {
	if holdfast.IsReadYourWrites(ctx) {
		return rw.writer
	}
	return rw.reader
}

// WriteTx runs fn in a transaction of the writer's *sql.DB with
// [BeginTxFunc] (opts may be nil).
func (rw *ReadWrite) WriteTx(ctx context.Context, opts *sql.TxOptions, fn func(*sql.Tx) error) error {
	return BeginTxFunc(ctx, rw.f, rw.writer, opts, fn)
}

// ReadTx runs fn in a read-only transaction (opts with ReadOnly true,
// whatever opts says; opts may be nil) with [BeginTxFunc] on the reader's
// *sql.DB, or the writer's when ctx is marked with
// holdfast.ReadYourWrites. A write in it fails with 25006: ReadTx returns
// a *holdfast.ReadOnlyError then, never re-run.
func (rw *ReadWrite) ReadTx(ctx context.Context, opts *sql.TxOptions, fn func(*sql.Tx) error) error {
	o := sql.TxOptions{ReadOnly: true}
	if opts != nil {
		o.Isolation = opts.Isolation
	}
	db := rw.Read(ctx)
	err := BeginTxFunc(ctx, rw.f, db, &o, fn)
	if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == "25006" {
		return &holdfast.ReadOnlyError{Pool: rw.f.PoolName(PoolOf(db)), Err: err}
	}
	return err
}

// Close closes both *sql.DBs, and so their pools (at once, or when the
// application releases the last connection it holds, as DB.Close of
// [Open] does).
func (rw *ReadWrite) Close() error {
	if rw == nil {
		return nil
	}
	return errors.Join(rw.reader.Close(), rw.writer.Close())
}
