package drain

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The lb module owns its copy of the drain algorithm, so that it builds
// without the root module, whose readiness package drains with the
// original. In the repository both are present, and they must stay equal:
// they may differ only in the comment blocks that say where they live
// (blocks mentioning "internal/drain/") and in the import path of cfgerr.
func TestSameAsTheRootModule(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	if b, err := os.ReadFile(filepath.Join(root, "go.mod")); err != nil || !strings.Contains(string(b), "module github.com/holdfast-db/holdfast\n") {
		// A module zip of lb (go install, the module cache) has no root
		// module around it.
		t.Skip("no root module around the lb module")
	}
	orig, err := os.ReadFile(filepath.Join(root, "internal", "drain", "drain.go"))
	if err != nil {
		t.Skipf("the root module has no internal/drain/drain.go any more: %v", err)
	}
	copied, err := os.ReadFile("drain.go")
	if err != nil {
		t.Fatal(err)
	}
	a := significant(string(orig))
	b := significant(strings.ReplaceAll(string(copied), "holdfast/lb/internal/cfgerr", "holdfast/internal/cfgerr"))
	for i := range max(len(a), len(b)) {
		var la, lb string
		if i < len(a) {
			la = a[i]
		}
		if i < len(b) {
			lb = b[i]
		}
		if la != lb {
			t.Fatalf("lb/internal/drain/drain.go differs from the root module's internal/drain/drain.go (port the change):\n"+
				"significant line %d:\n  root: %q\n  lb:   %q", i+1, la, lb)
		}
	}
}

// significant returns the lines of src without the blocks of consecutive
// "//" lines that mention "internal/drain/".
func significant(src string) []string {
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
