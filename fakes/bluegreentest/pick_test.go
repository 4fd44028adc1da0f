package bluegreentest_test

import (
	"context"
	"slices"
	"testing"

	"github.com/holdfast-db/holdfast/fakes/bluegreentest"
)

// Resolver.Pick answers one address per lookup, the one pick chooses,
// through a CNAME too; Addrs lists all; a nil pick answers all again.
func TestResolverPick(t *testing.T) {
	ctx := context.Background()
	r := bluegreentest.NewResolver()
	r.Set("ro.example", "10.0.0.1:5432", "10.0.0.2:5432", "10.0.0.3:5432")
	r.Alias("alias.example", "ro.example")
	next := 0
	r.Pick("ro.example", func(n int) int { next++; return (next - 1) % n })
	for i, name := range []string{"ro.example", "ro.example", "alias.example", "ro.example"} {
		got, err := r.Lookup(ctx, name)
		want := []string{[]string{"10.0.0.1:5432", "10.0.0.2:5432", "10.0.0.3:5432"}[i%3]}
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("lookup %d of %s = %v, %v; want %v", i, name, got, err, want)
		}
	}
	if got := r.Addrs("ro.example"); len(got) != 3 {
		t.Errorf("Addrs = %v, want all 3", got)
	}
	r.Pick("ro.example", func(int) int { return 7 }) // out of range: the first
	if got, _ := r.Lookup(ctx, "ro.example"); !slices.Equal(got, []string{"10.0.0.1:5432"}) {
		t.Errorf("out-of-range pick answered %v", got)
	}
	r.Pick("ro.example", nil)
	if got, _ := r.Lookup(ctx, "ro.example"); len(got) != 3 {
		t.Errorf("without a pick: %v, want all 3", got)
	}
}
