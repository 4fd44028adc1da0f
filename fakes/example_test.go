package fakes_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"

	"github.com/holdfast-db/holdfast/fakes"
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

	errProxy := errors.New("proxy: no healthy backend")
	c := fakes.NewConnector(ln.Addr().String(),
		fakes.Refused().Times(2),
		fakes.Fail(errProxy),
	)
	ctx := context.Background()
	for i := 1; i <= 4; i++ {
		// The address is ignored: the Connector dials its target.
		conn, err := c.Dial(ctx, "tcp", "db.internal:5432")
		switch {
		case err == nil:
			fmt.Printf("dial %d: connected\n", i)
			conn.Close()
		case errors.Is(err, syscall.ECONNREFUSED):
			fmt.Printf("dial %d: connection refused\n", i)
		case errors.Is(err, errProxy):
			fmt.Printf("dial %d: %v\n", i, err)
		}
	}
	fmt.Printf("attempts %d, successes %d, failures %d\n", c.Attempts(), c.Successes(), c.Failures())
	// Output:
	// dial 1: connection refused
	// dial 2: connection refused
	// dial 3: proxy: no healthy backend
	// dial 4: connected
	// attempts 4, successes 1, failures 3
}

// A PasswordSource scripts a password or IAM token function, for example
// for holdfast.WithPasswordFunc(src.Password).
func ExamplePasswordSource() {
	// The token endpoint's connection was reset, as net reports it.
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	src := fakes.NewPasswordSource("s3cret", fakes.Fail(reset))
	ctx := context.Background()
	for range 2 {
		pw, err := src.Password(ctx, "")
		if err != nil {
			fmt.Println("token fetch failed, reset:", errors.Is(err, syscall.ECONNRESET))
			continue
		}
		fmt.Println("got the password:", pw == "s3cret")
	}
	fmt.Println(src) // never shows the password
	// Output:
	// token fetch failed, reset: true
	// got the password: true
	// fakes.PasswordSource{password: [redacted], attempts: 2}
}

func ExampleStep_Times() {
	errDenied := errors.New("permission denied")
	c := fakes.NewConnector("127.0.0.1:1", fakes.Refused().Times(2), fakes.Fail(errDenied).Forever())
	for range 4 {
		_, err := c.Dial(context.Background(), "tcp", "")
		fmt.Println(errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, errDenied))
	}
	fmt.Println(fakes.Refused().Times(2), fakes.Fail(errDenied).Forever())
	// Output:
	// true false
	// true false
	// false true
	// false true
	// Refused().Times(2) Fail("permission denied").Forever()
}

// quotaError is an error type of another package: a quota service that
// both the dialer and the token function call.
type quotaError struct{ at string }

func (e *quotaError) Error() string { return e.at + ": quota exceeded" }

// A package defines steps for its own error types with Custom, giving the
// error of a dial and the error of a password fetch; package cloudsqltest's
// TokenFetch503 is one.
func ExampleCustom() {
	quota := fakes.Custom("quotatest.Exceeded()",
		func() error { return &quotaError{at: "dial"} },
		func() error { return &quotaError{at: "token"} })
	ctx := context.Background()

	c := fakes.NewConnector("127.0.0.1:1", quota)
	_, err := c.Dial(ctx, "tcp", "")
	fmt.Println(err)
	p := fakes.NewPasswordSource("s3cret", quota)
	_, err = p.Password(ctx, "")
	fmt.Println(err)
	fmt.Println(quota.Times(3))
	// Output:
	// dial: quota exceeded
	// token: quota exceeded
	// quotatest.Exceeded().Times(3)
}

// A LogBuffer collects what loggers on several goroutines write.
func ExampleLogBuffer() {
	var logs fakes.LogBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // for a stable output
			}
			return a
		},
	}))
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() { logger.Info("retrying", "attempt", i+1) })
	}
	wg.Wait()
	fmt.Println(strings.Count(logs.String(), "msg=retrying"))
	// Output: 3
}
