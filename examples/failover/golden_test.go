package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden tables in testdata")

// TestGolden prints recorded results (testdata/*.json, each one run's
// -json output) and compares the table with testdata/*.txt, and their
// JSON encoding with the recording (the same keys, values and types):
// the demo's output does not change by accident. go test -run Golden
// -update rewrites the tables.
func TestGolden(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recordings in testdata: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".json"), func(t *testing.T) {
			recorded, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var res Result
			dec := json.NewDecoder(bytes.NewReader(recorded))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&res); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			var out bytes.Buffer
			res.print(&out)
			golden := strings.TrimSuffix(file, ".json") + ".txt"
			if *update {
				if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if out.String() != string(want) {
				t.Errorf("table differs from %s:\n%s", golden, out.String())
			}
			var encoded bytes.Buffer
			enc := json.NewEncoder(&encoded)
			enc.SetIndent("", "  ")
			if err := enc.Encode(&res); err != nil {
				t.Fatal(err)
			}
			if a, b := decodeAny(t, recorded), decodeAny(t, encoded.Bytes()); !reflect.DeepEqual(a, b) {
				t.Errorf("JSON differs from %s:\n%s", file, encoded.String())
			}
		})
	}
}

func decodeAny(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}
