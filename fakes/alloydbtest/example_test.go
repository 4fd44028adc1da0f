package alloydbtest_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"cloud.google.com/go/alloydbconn"
	"google.golang.org/api/googleapi"

	"github.com/holdfast-db/holdfast/fakes"
	"github.com/holdfast-db/holdfast/fakes/alloydbtest"
)

// A real alloydbconn dialer against the fake, with an injected fault: the
// Admin API answers 403 to generateClientCertificate, and the dialer
// reports it with the same error types as against Google. (This example
// needs no PostgreSQL: the dial fails before the fake would forward
// anything.)
func Example() {
	srv, err := alloydbtest.New(alloydbtest.Config{
		Backend: "127.0.0.1:5432", // the PostgreSQL the primary forwards to
	})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	opts, err := srv.DialerOptions()
	if err != nil {
		log.Fatal(err)
	}
	// Lazy refresh: one Admin API refresh per dial, which makes the count
	// below exact.
	d, err := alloydbconn.NewDialer(context.Background(), append(opts, alloydbconn.WithLazyRefresh())...)
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()

	srv.Fail(alloydbtest.GenerateClientCertificate, 403, -1)
	_, err = d.Dial(context.Background(), srv.URI())

	var ge *googleapi.Error
	fmt.Println(srv.URI())
	fmt.Println(errors.As(err, &ge), ge.Code)
	fmt.Println(srv.Stats().GenerateClientCertificate)
	// Output:
	// projects/fake-project/locations/fake-region/clusters/fake-cluster/instances/fake-primary
	// true 403
	// 1
}

// The steps script a fakes.Connector (or fakes.PasswordSource) with the
// connector's errors, without a server: here an Admin API token 503, then
// a metadata exchange the instance refuses on every dial.
func ExampleMetadataExchange() {
	c := fakes.NewConnector("127.0.0.1:1", alloydbtest.TokenFetch503(), alloydbtest.MetadataExchange("denied").Forever())
	for range 3 {
		_, err := c.Dial(context.Background(), "tcp", "")
		fmt.Println(err)
	}
	// Output:
	// failed to get instance IP address: refresh error: failed to get instance metadata (instance URI = "fake-project.fake-region.fake-cluster.fake-primary"): Get "https://alloydb.googleapis.com/v1alpha/projects/fake-project/locations/fake-region/clusters/fake-cluster/instances/fake-primary/connectionInfo?%24alt=json%3Benum-encoding%3Dint": auth: cannot fetch token: 503
	// Response: Service Unavailable
	// denied
	// denied
}
