package main

import (
	"testing"

	"github.com/holdfast-db/holdfast/examples/harness/harnesstest"
)

// TestGolden prints recorded results (testdata/*.json, one -json run of
// each operation) and compares the table with testdata/*.txt and the JSON
// with the recording (harnesstest.Golden); go test -run Golden -update
// rewrites the tables.
func TestGolden(t *testing.T) { harnesstest.Golden(t, (*Result).print, nil) }
