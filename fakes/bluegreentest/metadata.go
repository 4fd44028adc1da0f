package bluegreentest

import (
	"context"
	"fmt"

	"github.com/holdfast-db/holdfast/internal/enum"
	"github.com/jackc/pgx/v5"
)

// Engine selects which metadata function a database gets.
type Engine int

const (
	// Aurora installs pg_catalog.get_blue_green_fast_switchover_metadata(text),
	// returning (version text, endpoint text, port integer, role text,
	// status text), as Aurora PostgreSQL has it.
	Aurora Engine = iota + 1
	// RDS installs rds_tools.show_topology(text), returning (id bigint,
	// endpoint text, port integer, role text, status text, version text), as
	// the rds_tools extension of RDS PostgreSQL has it.
	RDS
)

var engineNames = [...]string{Aurora: "aurora", RDS: "rds"}

// String returns "aurora" or "rds".
func (e Engine) String() string { return enum.Name("Engine", e, engineNames[:]) }

// Function names, as RDS has them.
const (
	AuroraFunction = "pg_catalog.get_blue_green_fast_switchover_metadata"
	RDSFunction    = "rds_tools.show_topology"
)

// Metadata statuses, as RDS writes them in the status column.
const (
	StatusAvailable      = "AVAILABLE"
	StatusInitiated      = "SWITCHOVER_INITIATED"
	StatusInProgress     = "SWITCHOVER_IN_PROGRESS"
	StatusPostProcessing = "SWITCHOVER_IN_POST_PROCESSING"
	StatusCompleted      = "SWITCHOVER_COMPLETED"
)

// Version is the value of the version column RDS writes.
const Version = "1.0"

// Values of the role column ([Row].Role), as RDS writes them. They are the
// text holdfast's blue/green monitors parse into their roles
// (bluegreen.MonitorStatus.Role "SOURCE", "TARGET").
const (
	RowRoleSource = "BLUE_GREEN_DEPLOYMENT_SOURCE"
	RowRoleTarget = "BLUE_GREEN_DEPLOYMENT_TARGET"
)

// Row is one row of blue/green metadata, as the functions return it.
type Row struct {
	ID       int64  // the id column (RDS only)
	Version  string // "1.0" when empty
	Endpoint string
	Port     int
	Role     string // RowRoleSource or RowRoleTarget
	Status   string // one of the Status constants
}

// The control table and the functions. The functions read the control
// table, so a test changes what they return with plain INSERT/UPDATE, and
// raise an error while holdfast_fake.bluegreen_control.fail is set.
var installSchema = `
CREATE SCHEMA IF NOT EXISTS holdfast_fake;
CREATE TABLE IF NOT EXISTS holdfast_fake.bluegreen_metadata (
	ord      serial PRIMARY KEY,
	id       bigint,
	version  text,
	endpoint text,
	port     integer,
	role     text,
	status   text
);` + oneRowTable("holdfast_fake.bluegreen_control", "fail")

// oneRowTable is the SQL that creates table, unless it exists, with its
// one row, of one text column (NULL at first): a control table that the
// fake's functions read.
func oneRowTable(table, column string) string {
	return `
CREATE TABLE IF NOT EXISTS ` + table + ` (
	one boolean PRIMARY KEY DEFAULT true CHECK (one),
	` + column + ` text
);
INSERT INTO ` + table + ` DEFAULT VALUES ON CONFLICT DO NOTHING;
`
}

// installAurora and installRDS create the metadata function of each
// engine.
var (
	installAurora = metadataFunction("pg_catalog.get_blue_green_fast_switchover_metadata",
		"version text, endpoint text, port integer, role text, status text",
		"m.version, m.endpoint, m.port, m.role, m.status")
	installRDS = "\nCREATE SCHEMA IF NOT EXISTS rds_tools;" + metadataFunction("rds_tools.show_topology",
		"id bigint, endpoint text, port integer, role text, status text, version text",
		"m.id, m.endpoint, m.port, m.role, m.status, m.version")
)

// metadataFunction is the SQL of a metadata function: name(text) raises
// holdfast_fake.bluegreen_control.fail when it is set, else returns the
// rows of holdfast_fake.bluegreen_metadata m: the columns selected, as
// the columns of the table it returns.
func metadataFunction(name, returns, selected string) string {
	return `
CREATE OR REPLACE FUNCTION ` + name + `(text)
RETURNS TABLE (` + returns + `)
LANGUAGE plpgsql STABLE AS $fn$
#variable_conflict use_column
DECLARE msg text;
BEGIN
	SELECT c.fail INTO msg FROM holdfast_fake.bluegreen_control c;
	IF msg IS NOT NULL THEN RAISE EXCEPTION '%', msg; END IF;
	RETURN QUERY SELECT ` + selected + `
		FROM holdfast_fake.bluegreen_metadata m ORDER BY m.ord;
END
$fn$;
`
}

