package holdfast_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
)

// A pool's layers are found from the pool, however it was built: with
// Configure and pgxpool.NewWithConfig, never Started, Factory.BlueGreen
// and Factory.Failover answer as for NewPool. A pool of another factory,
// or of none, has none.
func TestLayersFoundFromThePool(t *testing.T) {
	t.Parallel()
	f := newFactory(t, holdfast.WithBlueGreen(bluegreen.Config{}),
		holdfast.WithFailover(failover.Config{InstanceTemplate: "?.db.example.internal"}))
	defer f.Close()
	cfg, _ := poolConfig(t, pgtest.DSN(t), "sslmode=disable")
	if err := f.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if f.BlueGreen(pool) == nil || f.Failover(pool) == nil {
		t.Errorf("BlueGreen = %v, Failover = %v: want both for a pool never Started", f.BlueGreen(pool), f.Failover(pool))
	}
	other := newFactory(t)
	if other.BlueGreen(pool) != nil || other.Failover(pool) != nil {
		t.Error("another factory found this factory's layers")
	}
	plainCfg, _ := poolConfig(t, pgtest.DSN(t), "sslmode=disable")
	plain, err := pgxpool.NewWithConfig(context.Background(), plainCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if f.BlueGreen(plain) != nil || f.Failover(plain) != nil {
		t.Error("layers found for a pool the factory did not configure")
	}
}

// Factory.ClosePool stops what the factory runs for a pool: its
// blue/green monitors' connections end with it, where pool.Close alone
// leaves them until Factory.Close (a service that opens and closes pools
// under one factory would pile them up).
func TestClosePoolStopsItsMonitors(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	admin, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	f := newFactory(t, holdfast.WithBlueGreen(bluegreen.Config{ID: "closepool"}))
	defer f.Close()
	cfg, _ := poolConfig(t, dsn, "sslmode=disable", "application_name=closepool")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := f.NewPool(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	monitors := func() int {
		var n int
		if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'holdfast-bluegreen-monitor' AND datname = current_database()").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	wait := func(what string, done func() bool) {
		t.Helper()
		for !done() {
			select {
			case <-ctx.Done():
				t.Fatalf("timed out waiting for %s", what)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	wait("the monitors' connections", func() bool { return monitors() >= 2 })
	before := monitors()
	f.ClosePool(pool)
	wait("the monitors to close", func() bool { return monitors() <= before-2 })
	if r := f.BlueGreen(pool); r == nil || !r.Status().Closed {
		t.Errorf("the pool's router is not closed: %+v", r)
	}
}
