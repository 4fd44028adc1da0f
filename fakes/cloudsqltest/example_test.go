package cloudsqltest_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/cloudsqlconn"
	"google.golang.org/api/googleapi"

	"github.com/holdfast-db/holdfast/fakes"
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

// The steps script a fakes.Connector (or fakes.PasswordSource) with the
// connector's errors, without a server: here two Admin API 503s, then 403
// on every dial.
func ExampleAdminAPI() {
	c := fakes.NewConnector("127.0.0.1:1", cloudsqltest.AdminAPI(503).Times(2), cloudsqltest.Forbidden().Forever())
	for range 4 {
		_, err := c.Dial(context.Background(), "tcp", "")
		var ge *googleapi.Error
		if errors.As(err, &ge) {
			fmt.Println(ge.Code)
		}
	}
	fmt.Println(cloudsqltest.AdminAPI(503).Times(2), cloudsqltest.Forbidden().Forever())
	// Output:
	// 503
	// 503
	// 403
	// 403
	// cloudsqltest.AdminAPI(503).Times(2) cloudsqltest.AdminAPI(403).Forever()
}

// In a PasswordSource, for example holdfast.WithPasswordFunc(src.Password),
// a token step fails with the token source's error.
func ExampleTokenFetch503() {
	src := fakes.NewPasswordSource("s3cret", cloudsqltest.TokenFetch503())
	for range 2 {
		pw, err := src.Password(context.Background(), "")
		var ae *auth.Error
		if errors.As(err, &ae) {
			fmt.Println("token fetch failed, status", ae.Response.StatusCode, "temporary", ae.Temporary())
			continue
		}
		fmt.Println("got the password:", pw == "s3cret")
	}
	// Output:
	// token fetch failed, status 503 temporary true
	// got the password: true
}
