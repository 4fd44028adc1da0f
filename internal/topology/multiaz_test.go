package topology_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/internal/topology"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// Three instances of a Multi-AZ DB cluster, as RDS names them.
const (
	idA = "db-ABCDEFGHIJKLMNOPQRSTUVWXY1"
	idB = "db-ABCDEFGHIJKLMNOPQRSTUVWXY2"
	idC = "db-ABCDEFGHIJKLMNOPQRSTUVWXY3"
	epA = "orders-1.abc123.us-east-1.rds.amazonaws.com"
	epB = "orders-2.abc123.us-east-1.rds.amazonaws.com"
	epC = "orders-3.abc123.us-east-1.rds.amazonaws.com"
)

// cluster is the three instances' rows of rds_tools.show_topology().
const cluster = `VALUES ('` + idA + `', '` + epA + `', 5432), ('` + idB + `', '` + epB + `', 5432), ('` + idC + `', '` + epC + `', 5432)`

// rdsTools describes fake rds_tools functions: the forms of show_topology
// (parameter lists), the columns it returns and a query giving its rows, the
// server's own id (an SQL expression) and the source id function (its
// RETURNS clause and body).
type rdsTools struct {
	forms   []string // default: "(client text)"
	columns string   // default: "id text, endpoint text, port int"
	rows    string   // default: cluster
	self    string   // SQL expression
	source  string   // "RETURNS ... AS $$ ... $$"
}

// reader is the source id function on a reader of idA's cluster; writer on
// the writer: no row.
const (
	readerOfA = `RETURNS SETOF text LANGUAGE sql AS $$ SELECT '` + idA + `'::text $$`
	writerSrc = `RETURNS SETOF text LANGUAGE sql AS $$ SELECT 'x'::text WHERE false $$`
)

