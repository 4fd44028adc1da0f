package outagetest

import (
	"context"
	"testing"

	"github.com/holdfast-db/holdfast/fakes/internal/pgnode"
)

// The Start…Test functions start a simulation for a test or benchmark
// and close it when the test ends. They skip the test when the
// PostgreSQL server binaries are not installed, unless pgtest.EnvRequire
// (HOLDFAST_REQUIRE_PG=1) is set: then, as for any other failure to
// start, the test fails. They skip it under go test -short too: each is
// real PostgreSQL servers, seconds to start.

// StartMultiAZTest starts a [MultiAZ] for t (see [StartMultiAZ]).
func StartMultiAZTest(t testing.TB, cfg MultiAZConfig) *MultiAZ {
	t.Helper()
	return pgnode.StartTest(t, func(ctx context.Context) (*MultiAZ, error) { return StartMultiAZ(ctx, cfg) })
}

// StartPairTest starts a [Pair] for t (see [StartPair]).
func StartPairTest(t testing.TB, cfg PairConfig) *Pair {
	t.Helper()
	return pgnode.StartTest(t, func(ctx context.Context) (*Pair, error) { return StartPair(ctx, cfg) })
}

// StartServerlessTest starts a [Serverless] instance for t (see
// [StartServerless]).
func StartServerlessTest(t testing.TB, cfg ServerlessConfig) *Serverless {
	t.Helper()
	return pgnode.StartTest(t, func(ctx context.Context) (*Serverless, error) { return StartServerless(ctx, cfg) })
}
