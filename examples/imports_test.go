// Package examples_test checks what the programs under examples/ may
// import.
package examples_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The examples are for copying into other modules, where no package under
// an internal/ directory of holdfast (or of anything else) can be imported.
// This checks every Go file under examples/, tests included.
func TestExamplesImportNothingInternal(t *testing.T) {
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		files++
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return err
			}
			if internal(p) {
				t.Errorf("%s imports %s: examples must import only public packages", fset.Position(imp.Pos()), p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatal("found no Go files under examples/")
	}
}

// internal reports whether importing path is restricted by Go's internal
// rule: it has an element named "internal".
func internal(path string) bool {
	return path == "internal" || strings.HasPrefix(path, "internal/") ||
		strings.Contains(path, "/internal/") || strings.HasSuffix(path, "/internal")
}
