package holdfast_test

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// A pool's name has one way in: the pool option PoolName (of NewPool,
// NewPoolFromDSN, Configure, NewReadWrite). No factory-wide option or
// second spelling names pools too (WithPoolName was one).
func TestPoolNameHasOneOption(t *testing.T) {
	data, err := os.ReadFile("api/holdfast.txt")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.Contains(strings.ToLower(l), "poolname") {
			got = append(got, l)
		}
	}
	want := "pkg github.com/holdfast-db/holdfast, func PoolName(string) PoolOption"
	if len(got) != 1 || got[0] != want {
		t.Errorf("the API names pools %d ways:\n%s\nwant one: %s", len(got), strings.Join(got, "\n"), want)
	}
}

// The option table of the package overview lists every option and pool
// option the package exports (as api/holdfast.txt lists them), and no
// other: a new option cannot go undocumented in the overview.
func TestOptionTableListsEveryOption(t *testing.T) {
	api, err := os.ReadFile("api/holdfast.txt")
	if err != nil {
		t.Fatal(err)
	}
	var exported []string
	for _, l := range strings.Split(string(api), "\n") {
		sig, ok := strings.CutPrefix(l, "pkg github.com/holdfast-db/holdfast, func ")
		if ok && (strings.HasSuffix(sig, ") Option") || strings.HasSuffix(sig, ") PoolOption")) {
			name, _, _ := strings.Cut(sig, "(")
			exported = append(exported, name)
		}
	}
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(src), "// # Options\n")
	if !ok {
		t.Fatal(`doc.go has no section "Options"`)
	}
	table, _, _ = strings.Cut(table, "\n//\n// ")
	var documented []string
	for _, l := range strings.Split(table, "\n") {
		if f := strings.Fields(strings.TrimPrefix(l, "//\t")); len(f) > 0 && strings.HasPrefix(l, "//\t") && f[0] != "option" && !strings.HasPrefix(l, "//\t ") {
			documented = append(documented, f[0])
		}
	}
	slices.Sort(exported)
	slices.Sort(documented)
	if !slices.Equal(exported, documented) || len(exported) < 10 {
		t.Errorf("the overview's option table lists %q; the package exports %q", documented, exported)
	}
}
