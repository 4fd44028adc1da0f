package meta_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/internal/bgroute/meta"
	"github.com/holdfast-db/holdfast/internal/topology"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The RDS metadata function is found by name whatever its parameter type
// (text, varchar, name) or with none, and read in the form it takes: an
// existence check on rds_tools.show_topology(text) alone reported a
// varchar version "absent" and routed nothing.
func TestDetectByName(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real servers for every metadata shape: skipped with -short")
	}
	ctx := context.Background()
	conn := pgtest.Database(t, "meta_detect")
	if _, err := conn.Exec(ctx, "CREATE SCHEMA rds_tools"); err != nil {
		t.Fatal(err)
	}
	const body = `RETURNS TABLE (id text, endpoint text, port int, role text, status text, version text) LANGUAGE sql AS
		$$ SELECT 'db-1'::text, 'orders.abc.eu-west-1.rds.amazonaws.com'::text, 5432, 'BLUE_GREEN_DEPLOYMENT_SOURCE'::text, 'AVAILABLE'::text, '1.0'::text $$`
	for _, tc := range []struct {
		params string
		noArg  bool
	}{
		{"(client text)", false},
		{"(client varchar)", false},
		{"(client name)", false},
		{"()", true},
	} {
		if _, err := conn.Exec(ctx, "DROP FUNCTION IF EXISTS rds_tools.show_topology"); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE FUNCTION rds_tools.show_topology%s %s", tc.params, body)); err != nil {
			t.Fatal(err)
		}
		src, err := meta.Detect(ctx, conn, meta.EngineAuto)
		if err != nil {
			t.Fatal(err)
		}
		if src.Engine != meta.EngineRDS || src.NoArg != tc.noArg {
			t.Errorf("%s: Detect = %+v, want RDS, NoArg %v", tc.params, src, tc.noArg)
			continue
		}
		rows, bad, err := meta.Read(ctx, conn, src)
		if err != nil || len(bad) != 0 || len(rows) != 1 || rows[0].Status != "AVAILABLE" {
			t.Errorf("%s: Read = %+v, %v, %v", tc.params, rows, bad, err)
		}
	}
	if _, err := conn.Exec(ctx, "DROP SCHEMA rds_tools CASCADE"); err != nil {
		t.Fatal(err)
	}
	if src, err := meta.Detect(ctx, conn, meta.EngineAuto); err != nil || src.Engine != meta.EngineAuto {
		t.Errorf("without the function: Detect = %+v, %v; want absent", src, err)
	}
}

// Aurora's topology function is found by the same existence check, and
// read by name: server ids lowercased, the writer by MASTER_SESSION_ID,
// rows that are not instance identifiers set aside. Without it, the
// metadata is found all the same and the topology is absent.
func TestDetectTopology(t *testing.T) {
	ctx := context.Background()
	conn := pgtest.Database(t, "meta_topology")
	for _, q := range []string{
		`CREATE FUNCTION pg_catalog.get_blue_green_fast_switchover_metadata(text)
			RETURNS TABLE (version text, endpoint text, port int, role text, status text) LANGUAGE sql AS
			$$ SELECT '1.0'::text, 'db.cluster-abc.us-east-1.rds.amazonaws.com'::text, 5432, 'BLUE_GREEN_DEPLOYMENT_SOURCE'::text, 'AVAILABLE'::text $$`,
		`CREATE FUNCTION pg_catalog.aurora_replica_status()
			RETURNS TABLE (server_id text, session_id text, replica_lag_in_msec real) LANGUAGE sql AS
			$$ VALUES ('DB-1'::text, 'MASTER_SESSION_ID'::text, NULL::real), ('db-2', 'a1b2c3', 4.5), ('bad id!', 'x', 0), (NULL, 'y', 0) $$`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	src, err := meta.Detect(ctx, conn, meta.EngineAuto)
	if err != nil || src.Engine != meta.EngineAurora || !src.Topology {
		t.Fatalf("Detect = %+v, %v; want Aurora with its topology", src, err)
	}
	ids, bad, err := topology.ReadAurora(ctx, conn)
	want := []topology.Row{{ServerID: "db-1", Writer: true}, {ServerID: "db-2", Lag: 4500 * time.Microsecond, HasLag: true}} // a reader's replica_lag_in_msec
	if err != nil || len(bad) != 2 || !reflect.DeepEqual(ids, want) {
		t.Errorf("ReadTopology = %+v, %v, %v; want %+v and two rows set aside", ids, bad, err, want)
	}
	if _, err := conn.Exec(ctx, "DROP FUNCTION pg_catalog.aurora_replica_status()"); err != nil {
		t.Fatal(err)
	}
	if src, err := meta.Detect(ctx, conn, meta.EngineAuto); err != nil || src.Engine != meta.EngineAurora || src.Topology {
		t.Errorf("without the topology function: Detect = %+v, %v; want Aurora, no topology", src, err)
	}
	if _, _, err := topology.ReadAurora(ctx, conn); !meta.IsAbsent(err) {
		t.Errorf("ReadTopology without the function: %v, want an absent error", err)
	}
}
