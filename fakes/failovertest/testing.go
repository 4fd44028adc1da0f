package failovertest

import (
	"context"
	"testing"

	"github.com/holdfast-db/holdfast/fakes/internal/pgnode"
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
	return pgnode.StartTest(t, func(ctx context.Context) (*Cluster, error) { return Start(ctx, cfg) })
}

// StartGlobalTest starts a Global for a test or benchmark and closes it
// when the test ends, skipping as [StartTest] does (no PostgreSQL
// binaries without HOLDFAST_REQUIRE_PG=1, go test -short).
func StartGlobalTest(t testing.TB, cfg GlobalConfig) *Global {
	t.Helper()
	return pgnode.StartTest(t, func(ctx context.Context) (*Global, error) { return StartGlobal(ctx, cfg) })
}
