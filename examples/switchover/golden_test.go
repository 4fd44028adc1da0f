package main

import (
	"testing"

	"github.com/holdfast-db/holdfast/examples/harness/harnesstest"
)

// TestGolden prints recorded results (testdata/*.json) and compares the
// table with testdata/*.txt and the JSON with the recording
// (harnesstest.Golden); go test -run Golden -update rewrites the tables.
func TestGolden(t *testing.T) {
	harnesstest.Golden(t, (*Result).print, func(res *Result) {
		// What the JSON leaves out: the timeline summary, the read-only
		// failures after COMPLETED.
		res.summary = "(the holdfast timeline summary)\n  line 2"
		for i := range res.Clients {
			res.Clients[i].readOnlyAfterCompleted = res.Clients[i].Errors["25006"]
		}
	})
}
