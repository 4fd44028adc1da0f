package cloudsqltest_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"cloud.google.com/go/cloudsqlconn"
	"google.golang.org/api/googleapi"

	"github.com/holdfast-db/holdfast/fakes/cloudsqltest"
)

// A real cloudsqlconn dialer against the fake, with an injected fault: the
// Admin API answers 403 to connectSettings, and the dialer reports it with
// the same error types as against Google. (This example needs no
// PostgreSQL: the dial fails before the fake would forward anything.)
func Example() {
	srv, err := cloudsqltest.New(cloudsqltest.Config{
		Backend: "127.0.0.1:5432", // the PostgreSQL the instance forwards to
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
	d, err := cloudsqlconn.NewDialer(context.Background(), append(opts, cloudsqlconn.WithLazyRefresh())...)
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()

	srv.Fail(cloudsqltest.ConnectSettings, 403, -1)
	_, err = d.Dial(context.Background(), srv.ConnName())

	var ge *googleapi.Error
	fmt.Println(srv.ConnName())
	fmt.Println(errors.As(err, &ge), ge.Code)
	fmt.Println(srv.Stats().ConnectSettings)
	// Output:
	// fake-project:fake-region:fake-instance
	// true 403
	// 1
}
