package holdfast_test

import (
	"os"
	"strings"
	"testing"

	"github.com/holdfast-db/holdfast/internal/compose"
)

// The layer table of docs/guide.md lists the layers in the order the
// composer declares (compose.Order), and no other.
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
	var got []string
	for _, l := range strings.Split(doc, "\n") {
		cells := strings.Split(l, "|")
		if len(cells) < 3 || cells[0] != "" {
			continue // not a table row
		}
		if name := strings.TrimSpace(cells[1]); name != "layer" && strings.Trim(name, "-") != "" {
			got = append(got, name) // not the header or its separator
		}
	}
	if strings.Join(got, " ") != strings.Join(compose.Order[:], " ") {
		t.Errorf("docs/guide.md's layer table: %v; compose.Order: %v", got, compose.Order)
	}
}
