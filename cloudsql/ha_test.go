package cloudsql_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/cloudsqlconn"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/cloudsql"
	fake "github.com/holdfast-db/holdfast/fakes/cloudsqltest"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/internal/gcpconn/gcptest"
)

// The tests below play Cloud SQL's HA failover and Enterprise Plus
// maintenance (fakes/cloudsqltest) under a holdfast pool through
// cloudsql.With and, as the control, a plain pgxpool through
// cloudsql.Configure with a real dialer of its own: the fault bites the
// control, and holdfast rides through it.

// durablePG starts a PostgreSQL of the test's own with durable commits
// (pgtest's default turns them off): an HA failover restarts it.
func durablePG(t *testing.T) *pgtest.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pg, err := pgtest.Start(ctx, pgtest.Options{Settings: map[string]string{"synchronous_commit": "on"}})
	if err != nil {
		if errors.Is(err, pgtest.ErrNotFound) {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Stop() })
	return pg
}

// plainPool is the control: a plain pgxpool through cloudsql.Configure and
// a real dialer of its own against s.
func plainPool(t *testing.T, s *fake.Server) *pgxpool.Pool {
	t.Helper()
	d := gcptest.Dialer(t, s, false, cloudsqlconn.NewDialer)
	cfg, err := pgxpool.ParseConfig("host=localhost user=postgres dbname=postgres")
	if err != nil {
		t.Fatal(err)
	}
	if err := cloudsql.Configure(cfg, d, s.ConnName()); err != nil {
		t.Fatal(err)
	}
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// insert is one idempotent-free write: a row with id, in a transaction.
func insert(ctx context.Context, tx pgx.Tx, id int) error {
	_, err := tx.Exec(ctx, "INSERT INTO ha_writes (id) VALUES ($1)", id)
	return err
}

// TestHAFailoverRideThrough: through an HA failover (connections reset,
// refusals for the downtime, the standby taking the disk over), a holdfast
// request whose deadline exceeds the downtime succeeds, held by the
// outage layer and resumed on the instance's first accept; one whose
// deadline is shorter fails with *holdfast.DatabaseDownError; the plain
// pool's request made during the downtime fails at once.
func TestHAFailoverRideThrough(t *testing.T) {
	t.Parallel()
	pg := durablePG(t)
	e := newEnv(t, envOpts{cfg: fake.Config{Backend: pg.Addr()}})
	plain := plainPool(t, e.fake)
	ctx := gcptest.CtxFor(t, time.Minute)
	if _, err := e.pool.Exec(ctx, "CREATE TABLE ha_writes (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if err := plain.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	const downtime = 2 * time.Second
	type outcome struct {
		err  error
		took time.Duration
		end  time.Time
	}
	var long, short, control outcome
	cut := make(chan struct{})
	var sw fake.Switch
	var swErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		sw, swErr = e.fake.Failover(ctx, downtime, func(ctx context.Context) error {
			close(cut)
			if err := pg.Shutdown(ctx, pgtest.ShutdownImmediate); err != nil {
				return err
			}
			return pg.Restart(ctx)
		})
	}()
	<-cut
	var running atomic.Int32
	requests := make(chan struct{}, 3)
	run := func(o *outcome, bound time.Duration, do func(ctx context.Context) error) {
		running.Add(1)
		go func() {
			defer func() { requests <- struct{}{} }()
			rctx, cancel := context.WithTimeout(ctx, bound)
			defer cancel()
			start := time.Now()
			o.err = do(rctx)
			o.end = time.Now()
			o.took = o.end.Sub(start)
		}()
	}
	run(&long, downtime+10*time.Second, func(ctx context.Context) error {
		return e.f.RunTx(ctx, e.pool, pgx.TxOptions{}, func(tx pgx.Tx) error { return insert(ctx, tx, 1) })
	})
	run(&short, downtime/4, func(ctx context.Context) error {
		return e.f.RunTx(ctx, e.pool, pgx.TxOptions{}, func(tx pgx.Tx) error { return insert(ctx, tx, 2) })
	})
	run(&control, downtime+10*time.Second, func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, plain, func(tx pgx.Tx) error { return insert(ctx, tx, 3) })
	})
	for range running.Load() {
		<-requests
	}
	<-done
	if swErr != nil {
		t.Fatal(swErr)
	}
	if long.err != nil {
		t.Errorf("holdfast request with a deadline past the downtime: %v", long.err)
	} else {
		t.Logf("holdfast: the request held %v, done %v after the instance accepted again", long.took, long.end.Sub(sw.Accepting))
	}
	var de *holdfast.DatabaseDownError
	if !errors.As(short.err, &de) {
		t.Errorf("holdfast request with a deadline inside the downtime = %v, want a *holdfast.DatabaseDownError", short.err)
	}
	if control.err == nil {
		t.Error("the control's request made during the downtime succeeded: the fault did not bite")
	} else {
		t.Logf("control: failed after %v: %v", control.took, control.err)
	}
	var n int
	if err := e.pool.QueryRow(ctx, "SELECT count(*) FROM ha_writes WHERE id = 1").Scan(&n); err != nil || n != 1 {
		t.Errorf("the held write: %d rows, %v; want 1", n, err)
	}
}

