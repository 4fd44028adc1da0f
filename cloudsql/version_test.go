package cloudsql_test

import (
	"os"
	"regexp"
	"testing"

	"github.com/holdfast-db/holdfast/cloudsql"
)

// TestConnectorVersion fails when go.mod requires another cloudsqlconn than
// the one ConnectorRetryMax, RetryPolicy and the classified error chains
// were measured against: re-run the chains and timing tests
// (go test ./cloudsql/), update the figures, then ConnectorVersion.
func TestConnectorVersion(t *testing.T) {
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*cloud\.google\.com/go/cloudsqlconn\s+(v\S+)`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod does not require cloud.google.com/go/cloudsqlconn")
	}
	if got := string(m[1]); got != cloudsql.ConnectorVersion {
		t.Errorf("go.mod requires cloudsqlconn %s; the package was measured against %s (ConnectorVersion): re-measure and update",
			got, cloudsql.ConnectorVersion)
	}
}
