package topology

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// The functions of an RDS Multi-AZ DB cluster (extension rds_tools), as the
// AWS JDBC and Go wrappers read them:
//
//   - MultiAZFunction lists the cluster's DB instances, one row each: id
//     (the instance's dbi resource id, "db-ABCDEFGHIJKLMNOPQRSTUVWXYZ"),
//     endpoint (its instance endpoint) and port. It takes a client name
//     (text); the AWS Go wrapper calls it without.
//   - ResourceIDFunction returns the server's own dbi resource id.
//   - SourceResourceIDFunction returns, on a reader, the dbi resource id of
//     the writer it replicates from; on the writer, nothing (or its own id:
//     the JDBC wrapper filters that out).
const (
	MultiAZFunction          = "rds_tools.show_topology"
	ResourceIDFunction       = "rds_tools.dbi_resource_id"
	SourceResourceIDFunction = "rds_tools.multi_az_db_cluster_source_dbi_resource_id"
)

// MultiAZClient is the client name passed to rds_tools.show_topology (the
// AWS wrappers pass their name and version; the server does not document
// what it does with it).
const MultiAZClient = "holdfast"

// Errors of [ReadMultiAZ] and [Self] on a Multi-AZ DB cluster, matched with
// errors.Is.
var (
	// ErrNoResourceID: rds_tools.dbi_resource_id() returned NULL or an
	// empty string, so the server cannot be found in the topology (and
	// neither can the writer, when the server says it is the writer).
	ErrNoResourceID = errors.New("topology: " + ResourceIDFunction + "() returned no id")
	// ErrSelfNotListed: the server's own dbi resource id is in no usable
	// row of rds_tools.show_topology().
	ErrSelfNotListed = errors.New("topology: this server is not in " + MultiAZFunction + "()")
)

// multiAZIDsQuery finds which forms of show_topology exist (by name, so
// that a parameter declared text, varchar or name is found alike), and
// reads the server's own id, the writer's id as this server sees it, and
// whether it is writable, in one statement; and the name of an owner of
// the three functions that is neither a superuser nor rdsadmin (NULL:
// none). The id functions are read as the JDBC wrapper does (SELECT <name>
// FROM <name>()), which fits a scalar function and a set-returning one:
// the source function returns no row on the writer, which the scalar
// subquery turns into NULL.
var multiAZIDsQuery = `SELECT
	COALESCE((SELECT pg_catalog.bool_or(p.pronargs OPERATOR(pg_catalog.=) 1) FROM pg_catalog.pg_proc p
		JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) p.pronamespace
		WHERE n.nspname OPERATOR(pg_catalog.=) 'rds_tools' AND p.proname OPERATOR(pg_catalog.=) 'show_topology'), false),
	COALESCE((SELECT pg_catalog.bool_or(p.pronargs OPERATOR(pg_catalog.=) 0) FROM pg_catalog.pg_proc p
		JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) p.pronamespace
		WHERE n.nspname OPERATOR(pg_catalog.=) 'rds_tools' AND p.proname OPERATOR(pg_catalog.=) 'show_topology'), false),
	(SELECT dbi_resource_id::pg_catalog.text FROM ` + ResourceIDFunction + `() LIMIT 1),
	(SELECT multi_az_db_cluster_source_dbi_resource_id::pg_catalog.text FROM ` + SourceResourceIDFunction + `() LIMIT 1),
	pg_catalog.pg_is_in_recovery(),
	pg_catalog.current_setting('transaction_read_only'),
	COALESCE(` + multiAZUntrusted + `)`

// multiAZState is what one server says about a Multi-AZ DB cluster.
type multiAZState struct {
	rows     []Row
	bad      []error
	self     string // own dbi resource id
	writer   string // the writer's dbi resource id: the source id, or self
	writable bool   // not in recovery, not read-only
}

// ReadMultiAZ reads an RDS Multi-AZ DB cluster's instances from
// rds_tools.show_topology(): a row per instance, ServerID the first label
// of its endpoint (lowercased), Endpoint and Port as listed (Port 0 when
// NULL or absent), ResourceID its id. The writer is the row whose id is
// what rds_tools.multi_az_db_cluster_source_dbi_resource_id() returns or,
// when that is empty or NULL (the server is the writer), the server's own
// rds_tools.dbi_resource_id(); when that id is in no row, no row is the
// writer. bad lists the rows it could not use (no id, an endpoint that is
// not an instance endpoint, a bad port). A function that is missing is the
// server's error (undefined_function 42883 or invalid_schema_name 3F000,
// wrapped); a writer-side server without an id of its own is
// [ErrNoResourceID].
func ReadMultiAZ(ctx context.Context, conn *pgx.Conn) ([]Row, []error, error) {
	st, err := readMultiAZ(ctx, conn)
	if err != nil {
		return nil, nil, err
	}
	if st.writer == "" {
		return nil, nil, fmt.Errorf("%w (and %s() returned none)", ErrNoResourceID, SourceResourceIDFunction)
	}
	return st.rows, st.bad, nil
}