// install replaces the schema rds_tools with the functions f describes.
func install(t *testing.T, conn *pgx.Conn, f rdsTools) {
	t.Helper()
	if f.forms == nil {
		f.forms = []string{"(client text)"}
	}
	if f.columns == "" {
		f.columns = "id text, endpoint text, port int"
	}
	if f.rows == "" {
		f.rows = cluster
	}
	qs := []string{"RESET ALL", "DROP SCHEMA IF EXISTS rds_tools CASCADE", "CREATE SCHEMA rds_tools",
		"CREATE FUNCTION rds_tools.dbi_resource_id() RETURNS text LANGUAGE sql AS $$ SELECT " + f.self + " $$",
		"CREATE FUNCTION rds_tools.multi_az_db_cluster_source_dbi_resource_id() " + f.source}
	for _, form := range f.forms {
		qs = append(qs, fmt.Sprintf("CREATE FUNCTION rds_tools.show_topology%s RETURNS TABLE (%s) LANGUAGE sql AS $$ %s $$", form, f.columns, f.rows))
	}
	for _, q := range qs {
		if _, err := conn.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// clusterRows returns the three instances' rows, the one of writer marked.
func clusterRows(writer string) []topology.Row {
	out := []topology.Row{
		{ServerID: "orders-1", Endpoint: epA, Port: 5432, ResourceID: idA},
		{ServerID: "orders-2", Endpoint: epB, Port: 5432, ResourceID: idB},
		{ServerID: "orders-3", Endpoint: epC, Port: 5432, ResourceID: idC},
	}
	for i := range out {
		out[i].Writer = out[i].ResourceID == writer
	}
	return out
}

func TestReadMultiAZ(t *testing.T) {
	ctx := context.Background()
	conn := pgtest.Database(t, "topology_multiaz_read")
	tests := []struct {
		name    string
		f       rdsTools
		want    []topology.Row
		bad     []string // substrings of the errors of the rows set aside
		wantErr error
	}{
		{name: "reader: the writer from the source id",
			f: rdsTools{self: "'" + idB + "'", source: readerOfA}, want: clusterRows(idA)},
		{name: "writer: an empty source result names itself",
			f: rdsTools{self: "'" + idC + "'", source: writerSrc}, want: clusterRows(idC)},
		{name: "writer: a NULL source id",
			f: rdsTools{self: "'" + idB + "'", source: `RETURNS text LANGUAGE sql AS $$ SELECT NULL::text $$`}, want: clusterRows(idB)},
		{name: "writer: an empty source id",
			f: rdsTools{self: "'" + idC + "'", source: `RETURNS text LANGUAGE sql AS $$ SELECT ''::text $$`}, want: clusterRows(idC)},
		{name: "writer: the source id is its own",
			f: rdsTools{self: "'" + idA + "'", source: `RETURNS text LANGUAGE sql AS $$ SELECT '` + idA + `'::text $$`}, want: clusterRows(idA)},
		{name: "ids compared case-insensitively",
			f: rdsTools{self: "'" + idB + "'", source: `RETURNS text LANGUAGE sql AS $$ SELECT lower('` + idA + `') $$`}, want: clusterRows(idA)},
		{name: "a writer that is not listed marks no row",
			f: rdsTools{self: "'" + idB + "'", source: `RETURNS text LANGUAGE sql AS $$ SELECT 'db-ZZZZZZZZZZZZZZZZZZZZZZZZZZ' $$`}, want: clusterRows("")},
		{name: "without an argument",
			f: rdsTools{forms: []string{"()"}, self: "'" + idB + "'", source: readerOfA}, want: clusterRows(idA)},
		{name: "with a varchar argument",
			f: rdsTools{forms: []string{"(client varchar)"}, self: "'" + idB + "'", source: readerOfA}, want: clusterRows(idA)},
		{name: "with an argument and without",
			f: rdsTools{forms: []string{"(client text)", "()"}, self: "'" + idB + "'", source: readerOfA}, want: clusterRows(idA)},
		{name: "with an optional argument",
			f: rdsTools{forms: []string{"(client text DEFAULT NULL)"}, self: "'" + idB + "'", source: readerOfA}, want: clusterRows(idA)},
		{name: "columns by name, more of them, no port",
			f: rdsTools{columns: "status text, endpoint text, id text", self: "'" + idB + "'", source: readerOfA,
				rows: `VALUES ('AVAILABLE', 'Orders-1.ABC123.us-east-1.rds.amazonaws.com.', '` + idA + `'), ('AVAILABLE', '` + epB + `', '` + idB + `')`},
			want: []topology.Row{{ServerID: "orders-1", Writer: true, Endpoint: epA, ResourceID: idA}, {ServerID: "orders-2", Endpoint: epB, ResourceID: idB}}},
		{name: "numeric ids",
			f: rdsTools{columns: "id bigint, endpoint text, port int", self: "'2'", source: writerSrc,
				rows: `VALUES (1, '` + epA + `', NULL), (2, '` + epB + `', 5433)`},
			want: []topology.Row{{ServerID: "orders-1", Endpoint: epA, ResourceID: "1"}, {ServerID: "orders-2", Writer: true, Endpoint: epB, Port: 5433, ResourceID: "2"}}},
		{name: "bad rows set aside",
			f: rdsTools{self: "'" + idB + "'", source: readerOfA, rows: cluster + `, (NULL, 'orders-4.abc123.us-east-1.rds.amazonaws.com', 5432),
				('db-5', NULL, 5432), ('db-6', 'bad host!.abc123.us-east-1.rds.amazonaws.com', 5432), ('db-7', '10.0.0.7', 5432),
				('db-8', 'orders-8..rds.amazonaws.com', 5432), ('db-9', 'orders-9.abc123.us-east-1.rds.amazonaws.com', 70000), ('  ', 'orders-10.abc', 5432)`},
			want: clusterRows(idA),
			bad:  []string{"without an id", `"db-5" without an endpoint`, `"db-6" with an invalid endpoint`, `"db-7" with an invalid endpoint`, `"db-8" with an invalid endpoint`, `"db-9" with an invalid port`, "without an id"}},
		{name: "no id of its own on the writer",
			f: rdsTools{self: "NULL::text", source: writerSrc}, wantErr: topology.ErrNoResourceID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			install(t, conn, tt.f)
			got, bad, err := topology.Read(ctx, conn, topology.EngineMultiAZ)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Read = %+v, %v, %v; want error %v", got, bad, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Read = %+v\nwant %+v", got, tt.want)
			}
			if len(bad) != len(tt.bad) {
				t.Fatalf("set aside %d rows: %v; want %d", len(bad), bad, len(tt.bad))
			}
			for i, e := range bad {
				if !strings.Contains(e.Error(), tt.bad[i]) {
					t.Errorf("set aside %q, want it to say %q", e, tt.bad[i])
				}
			}
		})
	}
}

