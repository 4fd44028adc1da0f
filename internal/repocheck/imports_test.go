package repocheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// root is the repository's root, from this package's directory.
var root = filepath.Join("..", "..")

// goFiles returns the Go files of the repository, both modules, test
// data included; hidden directories are left out.
func goFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no Go files under %s", root)
	}
	return files
}

// std reports whether path is a standard-library import path, as
// goimports decides it: its first element has no dot.
func std(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

// importGroups returns the groups of the import declaration d: runs of
// specs with no blank line between them.
func importGroups(fset *token.FileSet, d *ast.GenDecl) [][]*ast.ImportSpec {
	var groups [][]*ast.ImportSpec
	last := -1
	for _, s := range d.Specs {
		spec := s.(*ast.ImportSpec)
		start := spec.Pos()
		if spec.Doc != nil {
			start = spec.Doc.Pos()
		}
		if len(groups) == 0 || fset.Position(start).Line > last+1 {
			groups = append(groups, nil)
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], spec)
		last = fset.Position(spec.End()).Line
		if spec.Comment != nil {
			last = fset.Position(spec.Comment.End()).Line
		}
	}
	return groups
}

// importProblems returns what is wrong with the grouping of the imports
// of the Go source src: the standard library's imports form the first
// group of a declaration, and only they (goimports' order: standard
// library, then the rest, each group separated by a blank line).
func importProblems(name string, src []byte) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.ImportsOnly|parser.ParseComments)
	if err != nil {
		return nil, err
	}
	var problems []string
	for _, decl := range f.Decls {
		d, ok := decl.(*ast.GenDecl)
		if !ok || d.Tok != token.IMPORT {
			continue
		}
		for i, g := range importGroups(fset, d) {
			var stdPaths, other []string
			for _, spec := range g {
				p, err := strconv.Unquote(spec.Path.Value)
				if err != nil {
					return nil, err
				}
				if p == "C" {
					continue // cgo's pseudo-package stands alone
				}
				if std(p) {
					stdPaths = append(stdPaths, p)
				} else {
					other = append(other, p)
				}
			}
			pos := fset.Position(g[0].Pos())
			switch {
			case len(stdPaths) > 0 && len(other) > 0:
				problems = append(problems, pos.String()+": "+strings.Join(other, ", ")+" in the standard library's group (with "+stdPaths[0]+"): move it to a group of its own after a blank line")
			case len(stdPaths) > 0 && i > 0:
				problems = append(problems, pos.String()+": the standard library's imports ("+stdPaths[0]+") after another group: they come first")
			}
		}
	}
	return problems, nil
}

// TestImportGroups fails when a Go file of the repository (either module)
// puts a non-standard import in the standard library's group, or the
// standard library's group after another: gofmt keeps whatever groups it
// finds (it sorts within each), so only a check sees a misplaced import.
func TestImportGroups(t *testing.T) {
	files := goFiles(t)
	for _, path := range files {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		problems, err := importProblems(path, src)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		for _, p := range problems {
			t.Error(p)
		}
	}
	t.Logf("%d Go files checked", len(files))
}

func TestImportProblems(t *testing.T) {
	for _, c := range []struct {
		name, src string
		want      int
	}{
		{"grouped", "package p\n\nimport (\n\t\"fmt\"\n\t\"os\"\n\n\t\"github.com/jackc/pgx/v5\"\n\n\t\"github.com/holdfast-db/holdfast\"\n)\n", 0},
		{"std only", "package p\n\nimport (\n\t\"fmt\"\n\t// a comment\n\t\"os\"\n)\n", 0},
		{"single", "package p\n\nimport \"fmt\"\n\nimport \"github.com/jackc/pgx/v5\"\n", 0},
		{"cgo", "package p\n\n// #include <stdio.h>\nimport \"C\"\n\nimport \"fmt\"\n", 0},
		{"non-std in std group", "package p\n\nimport (\n\t\"context\"\n\t\"github.com/holdfast-db/holdfast/cloudsql\"\n\t\"io\"\n\n\t\"github.com/jackc/pgx/v5\"\n)\n", 1},
		{"named non-std in std group", "package p\n\nimport (\n\t\"fmt\"\n\tsdk \"go.opentelemetry.io/otel/sdk/metric\"\n)\n", 1},
		{"std after others", "package p\n\nimport (\n\t\"github.com/jackc/pgx/v5\"\n\n\t\"fmt\"\n)\n", 1},
	} {
		got, err := importProblems(c.name+".go", []byte(c.src))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(got) != c.want {
			t.Errorf("%s: %d problems, want %d: %q", c.name, len(got), c.want, got)
		}
	}
}
