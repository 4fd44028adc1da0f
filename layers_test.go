package holdfast_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/holdfast-db/holdfast/internal/compose"
)

// The layer table of the package documentation lists the layers in the
// order the composer declares (compose.Order), and no other.
func TestDocumentedLayerOrder(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(src)
	start := strings.Index(doc, "//\tlayer      BeforeConnect")
	if start < 0 {
		t.Fatal("doc.go has no layer table")
	}
	end := strings.Index(doc[start:], "\n//\n")
	row := regexp.MustCompile(`(?m)^//\t([a-z]+)\s`)
	var got []string
	for _, m := range row.FindAllStringSubmatch(doc[start:start+end], -1) {
		if m[1] != "layer" {
			got = append(got, m[1])
		}
	}
	if strings.Join(got, " ") != strings.Join(compose.Order[:], " ") {
		t.Errorf("doc.go's layer table: %v; compose.Order: %v", got, compose.Order)
	}
}
