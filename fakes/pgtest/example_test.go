package pgtest_test

import (
	"context"
	"fmt"
	"log"
	"testing"

	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/jackc/pgx/v5"
)

// A package's tests share one server through DSN; TestMain stops it and
// checks for leaked goroutines.
func ExampleDSN() {
	// In a _test.go file:
	//
	//	func TestMain(m *testing.M) { pgtest.Main(m) }
	query := func(t *testing.T) {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, pgtest.DSN(t)) // skips if PostgreSQL is not installed
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		// ...
	}
	_ = query
}

// Tests that kill, restart or reconfigure a server start their own. This
// example is compiled but not run, since it needs PostgreSQL installed.
func ExampleStart() {
	ctx := context.Background()
	srv, err := pgtest.Start(ctx, pgtest.Options{
		Host:     "127.0.0.11", // any loopback address
		Settings: map[string]string{"wal_level": "logical"},
	})
	if err != nil {
		log.Fatal(err) // includes the tail of the server log
	}
	defer srv.Stop()

	if err := srv.Exec(ctx, "CREATE TABLE t (id int)"); err != nil {
		log.Fatal(err)
	}
	fmt.Println(srv.Addr())
}
