package holdfast_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/holdfast-db/holdfast/internal/compose"
)

// The layer table of docs/guide.md (section "Layers") lists the layers in
// the order the composer declares (compose.Order), and no other.
func TestDocumentedLayerOrder(t *testing.T) {
	src, err := os.ReadFile("docs/guide.md")
	if err != nil {
		t.Fatal(err)
	}
	_, doc, ok := strings.Cut(string(src), "\n## Layers\n")
	if !ok {
		t.Fatal("docs/guide.md has no section \"Layers\"")
	}
	doc, _, _ = strings.Cut(doc, "\n## ")
	row := regexp.MustCompile(`(?m)^\| *([a-z]+) *\|`) // a table row's first cell
	var got []string
	for _, m := range row.FindAllStringSubmatch(doc, -1) {
		if m[1] != "layer" {
			got = append(got, m[1])
		}
	}
	if strings.Join(got, " ") != strings.Join(compose.Order[:], " ") {
		t.Errorf("docs/guide.md's layer table: %v; compose.Order: %v", got, compose.Order)
	}
}
