package topology

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// Engine is the topology a server publishes.
type Engine int

// The engines.
const (
	EngineNone    Engine = iota // no topology function
	EngineAurora                // pg_catalog.aurora_replica_status()
	EngineMultiAZ               // rds_tools.show_topology() (RDS Multi-AZ DB cluster)
)

func (e Engine) String() string {
	switch e {
	case EngineAurora:
		return "aurora"
	case EngineMultiAZ:
		return "multi-az"
	}
	return "none"
}

// detectQuery finds Aurora's function with to_regproc, and
// rds_tools.show_topology in pg_proc by name: it may have several forms
// (with a client name of type text, varchar or name, without), and
// to_regproc answers NULL for a name with more than one.
//
// A Multi-AZ DB cluster also has rds_tools.multi_az_db_cluster_source_dbi_resource_id():
// a single RDS instance has rds_tools.show_topology() too (it carries a
// blue/green deployment's metadata there) but no cluster topology, as the
// AWS wrappers tell them apart.
const detectQuery = `SELECT to_regproc($1) IS NOT NULL, (SELECT count(DISTINCT p.proname) = 2 FROM pg_catalog.pg_proc p
	JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'rds_tools'
	AND p.proname IN ('show_topology', 'multi_az_db_cluster_source_dbi_resource_id'))`

// Detect returns which topology function the server has, by name, Aurora's
// first.
func Detect(ctx context.Context, conn *pgx.Conn) (Engine, error) {
	var aurora, multiAZ bool
	err := conn.QueryRow(ctx, detectQuery, pgx.QueryExecModeSimpleProtocol, AuroraFunction).Scan(&aurora, &multiAZ)
	switch {
	case err != nil:
		return EngineNone, err
	case aurora:
		return EngineAurora, nil
	case multiAZ:
		return EngineMultiAZ, nil
	}
	return EngineNone, nil
}

// Read reads the cluster's topology with engine's function. A row is the
// writer when the cluster says so; Self is the server's own id.
func Read(ctx context.Context, conn *pgx.Conn, engine Engine) (rows []Row, bad []error, err error) {
	if engine == EngineMultiAZ {
		return ReadMultiAZ(ctx, conn)
	}
	return ReadAurora(ctx, conn)
}

// Self returns the id of the server conn is connected to (the first label
// of its instance endpoint: aurora_db_instance_identifier() on Aurora; on a
// Multi-AZ DB cluster, the first label of the endpoint of the
// show_topology() row whose id is rds_tools.dbi_resource_id()) and whether
// it is writable (not in recovery, not read-only).
func Self(ctx context.Context, conn *pgx.Conn, engine Engine) (id string, writable bool, err error) {
	if engine == EngineMultiAZ {
		return selfMultiAZ(ctx, conn)
	}
	var inRecovery bool
	var ro string
	err = conn.QueryRow(ctx, "SELECT lower(aurora_db_instance_identifier()), pg_is_in_recovery(), current_setting('transaction_read_only')",
		pgx.QueryExecModeSimpleProtocol).Scan(&id, &inRecovery, &ro)
	return id, err == nil && !inRecovery && ro == "off", err
}
