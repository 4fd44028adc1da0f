package sqldb

import (
	"context"
	"database/sql"
	"errors"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/internal/conn"
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
//	_, err = rw.Writer().ExecContext(ctx, "INSERT ...") // the writer
//	err = sqldb.RunTx(ctx, f, rw.Writer(), nil, func(tx *sql.Tx) error { ... }) // the writer, re-run when it provably did not commit
//	rows, err := rw.Read(ctx).QueryContext(ctx, "SELECT ...") // a reader (the writer under holdfast.ReadYourWrites)
//	err = sqldb.RunTx(ctx, f, rw.Read(ctx), &sql.TxOptions{ReadOnly: true}, func(tx *sql.Tx) error { ... }) // a read-only transaction on a reader
//
// A read that must see the caller's own writes goes to the writer: mark
// its context with holdfast.ReadYourWrites (a reader trails the writer
// by its replica lag). For pgx stdlib options, build a holdfast.ReadWrite
// and call [OpenDB] on each of its pools instead.
type ReadWrite struct {
	writer, reader *sql.DB
}

// OpenReadWrite builds the two pools with f.NewReadWrite (writer: the
// cluster endpoint's config; reader: the reader endpoint's, or nil to
// derive it, as holdfast.Factory.NewReadWrite does; opts apply to both, a
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
	return &ReadWrite{writer: owned(rw.Writer()), reader: owned(rw.Reader())}, nil
}

// Writer returns the *sql.DB on the writer (cluster) endpoint.
func (rw *ReadWrite) Writer() *sql.DB { return rw.writer }

// Reader returns the *sql.DB on the reader endpoint.
func (rw *ReadWrite) Reader() *sql.DB { return rw.reader }

// Read returns the reader's *sql.DB, or the writer's when ctx is marked
// with holdfast.ReadYourWrites.
func (rw *ReadWrite) Read(ctx context.Context) *sql.DB {
	if conn.ReadYourWrites(ctx) {
		return rw.writer
	}
	return rw.reader
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
