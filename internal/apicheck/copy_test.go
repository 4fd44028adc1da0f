package apicheck

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestCopy fails when lb's copy of this package (lb/internal/apicheck,
// there so that the lb module does not depend on this one) differs from
// it.
func TestCopy(t *testing.T) {
	lb := filepath.Join(root, "lb", "internal", "apicheck")
	if _, err := os.Stat(lb); os.IsNotExist(err) {
		t.Skipf("no %s", lb)
	}
	for _, name := range []string{"apicheck.go", "apicheck_test.go"} {
		mine, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		theirs, err := os.ReadFile(filepath.Join(lb, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(mine, theirs) {
			t.Errorf("lb/internal/apicheck/%s differs from internal/apicheck/%s: keep them the same (cp internal/apicheck/%[1]s lb/internal/apicheck/)", name, name)
		}
	}
}
