package holdfast_test

import (
	"os"
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
