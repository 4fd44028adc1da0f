package holdfast_test

import (
	"bytes"
	"context"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// neutralPackages must not depend on any vendor's libraries, in their tests
// either: a user's "go mod tidy" loads the tests of every package the user
// imports, so a vendor import in a test of the root package would make
// every user of holdfast download Google's and Amazon's modules. The core
// (the root package, classify, retry, bluegreen, internal/obs) and the
// vendor-neutral packages built on it or for testing with it are listed.
var neutralPackages = []string{
	".", "./classify", "./retry", "./bluegreen", "./internal/obs",
	"./readiness", "./fakes", "./fakes/pgtest",
}

// vendorPrefixes are the import paths the neutral packages must not reach:
// the cloud vendors' libraries and holdfast's packages that wrap them.
var vendorPrefixes = []string{
	"cloud.google.com/",
	"google.golang.org/",
	"github.com/googleapis/",
	"github.com/GoogleCloudPlatform/",
	"golang.org/x/oauth2",
	"github.com/aws/",
	"github.com/holdfast-db/holdfast/cloudsql",
	"github.com/holdfast-db/holdfast/alloydb",
	"github.com/holdfast-db/holdfast/internal/gcpconn",
	"github.com/holdfast-db/holdfast/rdsiam",
	"github.com/holdfast-db/holdfast/rdssecrets",
	"github.com/holdfast-db/holdfast/fakes/cloudsqltest",
	"github.com/holdfast-db/holdfast/fakes/alloydbtest",
	"github.com/holdfast-db/holdfast/fakes/internal/gcpfake",
}

func vendorPackage(path string) bool {
	return slices.ContainsFunc(vendorPrefixes, func(p string) bool { return strings.HasPrefix(path, p) })
}

// TestCoreImportsNoVendor runs "go list -deps -test" on the neutral
// packages and fails, naming the importers, if a vendor package appears.
func TestCoreImportsNoVendor(t *testing.T) {
	t.Parallel()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("the go command is not available: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := append([]string{"list", "-deps", "-test", "-f", "{{.ImportPath}}\t{{join .Imports \" \"}}"}, neutralPackages...)
	cmd := exec.CommandContext(ctx, goCmd, args...)
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}

	const module = "github.com/holdfast-db/holdfast"
	var reached []string               // vendor packages in the list
	importers := map[string][]string{} // vendor package -> holdfast packages importing it
	listed := 0
	for line := range strings.Lines(string(out)) {
		pkg, imports, _ := strings.Cut(strings.TrimSpace(line), "\t")
		listed++
		if vendorPackage(pkg) {
			reached = append(reached, pkg)
			continue
		}
		for imp := range strings.FieldsSeq(imports) {
			if vendorPackage(imp) && (pkg == module || strings.HasPrefix(pkg, module+"/") || strings.HasPrefix(pkg, module+"_test")) {
				importers[imp] = append(importers[imp], pkg)
			}
		}
	}
	if listed < 50 {
		t.Fatalf("go list listed %d packages, too few to be the dependencies of %v:\n%s", listed, neutralPackages, out)
	}
	for _, imp := range slices.Sorted(maps.Keys(importers)) {
		t.Errorf("%s is imported by %s", imp, strings.Join(importers[imp], ", "))
	}
	if len(reached) > 0 && len(importers) == 0 {
		t.Errorf("vendor packages reached through third-party packages: %s", strings.Join(reached, ", "))
	}
}
