package readiness

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/holdfast-db/holdfast/bluegreen"
)

// The admin body's blue/green mapping is bounded: a metadata table of
// thousands of rows (issue 34, item 6) makes no body of megabytes.
func TestBlueGreenBodyBounded(t *testing.T) {
	st := &bluegreen.Status{Phase: bluegreen.Created}
	for i := range 3000 {
		n := strconv.Itoa(i)
		st.Mapping = append(st.Mapping, bluegreen.Mapping{Blue: "db-" + n + ".example", BlueAddr: "10.0.0.1", Green: "db-" + n + "-green.example", GreenAddr: "10.0.0.2"})
	}
	b := blueGreenBody("orders", st)
	if len(b.Mapping) != maxMapping || b.MappingOmitted != 3000-maxMapping || b.Mapping[0].Blue != "db-0.example" {
		t.Fatalf("mapping of %d entries, %d omitted; want the first %d and %d omitted", len(b.Mapping), b.MappingOmitted, maxMapping, 3000-maxMapping)
	}
	raw, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > 16<<10 {
		t.Errorf("the entry is %d bytes, want at most 16 KiB", len(raw))
	}
	if small := blueGreenBody("orders", &bluegreen.Status{Mapping: st.Mapping[:3]}); len(small.Mapping) != 3 || small.MappingOmitted != 0 {
		t.Errorf("a short mapping = %d entries, %d omitted; want all 3", len(small.Mapping), small.MappingOmitted)
	}
}
