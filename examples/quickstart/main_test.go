package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/holdfast-db/holdfast/fakes/pgtest"
)

// runMain is the environment variable that makes the test binary run the
// quick start's main instead of its tests (TestQuickStartOpensOnePool).
const runMain = "HOLDFAST_QUICKSTART_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMain) == "1" {
		main()
		os.Exit(0)
	}
	pgtest.Main(m)
}

// The README's quick start is this program, verbatim: the program is
// compiled (and vetted) with every test run, and this test fails when the
// two drift apart.
func TestREADMEQuickStartIsThisProgram(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	prog, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```go\n"+string(prog)+"```") {
		t.Fatal("README.md's quick start differs from examples/quickstart/main.go; update one from the other")
	}
}

// The quick start opens one pool to the database, which its pgx and its
// database/sql code share: it runs to its end against a real server as a
// role that may hold one connection at a time (CONNECTION LIMIT 1). Two
// pools could not: the first keeps its connection idle, and the second
// pool's first connection is refused with 53300 until its startup policy
// gives up.
func TestQuickStartOpensOnePool(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := pgtest.DSN(t)
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	role := fmt.Sprintf("quickstart_%d", os.Getpid())
	if _, err := admin.Exec(ctx, "CREATE ROLE "+role+" LOGIN CONNECTION LIMIT 1"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := admin.Exec(ctx, "DROP ROLE "+role); err != nil {
			t.Error(err)
		}
		admin.Close(ctx)
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	q := u.Query()
	q.Set("application_name", "quickstart")
	u.RawQuery = q.Encode()

	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), runMain+"=1", "DATABASE_URL="+u.String())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the quick start as a role of CONNECTION LIMIT 1: %v\n%s", err, out)
	}
}
