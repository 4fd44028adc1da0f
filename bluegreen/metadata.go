package bluegreen

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

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

// existsQuery checks for both functions at once. to_regprocedure returns
// NULL, without an error, when the function or its schema does not exist.
const existsQuery = `SELECT pg_catalog.to_regprocedure('` + AuroraFunction + `(text)') IS NOT NULL, ` +
	`pg_catalog.to_regprocedure('` + RDSFunction + `(text)') IS NOT NULL`

// obsKind tells apart what a monitor's poll found.
type obsKind int

const (
	obsNoConn obsKind = iota // no connection to the database
	obsAbsent                // the metadata function does not exist
	obsFailed                // the existence check or the status query failed
	obsEmpty                 // the function returned no rows
	obsRows                  // the function returned rows
)

var obsNames = [...]string{
	obsNoConn: "no-connection",
	obsAbsent: "absent",
	obsFailed: "failed",
	obsEmpty:  "empty",
	obsRows:   "rows",
}

func (k obsKind) String() string { return obsNames[k] }

// metaRow is one parsed row of metadata.
type metaRow struct {
	id          string // the optional id column, as text
	version     string // as read
	endpoint    string // normalized host name
	port        int    // 0 when NULL
	role        Role
	status      string // as read
	phase       Phase  // NotCreated when !knownStatus
	knownStatus bool
}

// Column names, read case-insensitively.
var requiredColumns = []string{"version", "endpoint", "port", "role", "status"}

// missingColumnError says that the metadata lacks a required column.
type missingColumnError struct{ column string }

func (e *missingColumnError) Error() string {
	return "bluegreen: metadata has no " + strconv.Quote(e.column) + " column"
}

// columnIndex maps the required columns (and id) to their positions.
func columnIndex(names []string) (map[string]int, error) {
	idx := make(map[string]int, len(names))
	for i, n := range names {
		n = strings.ToLower(n)
		if _, dup := idx[n]; !dup {
			idx[n] = i
		}
	}
	for _, c := range requiredColumns {
		if _, ok := idx[c]; !ok {
			return nil, &missingColumnError{c}
		}
	}
	return idx, nil
}

// parseRow parses one row in text form; raw[i] is nil for NULL. An error
// means the row is unusable (no endpoint, a bad port); an unknown role,
// status or version is not an error: it is flagged in the row.
func parseRow(idx map[string]int, raw [][]byte) (metaRow, error) {
	get := func(col string) (string, bool) {
		i, ok := idx[col]
		if !ok || i >= len(raw) || raw[i] == nil {
			return "", false
		}
		return string(raw[i]), true
	}
	var r metaRow
	r.id, _ = get("id")
	r.version, _ = get("version")
	ep, _ := get("endpoint")
	r.endpoint = normHost(ep)
	if r.endpoint == "" {
		return r, errors.New("bluegreen: metadata row without an endpoint")
	}
	if len(r.endpoint) > 253 || strings.ContainsAny(r.endpoint, " /\\@?#\t\r\n\x00") ||
		strings.HasPrefix(r.endpoint, ".") || strings.HasSuffix(r.endpoint, ".") || strings.Contains(r.endpoint, "..") {
		return r, fmt.Errorf("bluegreen: metadata row with an invalid endpoint %q", truncate(r.endpoint, 64))
	}
	if p, ok := get("port"); ok {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 0 || n > 65535 {
			return r, fmt.Errorf("bluegreen: metadata row for %s with an invalid port %q", r.endpoint, truncate(p, 16))
		}
		r.port = n
	}
	role, _ := get("role")
	r.role = ParseRole(role)
	r.status, _ = get("status")
	r.phase, r.knownStatus = ParseStatus(r.status)
	return r, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// versionKnown reports whether v is a version this package knows.
func versionKnown(v string) bool { return strings.TrimSpace(v) == KnownVersion }

// detect returns which metadata function exists (EngineAuto: none), given
// the wanted engine.
func detect(ctx context.Context, conn *pgx.Conn, want Engine) (Engine, error) {
	var aurora, rds bool
	if err := conn.QueryRow(ctx, existsQuery, pgx.QueryExecModeSimpleProtocol).Scan(&aurora, &rds); err != nil {
		return EngineAuto, err
	}
	switch {
	case aurora && want != EngineRDS:
		return EngineAurora, nil
	case rds && want != EngineAurora:
		return EngineRDS, nil
	}
	return EngineAuto, nil
}

// readRows reads the metadata of engine e. It returns the rows, the rows it
// could not parse (as errors), or a query error.
func readRows(ctx context.Context, conn *pgx.Conn, e Engine) ([]metaRow, []error, error) {
	fn := AuroraFunction
	if e == EngineRDS {
		fn = RDSFunction
	}
	// The simple protocol returns every column as text, so columns of any
	// type (port as int4, int8 or text; version as text or numeric) parse
	// alike.
	rows, err := conn.Query(ctx, "SELECT * FROM "+fn+"($1)", pgx.QueryExecModeSimpleProtocol, clientID)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	fds := rows.FieldDescriptions()
	names := make([]string, len(fds))
	for i, fd := range fds {
		names[i] = fd.Name
	}
	idx, err := columnIndex(names)
	if err != nil {
		return nil, nil, err
	}
	var out []metaRow
	var bad []error
	for rows.Next() {
		r, err := parseRow(idx, rows.RawValues())
		if err != nil {
			bad = append(bad, err)
			continue
		}
		out = append(out, r)
	}
	return out, bad, rows.Err()
}

// isAbsentError reports whether err says that the metadata function or its
// schema is gone (undefined_function, invalid_schema_name).
func isAbsentError(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "42883" || pe.Code == "3F000")
}

// roleView is what the rows say about one role.
type roleView struct {
	found     bool     // a usable row of this role exists
	phase     Phase    // from the deciding row
	known     bool     // the deciding row's status is known
	status    string   // the deciding row's raw status
	endpoint  string   // the deciding row's endpoint
	port      int      // the deciding row's port
	endpoints []string // every non-old endpoint of the role, sorted, with reader twins
	ports     map[string]int
}

// viewOf picks the deciding row of role among rows: the writer cluster
// endpoint, else the first instance endpoint by name, else the first row,
// in each case skipping "-old1" endpoints when another exists.
func viewOf(rows []metaRow, role Role) roleView {
	var mine []metaRow
	for _, r := range rows {
		if r.role == role {
			mine = append(mine, r)
		}
	}
	v := roleView{ports: map[string]int{}}
	if len(mine) == 0 {
		return v
	}
	sort.SliceStable(mine, func(i, j int) bool { return mine[i].endpoint < mine[j].endpoint })
	pick := -1
	for pass := 0; pass < 3 && pick < 0; pass++ {
		for i, r := range mine {
			old := isOld(r.endpoint)
			if (pass == 0 && !old && kindOf(r.endpoint) == kindWriterCluster) ||
				(pass == 1 && !old && kindOf(r.endpoint) == kindInstance) ||
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
	v.found, v.phase, v.known, v.status, v.endpoint, v.port = true, d.phase, d.knownStatus, d.status, d.endpoint, d.port
	seen := map[string]bool{}
	add := func(h string, port int) {
		if !seen[h] {
			seen[h] = true
			v.endpoints = append(v.endpoints, h)
			v.ports[h] = port
		}
	}
	for _, r := range mine {
		if isOld(r.endpoint) {
			continue
		}
		add(r.endpoint, r.port)
		if kindOf(r.endpoint) == kindWriterCluster {
			add(readerTwin(r.endpoint), r.port)
		}
	}
	sort.Strings(v.endpoints)
	return v
}
