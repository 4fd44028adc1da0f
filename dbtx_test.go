package holdfast_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
)

// sqlcDBTX is the interface sqlc generates for pgx/v5 (emit_methods_with_db_argument
// off, with copyfrom and batch queries).
type sqlcDBTX interface {
	Exec(context.Context, string, ...interface{}) (pgconn.CommandTag, error)
	Query(context.Context, string, ...interface{}) (pgx.Rows, error)
	QueryRow(context.Context, string, ...interface{}) pgx.Row
	CopyFrom(ctx context.Context, tableName pgx.Identifier, columnNames []string, rowSrc pgx.CopyFromSource) (int64, error)
	SendBatch(context.Context, *pgx.Batch) pgx.BatchResults
}

// queries is shaped like sqlc's generated Queries.
type queries struct{ db sqlcDBTX }

func (q *queries) whoAmI(ctx context.Context) (string, error) {
	var who string
	err := q.db.QueryRow(ctx, "SELECT current_user").Scan(&who)
	return who, err
}

func (q *queries) insertNote(ctx context.Context, body string) error {
	_, err := q.db.Exec(ctx, "INSERT INTO dbtx_notes (body) VALUES ($1)", body)
	return err
}

func (q *queries) listNotes(ctx context.Context) ([]string, error) {
	rows, err := q.db.Query(ctx, "SELECT body FROM dbtx_notes ORDER BY body")
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

func (q *queries) copyNotes(ctx context.Context, bodies ...string) (int64, error) {
	src := make([][]any, len(bodies))
	for i, b := range bodies {
		src[i] = []any{b}
	}
	return q.db.CopyFrom(ctx, pgx.Identifier{"dbtx_notes"}, []string{"body"}, pgx.CopyFromRows(src))
}

func (q *queries) countBatch(ctx context.Context) (int, error) {
	b := &pgx.Batch{}
	var n int
	b.Queue("SELECT count(*) FROM dbtx_notes").QueryRow(func(r pgx.Row) error { return r.Scan(&n) })
	err := q.db.SendBatch(ctx, b).Close()
	return n, err
}

// sqlc-generated code calls the pool's own methods (pool.Query through
// its DBTX interface), which no Factory.Acquire retry reaches: a stale
// password is 28P01 there. Through f.DBTX(pool) every method of that
// interface gets the fresh-password retry, and every connection goes back
// to the pool.
func TestDBTXFreshPasswordForSQLC(t *testing.T) {
	if testing.Short() {
		t.Skip("changes a real server's password under load: skipped with -short")
	}
	t.Parallel()
	s := pgtest.NewServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	if err := s.PasswordRole(ctx, "dbtx_app", "the-right-one"); err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{
		"CREATE TABLE dbtx_notes (body text)",
		"GRANT ALL ON dbtx_notes TO dbtx_app",
	} {
		if err := s.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	dsn := fmt.Sprintf("postgres://dbtx_app@%s/postgres?sslmode=disable&pool_max_conns=2", s.Addr())

	calls := []struct {
		name string
		run  func(context.Context, *queries) error
	}{
		{"QueryRow", func(ctx context.Context, q *queries) error {
			who, err := q.whoAmI(ctx)
			if err == nil && who != "dbtx_app" {
				err = fmt.Errorf("current_user %q", who)
			}
			return err
		}},
		{"Exec", func(ctx context.Context, q *queries) error { return q.insertNote(ctx, "exec") }},
		{"Query", func(ctx context.Context, q *queries) error { _, err := q.listNotes(ctx); return err }},
		{"CopyFrom", func(ctx context.Context, q *queries) error {
			n, err := q.copyNotes(ctx, "copy-1", "copy-2")
			if err == nil && n != 2 {
				err = fmt.Errorf("copied %d rows", n)
			}
			return err
		}},
		{"SendBatch", func(ctx context.Context, q *queries) error { _, err := q.countBatch(ctx); return err }},
	}
	for _, c := range calls {
		for _, through := range []string{"f.DBTX(pool)", "pool (control)"} {
			t.Run(c.name+" through "+through, func(t *testing.T) {
				t.Parallel()
				var fetched atomic.Int32
				f := newFactory(t, holdfast.WithPasswordFunc(func(context.Context, string) (string, error) {
					if fetched.Add(1) == 1 {
						return "a-stale-token", nil // rotated under the service
					}
					return "the-right-one", nil
				}))
				cfg, err := pgxpool.ParseConfig(dsn)
				if err != nil {
					t.Fatal(err)
				}
				pool := newPool(t, f, cfg)
				var db sqlcDBTX = f.DBTX(pool)
				if through != "f.DBTX(pool)" {
					db = pool
				}
				err = c.run(ctx, &queries{db: db})
				var pe *pgconn.PgError
				switch {
				case through == "f.DBTX(pool)" && err != nil:
					t.Errorf("%v; want success after one fresh password (%d fetched)", err, fetched.Load())
				case through == "f.DBTX(pool)" && fetched.Load() != 2:
					t.Errorf("%d password fetches, want 2 (the stale one, the fresh one)", fetched.Load())
				case through != "f.DBTX(pool)" && (!errors.As(err, &pe) || pe.Code != "28P01"):
					t.Errorf("control: %v, want 28P01: the fault must bite", err)
				}
				if n := pool.Stat().AcquiredConns(); n != 0 {
					t.Errorf("%d connections still acquired after the call", n)
				}
			})
		}
	}

	// The transaction and its release; rows left unread and closed.
	t.Run("BeginTx and rows", func(t *testing.T) {
		t.Parallel()
		f := newFactory(t, holdfast.WithPasswordFunc(func(context.Context, string) (string, error) { return "the-right-one", nil }))
		cfg, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		pool := newPool(t, f, cfg)
		d := f.DBTX(pool)
		tx, err := d.BeginTx(ctx, pgx.TxOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := (&queries{db: tx}).copyNotes(ctx, "in-tx"); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		_ = tx.Rollback(ctx) // after Commit: ErrTxClosed, nothing released twice
		rows, err := d.Query(ctx, "SELECT generate_series(1, 100)")
		if err != nil {
			t.Fatal(err)
		}
		rows.Next()
		rows.Close()
		b := &pgx.Batch{}
		b.Queue("SELECT 1")
		btx := d.SendBatch(ctx, b)
		if err := btx.Close(); err != nil {
			t.Fatal(err)
		}
		if n := pool.Stat().AcquiredConns(); n != 0 {
			t.Errorf("%d connections still acquired", n)
		}
	})
}
