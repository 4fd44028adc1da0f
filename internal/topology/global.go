package topology

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// An Aurora Global Database publishes its topology across Regions on every
// instance of every Region:
//
//   - aurora_global_db_instance_status(): a row per instance, server_id,
//     session_id (MASTER_SESSION_ID for the writer), aws_region,
//     visibility_lag_in_msec (a reader's lag behind the writer, the
//     secondary Region's included) and LSN columns;
//   - aurora_global_db_status(): a row per Region, aws_region,
//     durability_lag_in_msec and rpo_lag_in_msec (-1 for the primary
//     Region), highest_lsn_written, last_lag_calculation_time.
//
// aurora_replica_status() lists the instances of the server's own Region
// only: a monitor of a global cluster reads the global functions instead.
const (
	GlobalInstanceFunction = "pg_catalog.aurora_global_db_instance_status"
	GlobalStatusFunction   = "pg_catalog.aurora_global_db_status"
)

// globalDetectQuery finds both global functions, an untrusted owner of
// either (NULL: none), and, in the same statement, how many Regions
// aurora_global_db_status() lists when both exist (as the AWS wrappers
// do: a cluster is global when it lists more than one). The count is read
// through a CASE so that a server without the functions answers too.
var globalDetectQuery = `SELECT pg_catalog.to_regproc($1) IS NOT NULL AND pg_catalog.to_regproc($2) IS NOT NULL,
	COALESCE(` + UntrustedOwnerSQL(GlobalInstanceFunction) + `, ` + UntrustedOwnerSQL(GlobalStatusFunction) + `)`

// globalRegionsQuery counts the Regions of a global cluster.
const globalRegionsQuery = "SELECT pg_catalog.count(DISTINCT aws_region) FROM " + GlobalStatusFunction + "()"

// DetectGlobal reports whether the server (an Aurora instance) belongs to
// an Aurora Global Database of more than one Region: both global functions
// exist, a superuser or rdsadmin owns them (else an *UntrustedError), and
// aurora_global_db_status() lists more than one Region.
func DetectGlobal(ctx context.Context, conn *pgx.Conn) (bool, error) {
	var both bool
	var owner *string
	if err := conn.QueryRow(ctx, globalDetectQuery, pgx.QueryExecModeSimpleProtocol,
		GlobalInstanceFunction, GlobalStatusFunction).Scan(&both, &owner); err != nil {
		return false, err
	}
	if !both {
		return false, nil
	}
	if owner != nil {
		return false, CheckTrust(GlobalInstanceFunction, []byte(*owner))
	}
	var n int64
	if err := conn.QueryRow(ctx, globalRegionsQuery, pgx.QueryExecModeSimpleProtocol).Scan(&n); err != nil {
		return false, err
	}
	return n > 1, nil
}

// globalQuery reads the instances with SELECT * (columns by name, as
// aurora_replica_status()'s) and the trust check in one statement.
var globalQuery = TrustedRead(GlobalInstanceFunction, "")

