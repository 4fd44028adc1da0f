package alloydb_test

import (
	"os"
	"regexp"
	"testing"

	"github.com/holdfast-db/holdfast/alloydb"
)

// TestConnectorVersion fails when go.mod requires another alloydbconn than
// the one RetryPolicy's table, the classified error chains and the
// metadata exchange's errors were measured against: re-run this package's
// tests (go test ./alloydb/), update the figures, then ConnectorVersion.
func TestConnectorVersion(t *testing.T) {
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*cloud\.google\.com/go/alloydbconn\s+(v\S+)`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod does not require cloud.google.com/go/alloydbconn")
	}
	if got := string(m[1]); got != alloydb.ConnectorVersion {
		t.Errorf("go.mod requires alloydbconn %s; the package was measured against %s (ConnectorVersion): re-measure and update",
			got, alloydb.ConnectorVersion)
	}
}
