package pgtest_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/holdfast-db/holdfast/fakes/pgtest"
)

// A package's tests share one server through DSN, and TestMain stops it and
// checks for leaked goroutines. The test below is what a _test.go file holds
// (an example cannot declare it); it skips when PostgreSQL is not installed,
// or fails under HOLDFAST_REQUIRE_PG=1.
func ExampleDSN() {
	// func TestMain(m *testing.M) { pgtest.Main(m) }

	testQuery := func(t *testing.T) {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, pgtest.DSN(t))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var one int
		if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
			t.Fatal(err)
		}
	}
	_ = testQuery
}

// Tests that kill, restart or reconfigure a server start their own. This
// example is compiled but not run, since it needs PostgreSQL installed.
func ExampleStart() {
	ctx := context.Background()
	srv, err := pgtest.Start(ctx, pgtest.Options{
		Host:     "127.0.0.11", // any loopback address on Linux
		Settings: map[string]string{"wal_level": "logical"},
	})
	if errors.Is(err, pgtest.ErrNotFound) {
		fmt.Println("PostgreSQL is not installed") // a test would t.Skip here
		return
	}
	if err != nil {
		log.Fatal(err) // a *pgtest.StartError, with the tail of the server log
	}
	defer srv.Stop()

	if err := srv.Exec(ctx, "CREATE TABLE t (id int)"); err != nil {
		log.Print(err)
		return
	}
	fmt.Println(srv.Addr()) // 127.0.0.11 and a free port
}
