package drain

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The lb module has its own copy of drain.go (it cannot import the root
// module). The copies may differ only in comment blocks that say where
// they live, that is, blocks that mention "internal/drain/".
func TestLBCopyIsIdentical(t *testing.T) {
	lbDir := filepath.Join("..", "..", "lb")
	if _, err := os.Stat(filepath.Join(lbDir, "go.mod")); err != nil {
		// A module zip of the root module leaves out the nested lb module.
		t.Skipf("no lb module next to this one: %v", err)
	}
	ours, err := os.ReadFile("drain.go")
	if err != nil {
		t.Fatal(err)
	}
	copied, err := os.ReadFile(filepath.Join(lbDir, "internal", "drain", "drain.go"))
	if err != nil {
		t.Fatalf("the lb module's copy is missing: %v", err)
	}
	a, b := withoutLocationComments(string(ours)), withoutLocationComments(string(copied))
	for i := 0; i < max(len(a), len(b)); i++ {
		var la, lb string
		if i < len(a) {
			la = a[i]
		}
		if i < len(b) {
			lb = b[i]
		}
		if la != lb {
			t.Fatalf("lb/internal/drain/drain.go differs from internal/drain/drain.go (copy it over):\n"+
				"line %d of the significant lines:\n  here: %q\n  lb:   %q", i+1, la, lb)
		}
	}
}

// withoutLocationComments returns the lines of src without the blocks of
// consecutive "//" lines that mention "internal/drain/".
func withoutLocationComments(src string) []string {
	var out, block []string
	flush := func() {
		if !strings.Contains(strings.Join(block, "\n"), "internal/drain/") {
			out = append(out, block...)
		}
		block = block[:0]
	}
	for _, line := range strings.Split(src, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "//") {
			block = append(block, line)
			continue
		}
		flush()
		out = append(out, line)
	}
	flush()
	return out
}
