package bluegreentest_test

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/holdfast-db/holdfast/fakes/bluegreentest"
)

// The fake DNS: names resolve to what the test sets, and stop resolving
// when it removes them, as the green names do after a switchover.
func ExampleResolver() {
	ctx := context.Background()
	names := bluegreentest.NewNames(bluegreentest.Aurora, "orders", "", "", "")
	r := bluegreentest.NewResolver()
	r.Set(names.Cluster, "127.0.0.11")
	r.Set(names.GreenCluster, "127.0.0.21")

	addrs, _ := r.Lookup(ctx, names.Cluster)
	fmt.Println(names.Cluster, addrs)

	// The switchover: blue names now lead to green, green names are gone.
	r.Set(names.Cluster, "127.0.0.21")
	r.Remove(names.GreenCluster)
	addrs, _ = r.Lookup(ctx, names.Cluster)
	fmt.Println(names.Cluster, addrs)
	_, err := r.Lookup(ctx, names.GreenCluster)
	var dnsErr *net.DNSError
	fmt.Println(errors.As(err, &dnsErr) && dnsErr.IsNotFound)
	// Output:
	// orders.cluster-abcdefghijkl.us-east-1.rds.amazonaws.com [127.0.0.11]
	// orders.cluster-abcdefghijkl.us-east-1.rds.amazonaws.com [127.0.0.21]
	// true
}

// The host names of an Aurora deployment.
func ExampleNewNames() {
	n := bluegreentest.NewNames(bluegreentest.Aurora, "orders", "", "", "")
	fmt.Println(n.Cluster)
	fmt.Println(n.GreenCluster)
	fmt.Println(n.GreenInstance)
	fmt.Println(n.OldCluster)
	// Output:
	// orders.cluster-abcdefghijkl.us-east-1.rds.amazonaws.com
	// orders-green-abc123.cluster-abcdefghijkl.us-east-1.rds.amazonaws.com
	// orders-1-green-abc123.abcdefghijkl.us-east-1.rds.amazonaws.com
	// orders-old1.cluster-abcdefghijkl.us-east-1.rds.amazonaws.com
}
