package topology

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// AuroraFunction lists the DB instances of an Aurora cluster, one row per
// instance: its identifier (server_id), the session id MASTER_SESSION_ID
// for the writer, and when the instance last reported
// (last_update_timestamp). Every instance of the cluster answers it.
const AuroraFunction = "pg_catalog.aurora_replica_status"

// WriterSessionID is the session_id of the writer's row in
// aurora_replica_status().
const WriterSessionID = "MASTER_SESSION_ID"

// auroraQuery reads the topology with SELECT *, columns by name: the
// function's columns differ between Aurora versions, and server_id and
// session_id are the ones that matter; and, in the same statement, an
// untrusted owner of the function (TrustColumn).
var auroraQuery = TrustedRead(AuroraFunction, "")

// Row is one parsed row of a cluster's topology: aurora_replica_status()
// on Aurora, rds_tools.show_topology() on an RDS Multi-AZ DB cluster.
type Row struct {
	// ServerID is the instance's name, lowercase: server_id on Aurora,
	// the first label of the endpoint on a Multi-AZ DB cluster.
	ServerID string
	// Writer: session_id is MASTER_SESSION_ID (Aurora); the id is the
	// writer's dbi resource id (Multi-AZ DB cluster).
	Writer  bool
	Updated time.Time // last_update_timestamp; zero when absent or NULL
	// Endpoint and Port, when the topology names them (RDS Multi-AZ DB
	// clusters; Port 0 when it does not); Aurora's rows do not: the
	// endpoint is derived from the cluster endpoint's domain.
	Endpoint string
	Port     int
	// Lag is the reader's replication lag (Aurora: replica_lag_in_msec);
	// HasLag reports whether the row carries one.
	Lag    time.Duration
	HasLag bool
	// ResourceID is the instance's dbi resource id (Multi-AZ DB clusters:
	// show_topology's id, as listed); empty on Aurora.
	ResourceID string
	// Region is the instance's AWS Region, as an Aurora Global Database's
	// aurora_global_db_instance_status() names it; "" in any other
	// topology.
	Region string
}

// Instance is one DB instance of a cluster, read from its topology.
type Instance struct {
	Host   string // instance endpoint, normalized
	Port   int    // the cluster endpoint's port; 0 when unknown
	Writer bool
}

// serverIDPattern is what an RDS DB instance identifier looks like (and so
// the first label of its endpoint): letters, digits and hyphens, starting
// with a letter. Lowercased before matching.
var serverIDPattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

// ReadAurora reads the cluster's instances from aurora_replica_status():
// server ids, writer flags and update times, at most MaxRows of them (a
// *TooManyRowsError in bad says how many more there were). bad lists rows
// it could not use (an id that is not an instance identifier). A function
// without a server_id or session_id column is an error, and so is one
// owned by a role that is neither a superuser nor rdsadmin
// (*UntrustedError).
func ReadAurora(ctx context.Context, conn *pgx.Conn) (ids []Row, bad []error, err error) {
	rows, err := conn.Query(ctx, auroraQuery, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	fds := rows.FieldDescriptions()
	cols := columns(fds, "server_id", "session_id", "last_update_timestamp", "replica_lag_in_msec")
	idCol, sessCol, updCol, lagCol := cols[0], cols[1], cols[2], cols[3]
	if idCol < 0 || sessCol < 0 {
		return nil, nil, fmt.Errorf("topology: %s() has no server_id or session_id column", AuroraFunction)
	}
	trustCol, seen, extra := trustColumn(fds), 0, 0
	for rows.Next() {
		raw := rows.RawValues()
		if trustCol >= 0 {
			if err := CheckTrust(AuroraFunction, raw[trustCol]); err != nil {
				return nil, nil, err
			}
		}
		if seen++; seen > MaxRows {
			extra++
			continue
		}
		if raw[idCol] == nil {
			bad = append(bad, fmt.Errorf("topology: row without a server_id"))
			continue
		}
		id := strings.ToLower(strings.TrimSpace(string(raw[idCol])))
		if !serverIDPattern.MatchString(id) {
			bad = append(bad, fmt.Errorf("topology: row with an invalid server_id %q", Truncate(id, 64)))
			continue
		}
		r := Row{ServerID: id, Writer: raw[sessCol] != nil && strings.TrimSpace(string(raw[sessCol])) == WriterSessionID}
		if updCol >= 0 && raw[updCol] != nil {
			r.Updated = parseTimestamp(string(raw[updCol]))
		}
		if lagCol >= 0 && raw[lagCol] != nil && !r.Writer {
			if ms, err := strconv.ParseFloat(strings.TrimSpace(string(raw[lagCol])), 64); err == nil && ms >= 0 {
				r.Lag, r.HasLag = time.Duration(ms*float64(time.Millisecond)), true
			}
		}
		ids = append(ids, r)
	}
	if extra > 0 {
		bad = append(bad, &TooManyRowsError{Function: AuroraFunction, Limit: MaxRows, Extra: extra})
	}
	return ids, bad, rows.Err()
}

// TooManyRowsError reports rows left out of a read: Extra beyond the
// first Limit (MaxRows) that a monitor uses.
type TooManyRowsError struct {
	Function string
	Limit    int
	Extra    int
}

func (e *TooManyRowsError) Error() string {
	return fmt.Sprintf("topology: %s() returned %d rows more than the %d used; they are ignored", e.Function, e.Extra, e.Limit)
}

// parseTimestamp reads a timestamptz in PostgreSQL's text form (ISO
// DateStyle); zero when it is not one.
func parseTimestamp(s string) time.Time {
	for _, layout := range []string{"2006-01-02 15:04:05.999999-07", "2006-01-02 15:04:05.999999-07:00", "2006-01-02 15:04:05.999999"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t
		}
	}
	return time.Time{}
}

// Instances turns topology rows into instances: endpoint
// "<server_id>.<domain>" on port, old (-old1) instances left out, sorted by
// host.
func Instances(rows []Row, domain string, port int) []Instance {
	if domain == "" && (len(rows) == 0 || rows[0].Endpoint == "") {
		return nil
	}
	var out []Instance
	seen := map[string]bool{}
	for _, r := range rows {
		h, p := r.ServerID+"."+domain, port
		if r.Endpoint != "" {
			h = NormHost(r.Endpoint)
			if r.Port > 0 {
				p = r.Port
			}
		}
		if seen[h] || IsOld(h) {
			continue
		}
		seen[h] = true
		out = append(out, Instance{Host: h, Port: p, Writer: r.Writer})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Host < out[j].Host })
	return out
}

// columns returns the index of each named column among fds,
// case-insensitively, -1 for a column that is absent.
func columns(fds []pgconn.FieldDescription, names ...string) []int {
	idx := make([]int, len(names))
	for i, name := range names {
		idx[i] = -1
		for j, fd := range fds {
			if strings.EqualFold(fd.Name, name) {
				idx[i] = j
				break
			}
		}
	}
	return idx
}
