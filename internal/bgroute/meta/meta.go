// Package meta reads the blue/green metadata RDS publishes: which function
// holds it, its rows, their statuses and roles, and the endpoint names they
// carry. It decides nothing: package switchover merges what it reads into a
// phase and a routing, and package bluegreen runs both.
package meta

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/holdfast-db/holdfast/internal/topology"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The metadata functions, as RDS names them.
const (
	AuroraFunction = "pg_catalog.get_blue_green_fast_switchover_metadata"
	RDSFunction    = "rds_tools.show_topology"
)

// clientID is the argument passed to the metadata functions. The AWS
// wrappers pass their name and version; its meaning on the server side is
// not documented.
const clientID = "holdfast-bluegreen"

// existsQuery finds both functions by name, whatever the type of their
// parameter (text, varchar, name) and whether they take one: for each, the
// fewest arguments an overload takes, or NULL when there is none; and
// Aurora's topology function the same way. It also reads, for each, the
// name of an owner that is neither a superuser nor rdsadmin (NULL: none):
// a function such a role created is not trusted. Every name and operator
// is schema-qualified, so that a search_path set on the database or the
// role changes nothing.
var existsQuery = `SELECT ` + minArgs + `'pg_catalog' AND p.proname OPERATOR(pg_catalog.=) 'get_blue_green_fast_switchover_metadata'), ` +
	minArgs + `'rds_tools' AND p.proname OPERATOR(pg_catalog.=) 'show_topology'), ` +
	minArgs + `'pg_catalog' AND p.proname OPERATOR(pg_catalog.=) 'aurora_replica_status'), ` +
	topology.UntrustedOwnerSQL(AuroraFunction) + `, ` + topology.UntrustedOwnerSQL(RDSFunction) + `, ` +
	topology.UntrustedOwnerSQL(topology.AuroraFunction)

const minArgs = `(SELECT pg_catalog.min(p.pronargs) FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) p.pronamespace WHERE n.nspname OPERATOR(pg_catalog.=) `

// Source is the metadata function found on a server: its engine and
// whether it is called without an argument (its only overload takes none),
// and whether the server has Aurora's topology function
// (aurora_replica_status() without arguments).
type Source struct {
	Engine   Engine
	NoArg    bool
	Topology bool
}

// Row is one parsed row of metadata.
type Row struct {
	ID          string // the optional id column, as text
	Version     string // as read
	Endpoint    string // normalized host name
	Port        int    // 0 when NULL
	Role        Role
	Status      string // as read
	Phase       Phase  // NotCreated when !KnownStatus
	KnownStatus bool
}

// RequiredColumns are the columns every metadata row has; they are read by
// name, case-insensitively, and an id column is read when present.
var RequiredColumns = []string{"version", "endpoint", "port", "role", "status"}

// missingColumnError says that the metadata lacks a required column.
type missingColumnError struct{ column string }

func (e *missingColumnError) Error() string {
	return "bluegreen: metadata has no " + strconv.Quote(e.column) + " column"
}

// ColumnIndex maps the required columns (and id) to their positions among
// names.
func ColumnIndex(names []string) (map[string]int, error) {
	idx := make(map[string]int, len(names))
	for i, n := range names {
		n = strings.ToLower(n)
		if _, dup := idx[n]; !dup {
			idx[n] = i
		}
	}
	for _, c := range RequiredColumns {
		if _, ok := idx[c]; !ok {
			return nil, &missingColumnError{c}
		}
	}
	return idx, nil
}

// ParseRow parses one row in text form; raw[i] is nil for NULL. An error
// means the row is unusable (no endpoint, a bad port); an unknown role,
// status or version is not an error: it is flagged in the row.
func ParseRow(idx map[string]int, raw [][]byte) (Row, error) {
	get := func(col string) (string, bool) {
		i, ok := idx[col]
		if !ok || i >= len(raw) || raw[i] == nil {
			return "", false
		}
		return string(raw[i]), true
	}
	var r Row
	r.ID, _ = get("id")
	r.Version, _ = get("version")
	ep, _ := get("endpoint")
	r.Endpoint = topology.NormHost(ep)
	if r.Endpoint == "" {
		return r, errors.New("bluegreen: metadata row without an endpoint")
	}
	if len(r.Endpoint) > 253 || strings.ContainsAny(r.Endpoint, " /\\@?#\t\r\n\x00") ||
		strings.HasPrefix(r.Endpoint, ".") || strings.HasSuffix(r.Endpoint, ".") || strings.Contains(r.Endpoint, "..") {
		return r, fmt.Errorf("bluegreen: metadata row with an invalid endpoint %q", topology.Truncate(r.Endpoint, 64))
	}
	if p, ok := get("port"); ok {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 0 || n > 65535 {
			return r, fmt.Errorf("bluegreen: metadata row for %s with an invalid port %q", r.Endpoint, topology.Truncate(p, 16))
		}
		r.Port = n
	}
	role, _ := get("role")
	r.Role = ParseRole(role)
	r.Status, _ = get("status")
	r.Phase, r.KnownStatus = ParseStatus(r.Status)
	return r, nil
}

