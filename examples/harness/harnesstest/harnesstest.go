// Package harnesstest has the helpers of the tests of the demos that use
// package harness: a run in-process, the JSON output decoded, the -svg
// picture checked, the flags' table test, and the golden tables.
package harnesstest

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/holdfast-db/holdfast/examples/harness"
	"github.com/holdfast-db/holdfast/examples/timeline"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
)

var update = flag.Bool("update", false, "rewrite the golden tables in testdata")

// Run runs a demo in-process: run, its progress lines written into a
// buffer, then print of its result. It skips t when the PostgreSQL server
// binaries are missing (unless pgtest.EnvRequire is 1) and fails it on
// another error; it logs the progress lines and the table, and returns the
// result and both.
func Run[R any](t testing.TB, run func(progress io.Writer) (R, error), print func(R, io.Writer)) (res R, progress, out string) {
	t.Helper()
	var p bytes.Buffer
	res, err := run(&p)
	if errors.Is(err, pgtest.ErrNotFound) && os.Getenv(pgtest.EnvRequire) != "1" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatalf("run: %v\n%s", err, p.String())
	}
	var o bytes.Buffer
	print(res, &o)
	t.Logf("\n%s%s", p.String(), o.String())
	return res, p.String(), o.String()
}

// DecodeJSON writes v as the -json output does and decodes that into into
// (a struct of pointers, say: nil for a key that is missing); it returns
// the JSON.
func DecodeJSON(t testing.TB, v, into any) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := harness.WriteJSON(&b, v); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b.Bytes(), into); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// CheckSVG reads the picture of -svg at path and checks it against the
// table's figures of the clients (timeline.Contents.CheckClients, the
// last client's group among the ids: the database/sql client's, when
// there is one); it returns what the picture holds, for the demo's own
// checks.
func CheckSVG(t testing.TB, path string, clients []timeline.Figures) timeline.Contents {
	t.Helper()
	got, err := timeline.ReadFile(path)
	if err != nil {
		t.Fatalf("-svg: %v", err)
	}
	if len(clients) == 0 {
		t.Fatal("CheckSVG: no clients")
	}
	for _, p := range got.CheckClients(clients, timeline.ID(clients[len(clients)-1].Name)) {
		t.Errorf("picture: %s", p)
	}
	return got
}

// FlagCase is a command line and what parsing it must give.
type FlagCase[O any] struct {
	Name    string
	Args    []string
	WantErr bool         // it must fail, with a message
	Check   func(O) bool // else, the options it must give
}

// Flags parses each case's command line with c, in parallel subtests,
// and checks the error or the options; then c.Main with bad, a command
// line with a bad flag, must exit with 2.
func Flags[O harness.Options, R any](t *testing.T, c harness.Command[O, R], bad []string, cases []FlagCase[O]) {
	t.Parallel()
	for _, tt := range cases {
		t.Run(tt.Name, func(t *testing.T) {
			t.Parallel()
			var errOut bytes.Buffer
			o, err := c.Parse(tt.Args, &errOut)
			if (err != nil) != tt.WantErr {
				t.Fatalf("Parse(%q) error %v, want error %v", tt.Args, err, tt.WantErr)
			}
			if tt.WantErr && errOut.Len() == 0 {
				t.Error("no message for the error")
			}
			if !tt.WantErr && !tt.Check(o) {
				t.Errorf("Parse(%q) = %+v", tt.Args, o)
			}
		})
	}
	var out, errOut bytes.Buffer
	if code := c.Main(bad, &out, &errOut); code != 2 {
		t.Errorf("Main with a bad flag: exit %d, want 2", code)
	}
}

// Golden prints recorded results (testdata/*.json, each one run's -json
// output) with print, after setup (what the JSON leaves out; nil for
// nothing), and compares the table with testdata/*.txt, and the result's
// JSON with the recording (the same keys, values and types, in any
// order): the demo's output does not change by accident. go test -run
// Golden -update rewrites the tables.
func Golden[R any](t *testing.T, print func(*R, io.Writer), setup func(*R)) {
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
			res := new(R)
			dec := json.NewDecoder(bytes.NewReader(recorded))
			dec.DisallowUnknownFields()
			if err := dec.Decode(res); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if setup != nil {
				setup(res)
			}
			var out bytes.Buffer
			print(res, &out)
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
			if err := harness.WriteJSON(&encoded, res); err != nil {
				t.Fatal(err)
			}
			if a, b := decodeAny(t, recorded), decodeAny(t, encoded.Bytes()); !reflect.DeepEqual(a, b) {
				t.Errorf("JSON differs from %s:\n%s", file, encoded.String())
			}
		})
	}
}

// decodeAny decodes b, its numbers as written.
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

// WritesJSON are the keys of a write demo's client in its -json output
// (those of harness.Writes), as pointers: nil for a key missing. A test's
// own struct of what it decodes embeds it.
type WritesJSON struct {
	Name            *string         `json:"name"`
	Requests        *int            `json:"requests"`
	OK              *int            `json:"ok"`
	Failed          *int            `json:"failed"`
	Errors          *map[string]int `json:"errors"`
	Retries         *int            `json:"retries"`
	Runner          *bool           `json:"runner"`
	OutcomeUnknown  *int            `json:"outcome_unknown"`
	Acknowledged    *int            `json:"acknowledged_writes"`
	LostWrites      *int            `json:"lost_writes"`
	MisplacedWrites *int            `json:"misplaced_writes"`
}

// Missing reports whether a key of w is missing.
func (w WritesJSON) Missing() bool {
	return w.Name == nil || w.Requests == nil || w.OK == nil || w.Failed == nil || w.Errors == nil || w.Retries == nil ||
		w.Runner == nil || w.OutcomeUnknown == nil || w.Acknowledged == nil || w.LostWrites == nil || w.MisplacedWrites == nil
}