// ReadGlobal reads a global cluster's instances, every Region's, from
// aurora_global_db_instance_status(): server ids, the writer flag, each
// instance's Region (Row.Region) and a reader's visibility lag (Row.Lag),
// at most MaxRows (a *TooManyRowsError in bad says how many more). A row
// without a Region, or with one that is not a Region's name, is bad.
func ReadGlobal(ctx context.Context, conn *pgx.Conn) (out []Row, bad []error, err error) {
	rows, err := conn.Query(ctx, globalQuery, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	fds := rows.FieldDescriptions()
	cols := columns(fds, "server_id", "session_id", "aws_region", "visibility_lag_in_msec")
	idCol, sessCol, regCol, lagCol := cols[0], cols[1], cols[2], cols[3]
	if idCol < 0 || sessCol < 0 || regCol < 0 {
		return nil, nil, fmt.Errorf("topology: %s() has no server_id, session_id or aws_region column", GlobalInstanceFunction)
	}
	trustCol, seen, extra := trustColumn(fds), 0, 0
	for rows.Next() {
		raw := rows.RawValues()
		if trustCol >= 0 {
			if err := CheckTrust(GlobalInstanceFunction, raw[trustCol]); err != nil {
				return nil, nil, err
			}
		}
		if seen++; seen > MaxRows {
			extra++
			continue
		}
		id := strings.ToLower(strings.TrimSpace(string(raw[idCol])))
		if raw[idCol] == nil || !serverIDPattern.MatchString(id) {
			bad = append(bad, fmt.Errorf("topology: global row with an invalid server_id %q", Truncate(id, 64)))
			continue
		}
		region := strings.ToLower(strings.TrimSpace(string(raw[regCol])))
		if !IsRegion(region) {
			bad = append(bad, fmt.Errorf("topology: global row %s with an invalid aws_region %q", id, Truncate(region, 64)))
			continue
		}
		r := Row{ServerID: id, Region: region,
			Writer: raw[sessCol] != nil && strings.TrimSpace(string(raw[sessCol])) == WriterSessionID}
		if lagCol >= 0 && raw[lagCol] != nil && !r.Writer {
			if ms, err := strconv.ParseFloat(strings.TrimSpace(string(raw[lagCol])), 64); err == nil && ms >= 0 {
				r.Lag, r.HasLag = time.Duration(ms*float64(time.Millisecond)), true
			}
		}
		out = append(out, r)
	}
	if extra > 0 {
		bad = append(bad, &TooManyRowsError{Function: GlobalInstanceFunction, Limit: MaxRows, Extra: extra})
	}
	return out, bad, rows.Err()
}

// RegionLag is one Region's row of aurora_global_db_status(): a
// secondary's replication lag behind the primary (Primary: the primary
// Region's row, lag -1 there).
type RegionLag struct {
	Region  string
	Primary bool
	// RPO is rpo_lag_in_msec, Durability durability_lag_in_msec; Known
	// reports whether the row carried them (NULL while the Region's
	// servers are down).
	RPO, Durability time.Duration
	Known           bool
}

// globalStatusQuery reads the Regions' lags, and whether the server takes
// writes now (a switchover's first step turns the writer read-only).
const globalStatusQuery = "SELECT s.aws_region::pg_catalog.text, s.rpo_lag_in_msec::pg_catalog.float8, s.durability_lag_in_msec::pg_catalog.float8, " +
	"pg_catalog.current_setting('default_transaction_read_only') OPERATOR(pg_catalog.=) 'on' OR pg_catalog.pg_is_in_recovery() " +
	"FROM " + GlobalStatusFunction + "() s"

// ReadGlobalStatus reads aurora_global_db_status(), at most MaxRows rows,
// and whether the server refuses writes now (read-only by default, or in
// recovery): a global monitor's heartbeat on the writer, which keeps the
// secondaries' last rpo_lag_in_msec (what a failover with data loss
// loses) and sees a switchover's write block at once.
func ReadGlobalStatus(ctx context.Context, conn *pgx.Conn) (lags []RegionLag, readOnly bool, err error) {
	rows, err := conn.Query(ctx, globalStatusQuery, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	for rows.Next() {
		var region *string
		var rpo, dur *float64
		var ro bool
		if err := rows.Scan(&region, &rpo, &dur, &ro); err != nil {
			return nil, false, err
		}
		readOnly = ro
		if region == nil || len(lags) >= MaxRows {
			continue
		}
		l := RegionLag{Region: strings.ToLower(*region)}
		if rpo != nil && dur != nil {
			l.Primary = *rpo < 0
			l.RPO = time.Duration(max(*rpo, 0) * float64(time.Millisecond))
			l.Durability = time.Duration(max(*dur, 0) * float64(time.Millisecond))
			l.Known = true
		}
		lags = append(lags, l)
	}
	return lags, readOnly, rows.Err()
}

// IsRegion reports whether s looks like an AWS Region's name
// ("us-east-1", "eu-central-2", "us-gov-west-1", "cn-north-1").
func IsRegion(s string) bool {
	parts := strings.Split(s, "-")
	if len(parts) < 3 || len(s) > 32 {
		return false
	}
	for _, p := range parts {
		if p == "" {
			return false
		}
		for _, c := range p {
			if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
				return false
			}
		}
	}
	_, err := strconv.Atoi(parts[len(parts)-1])
	return err == nil
}

// RegionOf returns the Region an RDS endpoint names
// ("orders.cluster-abc.us-west-2.rds.amazonaws.com" → "us-west-2"), ""
// for a global writer endpoint or any other host.
func RegionOf(host string) string {
	d := DomainOf(host) // "abc.us-west-2.rds.amazonaws.com"
	if d == "" {
		return ""
	}
	parts := strings.Split(d, ".")
	if len(parts) < 2 || !IsRegion(parts[1]) {
		return ""
	}
	return parts[1]
}
