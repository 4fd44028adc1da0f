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
// then, as for any other failure to start, the test fails.
func StartTest(t testing.TB, cfg Config) *Cluster {
	t.Helper()
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
