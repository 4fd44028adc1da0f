package topology_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/internal/topology"
)

// TestGlobalRead: a server with Aurora's global functions listing two
// Regions is a global cluster (DetectGlobal); its instances come with
// their Region and visibility lag (ReadGlobal), its Regions with their
// RPO lag and whether the server takes writes (ReadGlobalStatus). One
// Region only is no global cluster; a global function that a role other
// than a superuser owns is refused (ErrUntrusted).
func TestGlobalRead(t *testing.T) {
	ctx := context.Background()
	conn := pgtest.Database(t, "topology_global")
	for _, q := range []string{
		`CREATE FUNCTION pg_catalog.aurora_global_db_instance_status() RETURNS TABLE (server_id text, session_id text,
			aws_region text, durable_lsn bigint, visibility_lag_in_msec real)
			LANGUAGE sql AS $$ VALUES ('orders-1', 'MASTER_SESSION_ID', 'us-east-1', 10, NULL::real),
				('orders-2', 'a', 'us-east-1', 10, 2.5::real), ('ORDERS-3', 'b', 'us-west-2', 9, 612::real),
				('bad id', 'c', 'us-west-2', 1, 1::real), ('orders-5', 'd', 'mars', 1, 1::real) $$`,
		`CREATE TABLE regions (aws_region text, rpo_lag_in_msec bigint, durability_lag_in_msec bigint)`,
		`INSERT INTO regions VALUES ('us-east-1', -1, -1), ('us-west-2', 600, 580)`,
		`CREATE FUNCTION pg_catalog.aurora_global_db_status() RETURNS TABLE (aws_region text, highest_lsn_written bigint,
			durability_lag_in_msec bigint, rpo_lag_in_msec bigint)
			LANGUAGE sql AS $$ SELECT aws_region, 10, durability_lag_in_msec, rpo_lag_in_msec FROM public.regions $$`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if global, err := topology.DetectGlobal(ctx, conn); err != nil || !global {
		t.Fatalf("DetectGlobal = %v, %v; want true", global, err)
	}
	rows, bad, err := topology.ReadGlobal(ctx, conn)
	if err != nil || len(rows) != 3 || len(bad) != 2 {
		t.Fatalf("ReadGlobal = %+v, %v, %v; want 3 rows, 2 bad", rows, bad, err)
	}
	want := []topology.Row{
		{ServerID: "orders-1", Writer: true, Region: "us-east-1"},
		{ServerID: "orders-2", Region: "us-east-1", Lag: 2500 * time.Microsecond, HasLag: true},
		{ServerID: "orders-3", Region: "us-west-2", Lag: 612 * time.Millisecond, HasLag: true},
	}
	for i, w := range want {
		if rows[i] != w {
			t.Errorf("row %d = %+v; want %+v", i, rows[i], w)
		}
	}
	lags, readOnly, err := topology.ReadGlobalStatus(ctx, conn)
	if err != nil || readOnly || len(lags) != 2 {
		t.Fatalf("ReadGlobalStatus = %+v, read-only %v, %v", lags, readOnly, err)
	}
	if l := lags[1]; l.Region != "us-west-2" || l.Primary || !l.Known || l.RPO != 600*time.Millisecond || l.Durability != 580*time.Millisecond {
		t.Errorf("secondary = %+v", l)
	}
	if l := lags[0]; !l.Primary || l.RPO != 0 {
		t.Errorf("primary = %+v", l)
	}

	if _, err := conn.Exec(ctx, "DELETE FROM regions WHERE aws_region = 'us-west-2'"); err != nil {
		t.Fatal(err)
	}
	if global, err := topology.DetectGlobal(ctx, conn); err != nil || global {
		t.Errorf("DetectGlobal with one Region = %v, %v; want false", global, err)
	}
	for _, q := range []string{
		"DROP ROLE IF EXISTS topology_global_owner", "CREATE ROLE topology_global_owner",
		"ALTER FUNCTION pg_catalog.aurora_global_db_status() OWNER TO topology_global_owner",
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		_, _ = conn.Exec(context.Background(), "ALTER FUNCTION pg_catalog.aurora_global_db_status() OWNER TO CURRENT_USER")
		_, _ = conn.Exec(context.Background(), "DROP ROLE IF EXISTS topology_global_owner")
	})
	if _, err := topology.DetectGlobal(ctx, conn); !errors.Is(err, topology.ErrUntrusted) {
		t.Errorf("DetectGlobal with an untrusted owner: %v; want ErrUntrusted", err)
	}
}
