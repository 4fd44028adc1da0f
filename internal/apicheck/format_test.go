package apicheck

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFormat lists a module made for the purpose (testdata/mod) and
// compares it, line by line, with what Go's cmd/api would write (and the
// few additions documented on the package).
func TestFormat(t *testing.T) {
	t.Setenv("GOWORK", "off") // testdata/mod is a module of its own
	api, err := Generate(filepath.Join("testdata", "mod"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join("testdata", "mod.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	added, removed := Diff(api.Features, want)
	for _, l := range added {
		t.Errorf("unexpected: %s", l)
	}
	for _, l := range removed {
		t.Errorf("missing: %s", l)
	}
	var got []string
	for _, p := range api.Packages {
		got = append(got, fmt.Sprintf("%s %d %d", p.Dir, p.Exported, p.Features))
	}
	if g, w := strings.Join(got, "; "), "a 29 70; a/b 1 1"; g != w {
		t.Errorf("packages (dir, exported, lines) = %s, want %s", g, w)
	}
}
