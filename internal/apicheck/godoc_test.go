package apicheck

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// overviewLimit is how many lines `go doc PKG` may print for a public
// package: its overview (the package comment and the list of its exported
// names), which pgxpool keeps to 27. Depth belongs in the type and
// function docs, runnable examples and the repository's docs/ pages.
const overviewLimit = 120

// overLimit are the packages whose overview is still longer, each with
// the length it may not exceed. It only shrinks: a package that fits
// overviewLimit again must leave it, and none may be added.
var overLimit = map[string]int{
	"github.com/holdfast-db/holdfast/classify":            197,
	"github.com/holdfast-db/holdfast/fakes/bluegreentest": 173,
	"github.com/holdfast-db/holdfast/fakes/failovertest":  186,
	"github.com/holdfast-db/holdfast/lb":                  281,
}

// publicPackages returns the import paths of the public packages of the
// module in dir (all but main packages, internal ones and examples/), as
// the API files list them.
func publicPackages(t *testing.T, dir string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{if ne .Name "main"}}{{.ImportPath}}{{end}}`, "./...")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list in %s: %v", dir, err)
	}
	var pkgs []string
	for _, p := range strings.Fields(string(out)) {
		if !strings.Contains(p+"/", "/internal/") && !strings.Contains(p+"/", "/examples/") {
			pkgs = append(pkgs, p)
		}
	}
	return pkgs
}

// goDoc runs go doc with args in dir and returns what it prints.
func goDoc(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"doc"}, args...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go doc %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// eachPublicPackage calls check for every public package of every module
// of the repository, in parallel subtests named by import path.
func eachPublicPackage(t *testing.T, check func(t *testing.T, dir, pkg string)) {
	if testing.Short() {
		t.Skip("runs go doc on every public package")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	for _, mod := range modules {
		dir := filepath.Join(root, mod.dir)
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); mod.dir != "." && os.IsNotExist(err) {
			continue // outside the repository (in a module's zip)
		}
		for _, pkg := range publicPackages(t, dir) {
			t.Run(pkg, func(t *testing.T) {
				t.Parallel()
				check(t, dir, pkg)
			})
		}
	}
}

// TestOverviewLength fails when `go doc PKG` of a public package prints
// more than overviewLimit lines (or, for a package of overLimit, more
// than its cap), and when a package of overLimit fits the limit again.
func TestOverviewLength(t *testing.T) {
	eachPublicPackage(t, func(t *testing.T, dir, pkg string) {
		n := strings.Count(goDoc(t, dir, pkg), "\n")
		limit, over := overLimit[pkg]
		switch {
		case !over && n > overviewLimit:
			t.Errorf("go doc %s prints %d lines, over %d: move depth from the package comment to type docs, examples or docs/", pkg, n, overviewLimit)
		case over && n > limit:
			t.Errorf("go doc %s prints %d lines, over its cap of %d (overLimit), itself over %d", pkg, n, limit, overviewLimit)
		case over && n <= overviewLimit:
			t.Errorf("go doc %s prints %d lines, within %d: remove it from overLimit", pkg, n, overviewLimit)
		case over && n < limit:
			t.Logf("go doc %s prints %d lines: lower its cap in overLimit from %d", pkg, n, limit)
		}
	})
}

// fileName matches a Go source file's name (connect.go; not pkg.go.dev)
// or a path into an internal package.
var fileName = regexp.MustCompile(`[A-Za-z0-9_]+\.go([^A-Za-z0-9_.]|$)|internal/`)

// TestDocsNameNoFiles fails when the documentation of a public package
// (go doc -all: the package comment and every exported declaration's)
// names a source file or an internal package: a reader of go doc or
// pkg.go.dev sees neither. Name the type, the function, the package or
// the docs page instead.
func TestDocsNameNoFiles(t *testing.T) {
	eachPublicPackage(t, func(t *testing.T, dir, pkg string) {
		for i, line := range strings.Split(goDoc(t, dir, "-all", pkg), "\n") {
			if fileName.MatchString(line) {
				t.Errorf("go doc -all %s, line %d names a file or an internal package: %s", pkg, i+1, strings.TrimSpace(line))
			}
		}
	})
}