// TestMaintenanceCutInFlight: an Enterprise Plus maintenance cuts the
// connections in the middle of their statements. Holdfast reports each
// truthfully: a transaction whose statement was cut had not committed,
// and the runner runs it again once the instance accepts (one row); an
// autocommit write that was cut may have committed, and is returned as pgx
// returns it, not sent again, which the factory classifies Fatal
// "outcome-unknown". A request that starts
// during the cut waits for the instance and succeeds. The control's
// request that starts during the cut fails.
func TestMaintenanceCutInFlight(t *testing.T) {
	t.Parallel()
	pg := durablePG(t)
	e := newEnv(t, envOpts{cfg: fake.Config{Backend: pg.Addr()}, dsnExtra: "pool_max_conns=4"})
	plain := plainPool(t, e.fake)
	ctx := gcptest.CtxFor(t, time.Minute)
	if _, err := e.pool.Exec(ctx, "CREATE TABLE ha_writes (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if err := plain.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	direct, err := pgx.Connect(ctx, pg.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close(context.Background())

	// Two statements in flight: a transaction's, and an autocommit write.
	var txAttempts atomic.Int32
	txDone, execDone := make(chan error, 1), make(chan error, 1)
	go func() {
		txDone <- e.f.RunTx(ctx, e.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
			if txAttempts.Add(1) == 1 {
				_, err := tx.Exec(ctx, "INSERT INTO ha_writes (id) SELECT 10 FROM pg_sleep(30)")
				return err
			}
			return insert(ctx, tx, 10)
		})
	}()
	go func() {
		_, err := e.f.DBTX(e.pool).Exec(ctx, "INSERT INTO ha_writes (id) SELECT 11 FROM pg_sleep(30)")
		execDone <- err
	}()
	// Both are on the server once pg_stat_activity shows them.
	for {
		var n int
		if err := direct.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'INSERT INTO ha_writes (id) SELECT 1_ FROM pg_sleep(30)'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 2 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the statements never reached the server")
		case <-time.After(10 * time.Millisecond): // a poll of the server's view, not a synchronisation
		}
	}

	const cut = 500 * time.Millisecond
	started := make(chan struct{})
	var sw fake.Switch
	swDone := make(chan error, 1)
	go func() {
		var err error
		sw, err = e.fake.Failover(ctx, cut, func(context.Context) error { close(started); return nil })
		swDone <- err
	}()
	<-started
	during := make(chan error, 2)
	var duringEnd time.Time
	go func() {
		err := e.f.RunTx(ctx, e.pool, pgx.TxOptions{}, func(tx pgx.Tx) error { return insert(ctx, tx, 12) })
		duringEnd = time.Now()
		during <- err
	}()
	go func() {
		during <- pgx.BeginFunc(ctx, plain, func(tx pgx.Tx) error { return insert(ctx, tx, 13) })
	}()
	if err := <-swDone; err != nil {
		t.Fatal(err)
	}
	hfErr, ctlErr := <-during, <-during
	if ctlErr == nil { // the two may come in either order
		hfErr, ctlErr = ctlErr, hfErr
	}
	if hfErr != nil {
		t.Errorf("holdfast request started during the cut: %v", hfErr)
	} else {
		t.Logf("holdfast: the request started during the cut done %v after the instance accepted", duringEnd.Sub(sw.Accepting))
	}
	if ctlErr == nil {
		t.Error("the control's request started during the cut succeeded: the fault did not bite")
	}
	if err := <-txDone; err != nil || txAttempts.Load() != 2 {
		t.Errorf("the transaction cut in flight: %v after %d runs; want success on the second run", err, txAttempts.Load())
	}
	if err := <-execDone; err == nil || e.f.Classify(err).Reason != classify.ReasonOutcomeUnknown {
		t.Errorf("the autocommit write cut in flight = %v (%v), want the verdict outcome-unknown", err, e.f.Classify(err))
	}
	var rows string
	if err := direct.QueryRow(ctx, "SELECT coalesce(string_agg(id::text, ',' ORDER BY id), '') FROM ha_writes").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if want := "10,12"; rows != want && rows != "10,11,12" {
		t.Errorf("rows = %q, want %q (11, cut in flight, may have committed or not)", rows, fmt.Sprint(want))
	}
}
