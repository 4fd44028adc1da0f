package bluegreentest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/holdfast-db/holdfast/fakes/bluegreentest"
)

// A client-side DNS cache: within its TTL a client still reaches the old
// address after the switchover moved the name, as real clients do.
func ExampleResolver_Cached() {
	ctx := context.Background()
	names := bluegreentest.NewNames(bluegreentest.Aurora, "orders", "", "", "")
	r := bluegreentest.NewResolver()
	r.Set(names.Cluster, "127.0.0.11")
	cache := r.Cached(time.Hour) // give cache.Lookup to pgx as LookupFunc

	before, _ := cache.Lookup(ctx, names.Cluster)
	r.Set(names.Cluster, "127.0.0.21") // blue DNS updated
	cached, _ := cache.Lookup(ctx, names.Cluster)
	cache.Flush()
	after, _ := cache.Lookup(ctx, names.Cluster)
	fmt.Println(before, cached, after)
	// Output:
	// [127.0.0.11] [127.0.0.11] [127.0.0.21]
}