func TestSelfMultiAZ(t *testing.T) {
	ctx := context.Background()
	conn := pgtest.Database(t, "topology_multiaz_self")
	tests := []struct {
		name     string
		f        rdsTools
		session  string // run before Self
		id       string
		writable bool
		wantErr  error
	}{
		{name: "the writer", f: rdsTools{self: "'" + idA + "'", source: writerSrc}, id: "orders-1", writable: true},
		{name: "read-only", f: rdsTools{self: "'" + idB + "'", source: readerOfA}, session: "SET default_transaction_read_only = on", id: "orders-2"},
		{name: "the endpoint's first label, lowercased",
			f: rdsTools{self: "'" + idB + "'", source: readerOfA, rows: `VALUES ('` + idB + `', 'ORDERS-2.ABC123.US-EAST-1.RDS.AMAZONAWS.COM', 5432)`}, id: "orders-2", writable: true},
		{name: "not listed", f: rdsTools{self: "'db-ZZZZZZZZZZZZZZZZZZZZZZZZZZ'", source: readerOfA}, wantErr: topology.ErrSelfNotListed},
		{name: "listed with a bad endpoint",
			f:       rdsTools{self: "'" + idB + "'", source: readerOfA, rows: `VALUES ('` + idB + `', '10.0.0.2', 5432)`},
			wantErr: topology.ErrSelfNotListed},
		{name: "no id", f: rdsTools{self: "''", source: readerOfA}, wantErr: topology.ErrNoResourceID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			install(t, conn, tt.f)
			if tt.session != "" {
				if _, err := conn.Exec(ctx, tt.session); err != nil {
					t.Fatal(err)
				}
			}
			id, writable, err := topology.Self(ctx, conn, topology.EngineMultiAZ)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Self = %q, %v, %v; want error %v", id, writable, err, tt.wantErr)
				}
				return
			}
			if err != nil || id != tt.id || writable != tt.writable {
				t.Errorf("Self = %q, %v, %v; want %q, %v", id, writable, err, tt.id, tt.writable)
			}
		})
	}
}

// Detect finds rds_tools.show_topology by name, whatever its forms, and
// prefers Aurora's function; without either, reading fails with the
// server's error.
func TestDetectMultiAZ(t *testing.T) {
	ctx := context.Background()
	conn := pgtest.Database(t, "topology_multiaz_detect")
	tests := []struct {
		name  string
		setup []string
		want  topology.Engine
		code  string // SQLSTATE of ReadMultiAZ; "" when it succeeds
	}{
		{name: "nothing", want: topology.EngineNone, code: "3F000"},
		{name: "only rds_tools.show_topology(text)", setup: []string{
			"CREATE SCHEMA rds_tools",
			"CREATE FUNCTION rds_tools.show_topology(text) RETURNS TABLE (id text, endpoint text, port int) LANGUAGE sql AS $$ " + cluster + " $$",
			"CREATE FUNCTION rds_tools.dbi_resource_id() RETURNS text LANGUAGE sql AS $$ SELECT '" + idB + "' $$",
			"CREATE FUNCTION rds_tools.multi_az_db_cluster_source_dbi_resource_id() " + readerOfA,
		}, want: topology.EngineMultiAZ},
		{name: "two forms of it (to_regproc says NULL)", setup: []string{
			"CREATE FUNCTION rds_tools.show_topology() RETURNS TABLE (id text, endpoint text, port int) LANGUAGE sql AS $$ " + cluster + " $$",
		}, want: topology.EngineMultiAZ},
		{name: "an RDS instance: show_topology alone (its blue/green metadata), no cluster", setup: []string{
			"DROP FUNCTION rds_tools.multi_az_db_cluster_source_dbi_resource_id()",
		}, want: topology.EngineNone, code: "42883"},
		{name: "without the id functions", setup: []string{
			"CREATE FUNCTION rds_tools.multi_az_db_cluster_source_dbi_resource_id() " + readerOfA,
			"DROP FUNCTION rds_tools.dbi_resource_id()",
		}, want: topology.EngineMultiAZ, code: "42883"},
		{name: "Aurora's first", setup: []string{
			"CREATE FUNCTION pg_catalog.aurora_replica_status() RETURNS TABLE (server_id text, session_id text) LANGUAGE sql AS $$ VALUES ('orders-1'::text, 'MASTER_SESSION_ID'::text) $$",
		}, want: topology.EngineAurora, code: "42883"},
		{name: "no show_topology", setup: []string{
			"DROP FUNCTION pg_catalog.aurora_replica_status()",
			"DROP FUNCTION rds_tools.show_topology(text)", "DROP FUNCTION rds_tools.show_topology()",
			"CREATE FUNCTION rds_tools.dbi_resource_id() RETURNS text LANGUAGE sql AS $$ SELECT '" + idB + "' $$",
		}, want: topology.EngineNone, code: "42883"},
	}
	// The cases build on each other.
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, q := range tt.setup {
				if _, err := conn.Exec(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			got, err := topology.Detect(ctx, conn)
			if err != nil || got != tt.want {
				t.Errorf("Detect = %v, %v; want %v", got, err, tt.want)
			}
			rows, _, err := topology.ReadMultiAZ(ctx, conn)
			var pe *pgconn.PgError
			switch {
			case tt.code == "" && err != nil:
				t.Errorf("ReadMultiAZ: %v", err)
			case tt.code == "" && !reflect.DeepEqual(rows, clusterRows(idA)):
				t.Errorf("ReadMultiAZ = %+v", rows)
			case tt.code != "" && (!errors.As(err, &pe) || pe.Code != tt.code):
				t.Errorf("ReadMultiAZ: %v; want SQLSTATE %s", err, tt.code)
			}
		})
	}
}