// Detect returns which metadata function exists (Engine EngineAuto: none),
// given the wanted engine, and whether the topology function exists too.
// It looks the functions up by name, so that a parameter declared varchar
// or name, or none, is found too.
//
// A function owned by a role that is neither a superuser nor rdsadmin is
// not used: Detect returns the Source it found with an
// *topology.UntrustedError, and Aurora's topology function, when such a
// role owns it, is left out (Topology false).
func Detect(ctx context.Context, conn *pgx.Conn, want Engine) (Source, error) {
	var aurora, rds, topo *int
	var auroraOwner, rdsOwner, topoOwner *string
	if err := conn.QueryRow(ctx, existsQuery, pgx.QueryExecModeSimpleProtocol).
		Scan(&aurora, &rds, &topo, &auroraOwner, &rdsOwner, &topoOwner); err != nil {
		return Source{}, err
	}
	hasTopo := topo != nil && *topo == 0 && topoOwner == nil
	switch {
	case aurora != nil && want != EngineRDS:
		return Source{Engine: EngineAurora, NoArg: *aurora == 0, Topology: hasTopo}, untrusted(AuroraFunction, auroraOwner)
	case rds != nil && want != EngineAurora:
		return Source{Engine: EngineRDS, NoArg: *rds == 0, Topology: hasTopo}, untrusted(RDSFunction, rdsOwner)
	}
	return Source{}, nil
}

func untrusted(fn string, owner *string) error {
	if owner == nil {
		return nil
	}
	return topology.CheckTrust(fn, []byte(*owner))
}

// Read reads the metadata of src. It returns the rows, the rows it could
// not parse (as errors), or a query error.
func Read(ctx context.Context, conn *pgx.Conn, src Source) ([]Row, []error, error) {
	fn := AuroraFunction
	if src.Engine == EngineRDS {
		fn = RDSFunction
	}
	// The simple protocol returns every column as text, so columns of any
	// type (port as int4, int8 or text; version as text or numeric) parse
	// alike; the argument goes as an untyped literal, which fits a text,
	// varchar or name parameter.
	//
	// The statement also reads, as a column of each row, an owner of the
	// function that is neither a superuser nor rdsadmin: a function
	// replaced since Detect is refused at once.
	query, args := topology.TrustedRead(fn, "$1"), []any{pgx.QueryExecModeSimpleProtocol, clientID}
	if src.NoArg {
		query, args = topology.TrustedRead(fn, ""), []any{pgx.QueryExecModeSimpleProtocol}
	}
	rows, err := conn.Query(ctx, query, args...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	fds := rows.FieldDescriptions()
	names := make([]string, len(fds))
	trustCol := -1
	for i, fd := range fds {
		names[i] = fd.Name
		if fd.Name == topology.TrustColumn {
			trustCol = i
		}
	}
	idx, err := ColumnIndex(names)
	if err != nil {
		return nil, nil, err
	}
	var out []Row
	var bad []error
	for rows.Next() {
		raw := rows.RawValues()
		if trustCol >= 0 {
			if err := topology.CheckTrust(fn, raw[trustCol]); err != nil {
				return nil, nil, err
			}
		}
		r, err := ParseRow(idx, raw)
		if err != nil {
			bad = append(bad, err)
			continue
		}
		out = append(out, r)
	}
	return out, bad, rows.Err()
}

// IsAbsent reports whether err says that the metadata function or its
// schema is gone (undefined_function, invalid_schema_name).
func IsAbsent(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "42883" || pe.Code == "3F000")
}

// View is what the rows say about one role.
type View struct {
	Found     bool     // a usable row of this role exists
	Phase     Phase    // from the deciding row
	Known     bool     // the deciding row's status is known
	Status    string   // the deciding row's raw status
	Endpoint  string   // the deciding row's endpoint
	Port      int      // the deciding row's port
	Endpoints []string // every non-old endpoint of the role, sorted, with reader twins
	Ports     map[string]int
}

// ViewOf picks the deciding row of role among rows: the writer cluster
// endpoint, else the first instance endpoint by name, else the first row,
// in each case skipping "-old1" endpoints when another exists.
func ViewOf(rows []Row, role Role) View {
	var mine []Row
	for _, r := range rows {
		if r.Role == role {
			mine = append(mine, r)
		}
	}
	v := View{Ports: map[string]int{}}
	if len(mine) == 0 {
		return v
	}
	sort.SliceStable(mine, func(i, j int) bool { return mine[i].Endpoint < mine[j].Endpoint })
	pick := -1
	for pass := 0; pass < 3 && pick < 0; pass++ {
		for i, r := range mine {
			old := topology.IsOld(r.Endpoint)
			if (pass == 0 && !old && topology.KindOf(r.Endpoint) == topology.KindWriterCluster) ||
				(pass == 1 && !old && topology.KindOf(r.Endpoint) == topology.KindInstance) ||
				(pass == 2 && !old) {
				pick = i
				break
			}
		}
	}
	if pick < 0 {
		pick = 0
	}
	d := mine[pick]
	v.Found, v.Phase, v.Known, v.Status, v.Endpoint, v.Port = true, d.Phase, d.KnownStatus, d.Status, d.Endpoint, d.Port
	seen := map[string]bool{}
	add := func(h string, port int) {
		if !seen[h] {
			seen[h] = true
			v.Endpoints = append(v.Endpoints, h)
			v.Ports[h] = port
		}
	}
	for _, r := range mine {
		if topology.IsOld(r.Endpoint) {
			continue
		}
		add(r.Endpoint, r.Port)
		if topology.KindOf(r.Endpoint) == topology.KindWriterCluster {
			add(readerTwin(r.Endpoint), r.Port)
		}
	}
	sort.Strings(v.Endpoints)
	return v
}
