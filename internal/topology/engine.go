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
	// EngineGlobal is an Aurora Global Database of more than one Region:
	// aurora_global_db_instance_status() (DetectGlobal), every Region's
	// instances with their Region.
	EngineGlobal
)

func (e Engine) String() string {
	switch e {
	case EngineAurora:
		return "aurora"
	case EngineMultiAZ:
		return "multi-az"
	case EngineGlobal:
		return "aurora-global"
	}
	return "none"
}

// detectQuery finds Aurora's function with to_regproc, and
// rds_tools.show_topology in pg_proc by name: it may have several forms
// (with a client name of type text, varchar or name, without), and
// to_regproc answers NULL for a name with more than one. It also reads
// the name of an owner of each engine's functions that is neither a
// superuser nor rdsadmin (NULL: none), so that an engine found is trusted
// or refused in the same statement.
//
// A Multi-AZ DB cluster also has rds_tools.multi_az_db_cluster_source_dbi_resource_id():
// a single RDS instance has rds_tools.show_topology() too (it carries a
// blue/green deployment's metadata there) but no cluster topology, as the
// AWS wrappers tell them apart.
var detectQuery = `SELECT pg_catalog.to_regproc($1) IS NOT NULL, (SELECT pg_catalog.count(DISTINCT p.proname) OPERATOR(pg_catalog.=) 2
	FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) p.pronamespace
	WHERE n.nspname OPERATOR(pg_catalog.=) 'rds_tools'
	AND p.proname OPERATOR(pg_catalog.=) ANY (ARRAY['show_topology', 'multi_az_db_cluster_source_dbi_resource_id']::pg_catalog.name[])),
	COALESCE(` + auroraUntrusted + `),
	COALESCE(` + multiAZUntrusted + `)`

// auroraUntrusted and multiAZUntrusted are the owner checks of each
// engine's functions (UntrustedOwnerSQL), for a COALESCE.
var (
	auroraUntrusted  = UntrustedOwnerSQL(AuroraFunction) + ", " + UntrustedOwnerSQL(AuroraSelfFunction)
	multiAZUntrusted = UntrustedOwnerSQL(MultiAZFunction) + ", " + UntrustedOwnerSQL(ResourceIDFunction) + ", " +
		UntrustedOwnerSQL(SourceResourceIDFunction)
)

// AuroraSelfFunction returns the identifier of the Aurora instance the
// server is.
const AuroraSelfFunction = "pg_catalog.aurora_db_instance_identifier"

// Detect returns which topology function the server has, by name, Aurora's
// first. An engine whose functions a role other than a superuser or
// rdsadmin owns is returned with an *UntrustedError: its rows must not
// be used.
func Detect(ctx context.Context, conn *pgx.Conn) (Engine, error) {
	var aurora, multiAZ bool
	var auroraOwner, multiAZOwner *string
	err := conn.QueryRow(ctx, detectQuery, pgx.QueryExecModeSimpleProtocol, AuroraFunction).Scan(&aurora, &multiAZ, &auroraOwner, &multiAZOwner)
	switch {
	case err != nil:
		return EngineNone, err
	case aurora:
		return EngineAurora, untrusted(AuroraFunction, auroraOwner)
	case multiAZ:
		return EngineMultiAZ, untrusted(MultiAZFunction, multiAZOwner)
	}
	return EngineNone, nil
}

// untrusted returns an *UntrustedError for fn (one of an engine's
// functions) when owner is not nil.
func untrusted(fn string, owner *string) error {
	if owner == nil {
		return nil
	}
	return CheckTrust(fn, []byte(*owner))
}

// Read reads the cluster's topology with engine's function. A row is the
// writer when the cluster says so; Self is the server's own id.
func Read(ctx context.Context, conn *pgx.Conn, engine Engine) (rows []Row, bad []error, err error) {
	switch engine {
	case EngineMultiAZ:
		return ReadMultiAZ(ctx, conn)
	case EngineGlobal:
		return ReadGlobal(ctx, conn)
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
	var owner *string
	err = conn.QueryRow(ctx, auroraSelfQuery, pgx.QueryExecModeSimpleProtocol).Scan(&id, &inRecovery, &ro, &owner)
	if err == nil {
		err = untrusted(AuroraSelfFunction, owner)
	}
	return id, err == nil && !inRecovery && ro == "off", err
}

// auroraSelfQuery reads the Aurora instance's identifier, whether it is
// writable, and an untrusted owner of the identifier's function.
var auroraSelfQuery = "SELECT pg_catalog.lower(" + AuroraSelfFunction + "()), pg_catalog.pg_is_in_recovery(), " +
	"pg_catalog.current_setting('transaction_read_only'), " + UntrustedOwnerSQL(AuroraSelfFunction)
