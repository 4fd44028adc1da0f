package fakes_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"

	"cloud.google.com/go/auth"
	"github.com/holdfast-db/holdfast/fakes"
	"google.golang.org/api/googleapi"
)

// A Connector plays its script, then connects to its target for real. Here
// the target is a local listener standing in for PostgreSQL.
func ExampleConnector() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // accept and hang up
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()
	defer wg.Wait()
	defer ln.Close()

	c := fakes.NewConnector(ln.Addr().String(),
		fakes.Refused().Times(2),
		fakes.TokenFetch503(),
		fakes.Forbidden(),
	)
	ctx := context.Background()
	for i := 1; i <= 5; i++ {
		// The address is ignored: the Connector dials its target.
		conn, err := c.Dial(ctx, "tcp", "db.internal:5432")
		var ae *auth.Error
		var ge *googleapi.Error
		switch {
		case err == nil:
			fmt.Printf("dial %d: connected\n", i)
			conn.Close()
		case errors.Is(err, syscall.ECONNREFUSED):
			fmt.Printf("dial %d: connection refused\n", i)
		case errors.As(err, &ae):
			fmt.Printf("dial %d: token fetch failed, status %d, temporary %v\n", i, ae.Response.StatusCode, ae.Temporary())
		case errors.As(err, &ge):
			fmt.Printf("dial %d: Admin API answered %d\n", i, ge.Code)
		}
	}
	fmt.Printf("attempts %d, successes %d, failures %d\n", c.Attempts(), c.Successes(), c.Failures())
	// Output:
	// dial 1: connection refused
	// dial 2: connection refused
	// dial 3: token fetch failed, status 503, temporary true
	// dial 4: Admin API answered 403
	// dial 5: connected
	// attempts 5, successes 1, failures 4
}

// A PasswordSource scripts a password or IAM token function, for example
// for holdfast.WithPasswordFunc(src.Password).
func ExamplePasswordSource() {
	src := fakes.NewPasswordSource("s3cret", fakes.TokenFetch503())
	ctx := context.Background()
	for range 2 {
		pw, err := src.Password(ctx)
		var ae *auth.Error
		if errors.As(err, &ae) {
			fmt.Println("token fetch failed, temporary:", ae.Temporary())
			continue
		}
		fmt.Println("got the password:", pw == "s3cret")
	}
	fmt.Println(src) // never shows the password
	// Output:
	// token fetch failed, temporary: true
	// got the password: true
	// fakes.PasswordSource{password: [redacted], attempts: 2}
}

func ExampleStep_Times() {
	c := fakes.NewConnector("127.0.0.1:1", fakes.AdminAPI(503).Times(2), fakes.Forbidden().Forever())
	for range 4 {
		_, err := c.Dial(context.Background(), "tcp", "")
		var ge *googleapi.Error
		if errors.As(err, &ge) {
			fmt.Println(ge.Code)
		}
	}
	fmt.Println(fakes.AdminAPI(503).Times(2), fakes.Forbidden().Forever())
	// Output:
	// 503
	// 503
	// 403
	// 403
	// AdminAPI(503).Times(2) AdminAPI(403).Forever()
}
