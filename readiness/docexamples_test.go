package readiness

import (
	"go/ast"
	"go/parser"
	gotoken "go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// goCode matches a line of Go in a doc comment's code block: an
// assignment, a call of this package, or a func literal.
var goCode = regexp.MustCompile(`:=|\breadiness\.[A-Z]|\bfunc\(`)

// Issue 29, item 1: the package's Go examples are Example functions, run
// by go test, so that they cannot drift from the code as the package
// doc's did (its wiring failed at startup). No doc comment of the package
// holds a block of Go; blocks of YAML, JSON, shell and tables stay.
func TestDocsHaveNoGoBlocks(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		fset := gotoken.NewFileSet()
		f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			g, ok := n.(*ast.CommentGroup)
			if !ok {
				return true
			}
			for i, line := range strings.Split(g.Text(), "\n") {
				if strings.HasPrefix(line, "\t") && goCode.MatchString(line) {
					t.Errorf("%s:%d: a doc comment holds Go code; make it an Example function:\n%s",
						name, fset.Position(g.Pos()).Line+i, line)
				}
			}
			return true
		})
	}
}
