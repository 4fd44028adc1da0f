package obs_test

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/holdfast-db/holdfast/internal/obs"
)

// Hints speak the user's configuration (issue 29, item 5): the connection
// string's keywords and holdfast's option names, never an OpenTelemetry
// attribute; a missing Unix socket (item 8) names the socket and the
// Cloud SQL Auth Proxy sidecar case.
func TestHintsInTheUsersWords(t *testing.T) {
	t.Parallel()
	tcp, err := pgx.ParseConfig("host=db.internal port=5433 user=app dbname=orders")
	if err != nil {
		t.Fatal(err)
	}
	sock, err := pgx.ParseConfig("host=/cloudsql/proj:region:inst user=app dbname=orders")
	if err != nil {
		t.Fatal(err)
	}
	tt, st := obs.NewTarget(tcp, ""), obs.NewTarget(sock, "")
	for _, c := range []struct {
		reason string
		target *obs.Target
		want   []string
	}{
		{"sqlstate-3D000", tt, []string{`"orders"`, "db.internal:5433", "dbname in the connection string"}},
		{"sqlstate-28P01", tt, []string{`"app"`, "WithPasswordFunc", "password in the connection string"}},
		{"sqlstate-08P01", tt, []string{"sslmode in the connection string"}},
		{"sqlstate-28000", tt, []string{`"app"`, "user in the connection string", "pg_hba.conf"}},
		{"dns-not-found", tt, []string{"host in the connection string", "db.internal:5433"}},
		{"conn-refused", tt, []string{"db.internal:5433", "host and port in the connection string"}},
		{"tls-verification", tt, []string{"sslmode in the connection string"}},
		{"alloydb-permission-denied", tt, []string{"roles/alloydb.client", "roles/serviceusage.serviceUsageConsumer"}},
		{"alloydb-instance-not-found", tt, []string{"alloydb.With", "host in the connection string"}},
		{"alloydb-metadata-exchange", tt, []string{"alloydbconn.WithIAMAuthN", "roles/alloydb.databaseUser", "user in the connection string"}},
		{"token-denied", tt, []string{"WithPasswordFunc", "alloydb.With"}},
		{"socket-missing", st, []string{"/cloudsql/proj:region:inst/.s.PGSQL.5432", "Cloud SQL Auth Proxy", "--unix-socket", "host (the socket directory)", "WithStartupPolicy"}},
	} {
		h := obs.Hint(c.reason, c.target)
		for _, w := range c.want {
			if !strings.Contains(h, w) {
				t.Errorf("Hint(%s) = %q, want it to say %q", c.reason, h, w)
			}
		}
	}
	for _, reason := range []string{"sqlstate-42501", "sqlstate-28P01", "sqlstate-28000", "sqlstate-3D000", "sqlstate-53300",
		"sqlstate-08P01", "conn-refused", "socket-missing", "dns-not-found", "tls-verification", "cloudsql-config", "token-fetch-403",
		"alloydb-permission-denied", "alloydb-instance-not-found", "alloydb-metadata-exchange", "alloydb-config"} {
		for _, target := range []*obs.Target{tt, st, nil} {
			h := obs.Hint(reason, target)
			for _, otel := range []string{"db.namespace", "server.address", "server.port", "db.user"} {
				if strings.Contains(h, otel) {
					t.Errorf("Hint(%s) = %q names %s, an OpenTelemetry attribute, not the user's setting", reason, h, otel)
				}
			}
		}
	}
}
