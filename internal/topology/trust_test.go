package topology_test

import (
	"context"
	"errors"
	"testing"

	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/internal/topology"
)

// TestSearchPathIgnored: the monitors' statements name every function
// with its schema, so that a search_path that a database's owner sets (ALTER
// DATABASE ... SET search_path, here SET in the session) to a schema of
// theirs that shadows Aurora's functions changes nothing: the identity
// and the topology are pg_catalog's. Before the fix (checked on main)
// Self called aurora_db_instance_identifier() unqualified and got the
// shadow's answer.
func TestSearchPathIgnored(t *testing.T) {
	ctx := context.Background()
	conn := pgtest.Database(t, "topology_search_path")
	for _, q := range []string{
		`CREATE FUNCTION pg_catalog.aurora_db_instance_identifier() RETURNS text LANGUAGE sql AS $$ SELECT 'orders-1'::text $$`,
		`CREATE FUNCTION pg_catalog.aurora_replica_status() RETURNS TABLE (server_id text, session_id text)
			LANGUAGE sql AS $$ VALUES ('orders-1', 'MASTER_SESSION_ID'), ('orders-2', 'x') $$`,
		"CREATE SCHEMA shadow",
		`CREATE FUNCTION shadow.aurora_db_instance_identifier() RETURNS text LANGUAGE sql AS $$ SELECT 'attacker-1'::text $$`,
		`CREATE FUNCTION shadow.lower(text) RETURNS text LANGUAGE sql AS $$ SELECT 'attacker-2'::text $$`,
		`CREATE FUNCTION shadow.pg_is_in_recovery() RETURNS bool LANGUAGE sql AS $$ SELECT true $$`,
		"SET search_path = shadow, pg_catalog",
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	defer func() { _, _ = conn.Exec(ctx, "RESET search_path") }()
	engine, err := topology.Detect(ctx, conn)
	if err != nil || engine != topology.EngineAurora {
		t.Fatalf("Detect = %v, %v; want aurora", engine, err)
	}
	id, writable, err := topology.Self(ctx, conn, engine)
	if err != nil || id != "orders-1" || !writable {
		t.Errorf("Self = %q, writable %v, %v; want pg_catalog's orders-1, writable", id, writable, err)
	}
	rows, _, err := topology.Read(ctx, conn, engine)
	if err != nil || len(rows) != 2 || rows[0].ServerID != "orders-1" || !rows[0].Writer {
		t.Errorf("Read = %+v, %v", rows, err)
	}
}

// TestUntrustedFunction: a topology function owned by a role that is
// neither a superuser nor rdsadmin is refused at detection and at every
// read, naming its owner.
func TestUntrustedFunction(t *testing.T) {
	ctx := context.Background()
	conn := pgtest.Database(t, "topology_untrusted")
	for _, q := range []string{
		"DROP ROLE IF EXISTS topology_owner", "CREATE ROLE topology_owner",
		"CREATE SCHEMA rds_tools AUTHORIZATION topology_owner",
		"SET ROLE topology_owner",
		"CREATE FUNCTION rds_tools.dbi_resource_id() RETURNS text LANGUAGE sql AS $$ SELECT '" + idA + "'::text $$",
		"CREATE FUNCTION rds_tools.multi_az_db_cluster_source_dbi_resource_id() " + writerSrc,
		"CREATE FUNCTION rds_tools.show_topology(client text) RETURNS TABLE (id text, endpoint text, port int) LANGUAGE sql AS $$ " + cluster + " $$",
		"RESET ROLE",
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		_, _ = conn.Exec(context.Background(), "DROP SCHEMA rds_tools CASCADE")
		_, _ = conn.Exec(context.Background(), "DROP ROLE topology_owner")
	})
	var ue *topology.UntrustedError
	engine, err := topology.Detect(ctx, conn)
	if engine != topology.EngineMultiAZ || !errors.As(err, &ue) || ue.Owner != "topology_owner" || !errors.Is(err, topology.ErrUntrusted) {
		t.Errorf("Detect = %v, %v; want multi-az and an *UntrustedError naming topology_owner", engine, err)
	}
	if _, _, err := topology.Read(ctx, conn, topology.EngineMultiAZ); !errors.Is(err, topology.ErrUntrusted) {
		t.Errorf("Read: %v, want ErrUntrusted", err)
	}
	if _, _, err := topology.Self(ctx, conn, topology.EngineMultiAZ); !errors.Is(err, topology.ErrUntrusted) {
		t.Errorf("Self: %v, want ErrUntrusted", err)
	}
	// Owned by a superuser, the same functions are read.
	if _, err := conn.Exec(ctx, "ALTER FUNCTION rds_tools.show_topology(text) OWNER TO CURRENT_USER; "+
		"ALTER FUNCTION rds_tools.dbi_resource_id() OWNER TO CURRENT_USER; "+
		"ALTER FUNCTION rds_tools.multi_az_db_cluster_source_dbi_resource_id() OWNER TO CURRENT_USER"); err != nil {
		t.Fatal(err)
	}
	if rows, _, err := topology.Read(ctx, conn, topology.EngineMultiAZ); err != nil || len(rows) != 3 {
		t.Errorf("Read, owned by a superuser: %d rows, %v", len(rows), err)
	}
}