// Metadata is the fake metadata of one database: a control table and the
// functions of the chosen engines reading it. Each method opens a short
// superuser connection to the database. A Metadata is safe for concurrent
// use; concurrent writes apply in some order.
type Metadata struct {
	dsn     string
	engines []Engine
}

// Install creates the control table and the metadata function of each
// engine (Aurora when none is given) in the database at dsn, which must
// allow a superuser to create functions in pg_catalog (PostgreSQL 15 does,
// without allow_system_table_mods), and for Aurora the topology function
// aurora_replica_status() with its own control table ([Metadata.SetTopology])
// and aurora_db_instance_identifier() with its own ([Metadata.SetInstanceID]).
// It is idempotent. The metadata and topology start empty: the functions
// return no rows, and aurora_db_instance_identifier() NULL.
func Install(ctx context.Context, dsn string, engines ...Engine) (*Metadata, error) {
	if len(engines) == 0 {
		engines = []Engine{Aurora}
	}
	sql := installSchema
	for _, e := range engines {
		switch e {
		case Aurora:
			sql += installAurora + installTopology
		case RDS:
			sql += installRDS
		default:
			return nil, fmt.Errorf("fakes/bluegreentest: unknown engine %v", e)
		}
	}
	m := &Metadata{dsn: dsn, engines: engines}
	if err := m.exec(ctx, "install metadata", func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, sql)
		return err
	}); err != nil {
		return nil, err
	}
	return m, nil
}

// Engines returns the engines whose function Install created.
func (m *Metadata) Engines() []Engine { return append([]Engine(nil), m.engines...) }

// exec runs fn in a transaction on a connection of its own; its error
// says what failed.
func (m *Metadata) exec(ctx context.Context, what string, fn func(pgx.Tx) error) error {
	if err := m.tx(ctx, fn); err != nil {
		return fmt.Errorf("fakes/bluegreentest: %s: %w", what, err)
	}
	return nil
}

func (m *Metadata) tx(ctx context.Context, fn func(pgx.Tx) error) error {
	conn, err := pgx.Connect(ctx, m.dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	// READ WRITE explicitly: the control table stays writable on a server
	// or database made read-only (as blue is during a switchover).
	return pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{AccessMode: pgx.ReadWrite}, fn)
}

// SetRows replaces every row, in one transaction: a poll sees the old rows
// or the new ones, never a mix.
func (m *Metadata) SetRows(ctx context.Context, rows ...Row) error {
	return m.exec(ctx, "set rows", func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "DELETE FROM holdfast_fake.bluegreen_metadata"); err != nil {
			return err
		}
		for i, r := range rows {
			v := r.Version
			if v == "" {
				v = Version
			}
			id := r.ID
			if id == 0 {
				id = int64(i + 1)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO holdfast_fake.bluegreen_metadata (id, version, endpoint, port, role, status)
				VALUES ($1, $2, $3, $4, $5, $6)`, id, v, r.Endpoint, r.Port, r.Role, r.Status); err != nil {
				return err
			}
		}
		return nil
	})
}

// Rows returns the rows the functions return now.
func (m *Metadata) Rows(ctx context.Context) ([]Row, error) {
	var out []Row
	if err := m.exec(ctx, "read rows", func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT coalesce(id, 0), coalesce(version, ''), coalesce(endpoint, ''),
			coalesce(port, 0), coalesce(role, ''), coalesce(status, '') FROM holdfast_fake.bluegreen_metadata ORDER BY ord`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var r Row
			if err := rows.Scan(&r.ID, &r.Version, &r.Endpoint, &r.Port, &r.Role, &r.Status); err != nil {
				return err
			}
			out = append(out, r)
		}
		return rows.Err()
	}); err != nil {
		return nil, err
	}
	return out, nil
}

// Fail makes the functions raise an error with message msg (as RDS does
// when it cannot retrieve the metadata), or stop raising when msg is "".
func (m *Metadata) Fail(ctx context.Context, msg string) error {
	var arg any
	if msg != "" {
		arg = msg
	}
	return m.exec(ctx, "set failure", func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "UPDATE holdfast_fake.bluegreen_control SET fail = $1", arg)
		return err
	})
}

// Uninstall drops the metadata functions (the control table stays), as on
// an engine version without blue/green metadata. aurora_replica_status()
// stays: see [Metadata.UninstallTopology].
func (m *Metadata) Uninstall(ctx context.Context) error {
	return m.exec(ctx, "uninstall", func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `DROP FUNCTION IF EXISTS pg_catalog.get_blue_green_fast_switchover_metadata(text);
			DROP FUNCTION IF EXISTS rds_tools.show_topology(text)`)
		return err
	})
}