// selfMultiAZ returns the first label of the endpoint of the row whose id
// is the server's own dbi resource id, and whether the server is writable.
func selfMultiAZ(ctx context.Context, conn *pgx.Conn) (string, bool, error) {
	st, err := readMultiAZ(ctx, conn)
	if err != nil {
		return "", false, err
	}
	if st.self == "" {
		return "", false, ErrNoResourceID
	}
	for _, r := range st.rows {
		if strings.EqualFold(r.ResourceID, st.self) {
			return r.ServerID, st.writable, nil
		}
	}
	return "", false, fmt.Errorf("%w: no usable row with id %q (%d rows, %d set aside)",
		ErrSelfNotListed, Truncate(st.self, 64), len(st.rows), len(st.bad))
}

func readMultiAZ(ctx context.Context, conn *pgx.Conn) (multiAZState, error) {
	var st multiAZState
	var withArg, noArg, inRecovery bool
	var self, source, owner *string
	var ro string
	if err := conn.QueryRow(ctx, multiAZIDsQuery, pgx.QueryExecModeSimpleProtocol).
		Scan(&withArg, &noArg, &self, &source, &inRecovery, &ro, &owner); err != nil {
		return st, fmt.Errorf("topology: reading %s() and %s(): %w", ResourceIDFunction, SourceResourceIDFunction, err)
	}
	if err := untrusted(MultiAZFunction, owner); err != nil {
		return st, err
	}
	st.writable = !inRecovery && ro == "off"
	if self != nil {
		st.self = strings.TrimSpace(*self)
	}
	if source != nil {
		st.writer = strings.TrimSpace(*source)
	}
	if st.writer == "" {
		st.writer = st.self
	}

	// The client name goes as an untyped literal (simple protocol), which
	// fits a text, varchar or name parameter. Without a one-argument form,
	// the function is called without one; without any form, the server
	// says so.
	query, args := TrustedRead(MultiAZFunction, "$1"), []any{pgx.QueryExecModeSimpleProtocol, MultiAZClient}
	if noArg && !withArg {
		query, args = TrustedRead(MultiAZFunction, ""), []any{pgx.QueryExecModeSimpleProtocol}
	}
	rows, err := conn.Query(ctx, query, args...)
	if err != nil {
		return st, fmt.Errorf("topology: %s(): %w", MultiAZFunction, err)
	}
	defer rows.Close()
	fds := rows.FieldDescriptions()
	cols := columns(fds, "id", "endpoint", "port")
	idCol, epCol, portCol := cols[0], cols[1], cols[2]
	if idCol < 0 || epCol < 0 {
		return st, fmt.Errorf("topology: %s() has no id or endpoint column", MultiAZFunction)
	}
	trustCol, seen, extra := trustColumn(fds), 0, 0
	for rows.Next() {
		raw := rows.RawValues()
		if trustCol >= 0 {
			if err := CheckTrust(MultiAZFunction, raw[trustCol]); err != nil {
				return st, err
			}
		}
		if seen++; seen > MaxRows {
			extra++
			continue
		}
		r, err := parseMultiAZRow(raw, idCol, epCol, portCol)
		if err != nil {
			st.bad = append(st.bad, err)
			continue
		}
		r.Writer = st.writer != "" && strings.EqualFold(r.ResourceID, st.writer)
		st.rows = append(st.rows, r)
	}
	if err := rows.Err(); err != nil {
		return st, fmt.Errorf("topology: %s(): %w", MultiAZFunction, err)
	}
	if extra > 0 {
		st.bad = append(st.bad, &TooManyRowsError{Function: MultiAZFunction, Limit: MaxRows, Extra: extra})
	}
	return st, nil
}

// parseMultiAZRow parses one row of show_topology() in text form (nil for
// NULL); portCol is -1 when there is no port column.
func parseMultiAZRow(raw [][]byte, idCol, epCol, portCol int) (Row, error) {
	if raw[idCol] == nil || strings.TrimSpace(string(raw[idCol])) == "" {
		return Row{}, errors.New("topology: " + MultiAZFunction + "() row without an id")
	}
	r := Row{ResourceID: strings.TrimSpace(string(raw[idCol]))}
	if raw[epCol] == nil {
		return r, fmt.Errorf("topology: %s() row %q without an endpoint", MultiAZFunction, Truncate(r.ResourceID, 64))
	}
	r.Endpoint = NormHost(string(raw[epCol]))
	label, _ := FirstLabel(r.Endpoint)
	if !validHost(r.Endpoint) || !serverIDPattern.MatchString(label) {
		return r, fmt.Errorf("topology: %s() row %q with an invalid endpoint %q",
			MultiAZFunction, Truncate(r.ResourceID, 64), Truncate(r.Endpoint, 64))
	}
	r.ServerID = label
	if portCol >= 0 && raw[portCol] != nil {
		p, err := strconv.Atoi(strings.TrimSpace(string(raw[portCol])))
		if err != nil || p < 0 || p > 65535 {
			return r, fmt.Errorf("topology: %s() row %q with an invalid port %q",
				MultiAZFunction, Truncate(r.ResourceID, 64), Truncate(string(raw[portCol]), 16))
		}
		r.Port = p
	}
	return r, nil
}

// validHost reports whether host (normalized) is a DNS name: labels of
// letters, digits and hyphens, none empty, at most 253 bytes.
func validHost(host string) bool {
	if host == "" || len(host) > 253 {
		return false
	}
	for _, l := range strings.Split(host, ".") {
		if l == "" || len(l) > 63 {
			return false
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}
