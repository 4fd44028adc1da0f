package pgnode

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/fakes/pgtest"
)

// StartTest runs start (a simulation's Start) for a test or benchmark,
// within 2 minutes, and closes what it started when the test ends. It
// skips the test when the PostgreSQL server binaries are not installed,
// unless pgtest.EnvRequire (HOLDFAST_REQUIRE_PG=1) is set: then, as for
// any other failure to start, the test fails.
func StartTest[T interface{ Close() error }](t testing.TB, start func(context.Context) (T, error)) T {
	t.Helper()
	if testing.Short() {
		t.Skip("a simulator of real PostgreSQL servers: skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := start(ctx)
	if errors.Is(err, pgtest.ErrNotFound) && os.Getenv(pgtest.EnvRequire) != "1" {
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
