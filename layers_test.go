package holdfast_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
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

// Issue 29, item 2: the documented values of holdfast.layer are the retry
// layers the code records: the Layer* constants of internal/conn (the
// engine's, and the transaction runner's "transaction"), read from the
// source, so that a new layer cannot go undocumented. The list is the
// sentence "holdfast.layer is ..." of doc.go or of a page under docs/.
func TestDocumentedRetryLayers(t *testing.T) {
	var code []string
	files, err := filepath.Glob("internal/conn/*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if !strings.HasPrefix(id.Name, "Layer") || i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						v, _ := strconv.Unquote(lit.Value)
						code = append(code, v)
					}
				}
			}
		}
	}
	if !slices.Contains(code, "transaction") || len(code) < 5 {
		t.Fatalf("internal/conn's layers %q: the parse missed some", code)
	}

	pages, _ := filepath.Glob("docs/*.md")
	var doc []string
	for _, name := range append([]string{"doc.go"}, pages...) {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.ReplaceAll(string(b), "\n//", "") // a comment's lines as one
		_, rest, ok := strings.Cut(text, "holdfast.layer is")
		if !ok {
			continue
		}
		sentence := regexp.MustCompile(`\.(\s|$)`).Split(rest, 2)[0]
		for _, m := range regexp.MustCompile(`"([a-z-]+)"`).FindAllStringSubmatch(sentence, -1) {
			doc = append(doc, m[1])
		}
		break
	}
	if doc == nil {
		t.Fatal(`no "holdfast.layer is ..." sentence in doc.go or docs/*.md`)
	}
	slices.Sort(code)
	slices.Sort(doc)
	if !slices.Equal(code, doc) {
		t.Errorf("documented holdfast.layer values %q; the code records %q", doc, code)
	}
}
