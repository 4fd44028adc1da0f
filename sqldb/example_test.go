package sqldb_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/sqldb"
)

// A database/sql service switches by its constructor: sqldb.Open instead
// of sql.Open. Every connection of the *sql.DB comes from a pool the
// factory configured, so new connections are retried as in any holdfast
// pool. (It needs a database, so this example is compiled, not run.)
func ExampleOpen() {
	ctx := context.Background()
	f, err := holdfast.New()
	if err != nil {
		log.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig(os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	db, err := sqldb.Open(ctx, f, cfg) // was: sql.Open("pgx", dsn)
	if err != nil {
		log.Fatal(err) // a *holdfast.ConnectError (Layer "startup") when the database cannot be reached
	}
	defer db.Close() // closes the pool too

	// Hand db to sqlx ("pgx" as the driver name), GORM, Bun, ent or goose.
	var one int
	if err := db.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		log.Fatal(err)
	}
}

// A service with both pgx and database/sql code opens its *sql.DB over
// its pool: one set of connections, one MaxConns, and the same protection
// on both (a password the server refused is retried with a fresh one
// here too). (It needs a database, so this example is compiled, not run;
// examples/quickstart runs it.)
func ExampleOpenDB() {
	ctx := context.Background()
	f, err := holdfast.New()
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	pool, err := f.NewPoolFromDSN(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	db := sqldb.OpenDB(pool) // was: stdlib.OpenDBFromPool(pool)
	defer db.Close()         // leaves the pool open

	var one int
	if err := db.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		log.Fatal(err)
	}
	if err := pool.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		log.Fatal(err)
	}
}

// For a tool that opens its database by driver name and DSN only, register
// a driver whose connection strings open holdfast pools. Nothing connects
// until the first use.
func ExampleRegisterDriver() {
	f, err := holdfast.New()
	if err != nil {
		log.Fatal(err)
	}
	if err := sqldb.RegisterDriver("holdfast-example", f); err != nil {
		log.Fatal(err)
	}
	db, err := sql.Open("holdfast-example", "postgres://app@db.internal:5432/app")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	fmt.Println(db.Driver() != nil)

	// A driver name is registered once per process.
	err = sqldb.RegisterDriver("holdfast-example", f)
	fmt.Println(errors.Is(err, sqldb.ErrInvalidConfig))
	fmt.Println(err)
	// Output:
	// true
	// true
	// sqldb: invalid name: a driver named "holdfast-example" is already registered
}

// database/sql returns driver.ErrBadConn to its caller only when nothing
// of the statement was sent (inside a transaction, or once its own retries
// ran out): Rule makes it Transient for a caller that retries whole
// transactions.
func ExampleRule() {
	c := classify.New(sqldb.Rule)
	fmt.Println(c.Classify(fmt.Errorf("commit: %w", driver.ErrBadConn)))
	fmt.Println(c.Classify(sql.ErrTxDone))
	// Output:
	// transient/sql-bad-conn
	// fatal/unknown
}

// RunTx is the factory's transaction runner over a *sql.DB: the
// whole transaction runs again only when nothing of it committed, and a
// COMMIT whose answer was lost is holdfast.ErrOutcomeUnknown, never run
// again. (It needs a database, so this example is compiled, not run.)
func ExampleRunTx() {
	ctx := context.Background()
	f, err := holdfast.New()
	if err != nil {
		log.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig(os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	db, err := sqldb.Open(ctx, f, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	err = sqldb.RunTx(ctx, f, db, &sql.TxOptions{Isolation: sql.LevelSerializable}, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "UPDATE stock SET n = n - 1 WHERE sku = $1 AND n > 0", "A-17")
		return err // this function may run more than once
	})
	if errors.Is(err, holdfast.ErrOutcomeUnknown) {
		log.Print("the COMMIT's answer was lost: check before trying again")
	} else if err != nil {
		log.Fatal(err)
	}
}
