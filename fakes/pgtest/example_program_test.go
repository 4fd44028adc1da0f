package pgtest_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast/fakes/pgtest"
)

// A program that connects to DATABASE_URL when it is set, and otherwise to a
// throwaway server it starts and stops itself, as the programs under
// examples/ do. It is compiled but not run, since it needs PostgreSQL.
func Example() {
	if err := run(context.Background()); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context) (err error) {
	dsn, stop, err := database(ctx)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stop()) }()

	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	var version string
	if err := pool.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		return err
	}
	fmt.Println("PostgreSQL", version)
	return nil
}

// database returns DATABASE_URL when it is set. Otherwise it starts a
// throwaway PostgreSQL server, which needs the server binaries (initdb,
// pg_ctl) installed, and returns its connection string and its Stop.
func database(ctx context.Context) (dsn string, stop func() error, err error) {
	if dsn := os.Getenv("DATABASE_URL"); dsn != "" {
		fmt.Println("database: DATABASE_URL")
		return dsn, func() error { return nil }, nil
	}
	srv, err := pgtest.Start(ctx, pgtest.Options{})
	if err != nil {
		// errors.Is(err, pgtest.ErrNotFound) when PostgreSQL is not installed.
		return "", nil, fmt.Errorf("DATABASE_URL is not set, and starting a throwaway PostgreSQL failed: %w", err)
	}
	fmt.Println("database: a throwaway PostgreSQL on", srv.Addr(), "(DATABASE_URL is not set)")
	return srv.DSN(), srv.Stop, nil
}
