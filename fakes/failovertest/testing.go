package failovertest

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/fakes/pgtest"
)

// StartTest starts a Cluster for a test or benchmark and closes it when
// the test ends. It skips the test when the PostgreSQL server binaries are
// not installed, unless pgtest.EnvRequire (HOLDFAST_REQUIRE_PG=1) is set:
// then, as for any other failure to start, the test fails. It skips the
// test under go test -short too: a cluster is several PostgreSQL servers
// with streaming replication, seconds to start, and the tests that need
// one are integration tests.
func StartTest(t testing.TB, cfg Config) *Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("failovertest: a cluster of real PostgreSQL servers: skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := Start(ctx, cfg)
	if errors.Is(err, ErrNotFound) && os.Getenv(pgtest.EnvRequire) != "1" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}
