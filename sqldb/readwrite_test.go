package sqldb_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/fakes/failovertest"
	"github.com/holdfast-db/holdfast/internal/conn"
	"github.com/holdfast-db/holdfast/sqldb"
)

// TestReadWriteSQL: OpenReadWrite on a cluster endpoint gives a *sql.DB on
// the writer and one on the readers, over pools of one factory that share
// the cluster's monitor; a read-only transaction on the reader refuses a
// write (25006, run once), a read under holdfast.ReadYourWrites goes to
// the writer, and Close closes both pools.
func TestReadWriteSQL(t *testing.T) {
	c := failovertest.StartTest(t, failovertest.Config{Replicas: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := newFactory(t, holdfast.WithFailover(failover.Config{RefreshInterval: 200 * time.Millisecond}))
	cfg, err := c.PoolConfig(c.ClusterEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	rw, err := sqldb.OpenReadWrite(ctx, f, cfg, nil, holdfast.PoolName("orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	wp, rp := sqldb.PoolOf(rw.Writer()), sqldb.PoolOf(rw.Reader())
	name := func(p *pgxpool.Pool) string { return conn.OfPool(p).Name() }
	if name(wp) != "orders" || name(rp) != "orders-ro" || rp.Config().ConnConfig.Host != c.ReaderEndpoint {
		t.Errorf("pools %q on %s, %q on %s; want orders, orders-ro on %s", name(wp), wp.Config().ConnConfig.Host,
			name(rp), rp.Config().ConnConfig.Host, c.ReaderEndpoint)
	}
	if m := f.Failover(wp); m == nil || m != f.Failover(rp) {
		t.Error("the pools do not share one monitor")
	}
	recovery := func(db *sql.DB) bool {
		var rec bool
		if err := db.QueryRowContext(ctx, "SELECT pg_is_in_recovery()").Scan(&rec); err != nil {
			t.Fatal(err)
		}
		return rec
	}
	ryw := holdfast.ReadYourWrites(ctx)
	if recovery(rw.Writer()) || !recovery(rw.Read(ctx)) || recovery(rw.Read(ryw)) {
		t.Error("Writer, Read, Read(ReadYourWrites): want the writer, a reader, the writer")
	}

	if err := sqldb.RunTx(ctx, f, rw.Writer(), nil, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "CREATE TABLE rws (id bigint PRIMARY KEY)")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for replayed := false; !replayed; { // a synchronous commit waits for the reader's flush, not its replay
		if err := rw.Reader().QueryRowContext(ctx, "SELECT to_regclass('rws') IS NOT NULL").Scan(&replayed); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond) // a poll of the reader's replay; ctx bounds the loop's queries
	}
	runs := 0
	err = sqldb.RunTx(ctx, f, rw.Read(ctx), &sql.TxOptions{ReadOnly: true}, func(tx *sql.Tx) error {
		runs++
		_, err := tx.ExecContext(ctx, "INSERT INTO rws VALUES (1)")
		return err
	})
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "25006" || runs != 1 || f.Classify(err).Retryable() {
		t.Errorf("a write in a read-only transaction: %v after %d runs, want 25006 once, not retryable", err, runs)
	}
	if _, err := rw.Writer().ExecContext(ctx, "INSERT INTO rws VALUES (2)"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := sqldb.RunTx(ryw, f, rw.Read(ryw), &sql.TxOptions{ReadOnly: true, Isolation: sql.LevelRepeatableRead}, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM rws").Scan(&n); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "INSERT INTO rws VALUES (3)") // read-only on the writer too
		return err
	}); !errors.As(err, &pe) || pe.Code != "25006" || n != 1 {
		t.Errorf("a read-only transaction under ReadYourWrites: %d rows, %v; want 1 and 25006", n, err)
	}

	if err := rw.Close(); err != nil {
		t.Fatal(err)
	}
	if sqldb.PoolOf(rw.Writer()) != nil || sqldb.PoolOf(rw.Reader()) != nil {
		t.Error("PoolOf after Close: want nil")
	}
	deadline := time.Now().Add(5 * time.Second)
	for wp.Stat().TotalConns()+rp.Stat().TotalConns() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // a poll of the pools' close
	}
	if w, r := wp.Stat().TotalConns(), rp.Stat().TotalConns(); w+r > 0 {
		t.Errorf("after Close: %d and %d connections, want the pools closed", w, r)
	}
}
