package apicheck

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"text/tabwriter"
)

var update = flag.Bool("update", false, "write each module's API file (api/NAME.txt) from the code")

// The repository's root, from this package's directory.
var root = filepath.Join("..", "..")

// modules are the repository's modules, by the name of their API file,
// and their directories relative to its root: this one and lb, nested in
// it.
var modules = []struct{ name, dir string }{{"holdfast", "."}, {"lb", "lb"}}

// TestAPI fails when the exported API of a module's packages differs from
// its API file, api/NAME.txt in the module's directory: a name added,
// changed or removed is a change of that file, reviewed with the code.
// It checks every module of the repository (lb is loaded as a module
// directory of its own). -update writes the files. With -v it logs each
// package's count of exported names.
func TestAPI(t *testing.T) {
	for _, mod := range modules {
		dir := filepath.Join(root, mod.dir)
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); mod.dir != "." && os.IsNotExist(err) {
			t.Logf("no module at %s", dir) // outside the repository (in a module's zip)
			continue
		}
		t.Run(mod.name, func(t *testing.T) { checkAPI(t, dir) })
	}
}

// checkAPI compares the API of the module in dir with its API file, or
// writes the file with -update.
func checkAPI(t *testing.T, dir string) {
	api, err := Generate(dir)
	if err != nil {
		t.Fatal(err)
	}
	file := File(api.Module)
	path := filepath.Join(dir, file)
	counts := fmt.Sprintf("%d lines in %s; exported names per package (as shared/tools/exported.go counts them) and API lines:\n%s", len(api.Features), file, countTable(api))
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, api.Format(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s\n%s", file, counts)
		return
	}
	howto := fmt.Sprintf("If the change is meant, run in the repository's root\n\tgo test ./internal/apicheck -update\nand commit %s of %s with it.", file, api.Module)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v\n%s", err, howto)
	}
	want, err := Parse(data)
	if err != nil {
		t.Fatalf("%s: %v\n%s", file, err, howto)
	}
	added, removed := Diff(api.Features, want)
	if len(added) > 0 || len(removed) > 0 {
		var b strings.Builder
		fmt.Fprintf(&b, "the exported API differs from %s: %d added (+, in the code only), %d removed (-, in the file only); a changed name is both\n", file, len(added), len(removed))
		for _, l := range added {
			fmt.Fprintf(&b, "+%s\n", l)
		}
		for _, l := range removed {
			fmt.Fprintf(&b, "-%s\n", l)
		}
		fmt.Fprintf(&b, "%s\n%s", howto, counts)
		t.Fatal(b.String())
	}
	if !bytes.Equal(data, api.Format()) {
		t.Fatalf("%s lists the API but not as generated (order, spacing or header)\n%s", file, howto)
	}
	t.Log(counts)
}

// Until the first release no exported name of either module is
// deprecated (issue 29, item 5): a name to retire is removed, with a
// **BREAKING** line in CHANGELOG.md naming what replaces it. It reads the
// API files, which TestAPI keeps equal to the code.
func TestNoDeprecatedNames(t *testing.T) {
	for _, mod := range modules {
		path := filepath.Join(root, mod.dir, "api", mod.name+".txt")
		data, err := os.ReadFile(path)
		if err != nil {
			t.Logf("no API file %s: %v", path, err) // outside the repository
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if strings.HasSuffix(line, "//deprecated") {
				t.Errorf("%s: a deprecated name before the first release: %s", mod.name, line)
			}
		}
	}
}

// countTable is, for each listed package, its count of exported names
// computed as shared/tools/exported.go does, and its lines in the API
// file.
func countTable(api *API) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "exported\tAPI lines\t")
	exported, lines := 0, 0
	for _, p := range api.Packages {
		fmt.Fprintf(tw, "%d\t%d\t  %s\n", p.Exported, p.Features, "./"+strings.TrimPrefix(p.Dir, "."))
		exported += p.Exported
		lines += p.Features
	}
	fmt.Fprintf(tw, "%d\t%d\t  total\n", exported, lines)
	tw.Flush()
	return b.String()
}

func TestFile(t *testing.T) {
	for mod, want := range map[string]string{
		"github.com/holdfast-db/holdfast":    "api/holdfast.txt",
		"github.com/holdfast-db/holdfast/lb": "api/lb.txt",
		"example.com/x/v2":                   "api/x.txt",
		"v2":                                 "api/v2.txt",
	} {
		if got := filepath.ToSlash(File(mod)); got != want {
			t.Errorf("File(%q) = %q, want %q", mod, got, want)
		}
	}
}

// released says whether a module has had a release. Until then a name
// that is replaced is removed, never deprecated (the CHANGELOG lists it
// under Removed, BREAKING): a first release carries no deprecated name.
// Set it when tagging the first release.
const released = false

// TestNoDeprecatedBeforeRelease fails when an API file, which TestAPI
// keeps equal to the code, lists a deprecated name ("//deprecated") of a
// module not yet released.
func TestNoDeprecatedBeforeRelease(t *testing.T) {
	if released {
		t.Skip("released: deprecation is how a name is retired")
	}
	for _, mod := range modules {
		path := filepath.Join(root, mod.dir, "api", mod.name+".txt")
		data, err := os.ReadFile(path)
		if os.IsNotExist(err) && mod.dir != "." {
			continue // outside the repository (in a module's zip)
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(data), "\n") {
			if strings.HasSuffix(l, "//deprecated") {
				t.Errorf("%s: %s: remove it (pre-release: CHANGELOG, Removed, BREAKING) rather than deprecate it", path, l)
			}
		}
	}
}
