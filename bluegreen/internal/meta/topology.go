package meta

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
)

// TopologyFunction lists the DB instances of an Aurora cluster, one row per
// instance: its identifier (server_id) and, for the writer, the session id
// MASTER_SESSION_ID. Every instance of the cluster answers it.
const TopologyFunction = "pg_catalog.aurora_replica_status"

// WriterSessionID is the session_id of the writer's row in
// aurora_replica_status().
const WriterSessionID = "MASTER_SESSION_ID"

// topologyQuery reads the topology as the AWS wrappers do, without their
// staleness filter (last_update_timestamp): an instance that stopped
// reporting is still an instance whose connections must move.
const topologyQuery = "SELECT server_id, session_id FROM " + TopologyFunction + "()"

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

// ReadTopology reads the cluster's instances from aurora_replica_status():
// server ids and writer flags. bad lists rows it could not use (an id
// that is not an instance identifier).
func ReadTopology(ctx context.Context, conn *pgx.Conn) (ids []TopologyRow, bad []error, err error) {
	rows, err := conn.Query(ctx, topologyQuery, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		raw := rows.RawValues()
		if len(raw) < 2 || raw[0] == nil {
			bad = append(bad, fmt.Errorf("bluegreen: topology row without a server_id"))
			continue
		}
		id := strings.ToLower(strings.TrimSpace(string(raw[0])))
		if !serverIDPattern.MatchString(id) {
			bad = append(bad, fmt.Errorf("bluegreen: topology row with an invalid server_id %q", Truncate(id, 64)))
			continue
		}
		ids = append(ids, TopologyRow{ServerID: id, Writer: raw[1] != nil && strings.TrimSpace(string(raw[1])) == WriterSessionID})
	}
	return ids, bad, rows.Err()
}

// TopologyRow is one parsed row of aurora_replica_status().
type TopologyRow struct {
	ServerID string // lowercase
	Writer   bool
}

// InstanceDomain returns the domain that a cluster's instance endpoints
// share, derived from one of its endpoints as the AWS wrappers do
// ("?.<cluster id>.<region>.rds.amazonaws.com"):
//
//	mydb.cluster-abc.us-east-1.rds.amazonaws.com         → abc.us-east-1.rds.amazonaws.com
//	mydb.cluster-ro-abc.us-east-1.rds.amazonaws.com      → abc.us-east-1.rds.amazonaws.com
//	mydb.cluster-custom-abc.us-east-1.rds.amazonaws.com  → abc.us-east-1.rds.amazonaws.com
//	mydb-1.abc.us-east-1.rds.amazonaws.com               → abc.us-east-1.rds.amazonaws.com
//
// It prefers a writer cluster endpoint among hosts, and returns "" when no
// host is RDS-shaped (an IP address, a CNAME of your own): instance names
// cannot be derived from those.
func InstanceDomain(hosts []string) string {
	sorted := sortedCopy(hosts)
	for _, want := range []endpointKind{kindWriterCluster, kindReaderCluster, kindCustomCluster, kindInstance} {
		for _, h := range sorted {
			if kindOf(h) != want || IsIP(h) || !isRDS(h) {
				continue
			}
			_, rest := firstLabel(h)
			rest = strings.TrimPrefix(rest, ".")
			for _, p := range []string{"cluster-ro-", "cluster-custom-", "cluster-"} {
				if strings.HasPrefix(rest, p) {
					rest = rest[len(p):]
					break
				}
			}
			if strings.Count(rest, ".") >= 3 { // id.region.rds.amazonaws.com at least
				return rest
			}
		}
	}
	return ""
}

// isRDS reports whether host is under an RDS domain (rds.amazonaws.com and
// its partitions' variants: .com.cn, sc2s.sgov.gov, c2s.ic.gov, ...).
func isRDS(host string) bool { return strings.Contains(host, ".rds.") }

// Instances turns topology rows into instances: endpoint
// "<server_id>.<domain>" on port, old (-old1) instances left out, sorted by
// host.
func Instances(rows []TopologyRow, domain string, port int) []Instance {
	if domain == "" {
		return nil
	}
	var out []Instance
	seen := map[string]bool{}
	for _, r := range rows {
		h := r.ServerID + "." + domain
		if seen[h] || IsOld(h) {
			continue
		}
		seen[h] = true
		out = append(out, Instance{Host: h, Port: port, Writer: r.Writer})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Host < out[j].Host })
	return out
}
