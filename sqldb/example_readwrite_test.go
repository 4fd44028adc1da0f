package sqldb_test

import (
	"context"
	"database/sql"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/sqldb"
)

// Read/write splitting for database/sql: a *sql.DB on the writer and one
// on the readers. (It needs a cluster, so this example is compiled, not
// run.)
func ExampleOpenReadWrite() {
	ctx := context.Background()
	f, err := holdfast.New(holdfast.WithFailover(failover.Config{}))
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	cfg, err := pgxpool.ParseConfig(os.Getenv("DATABASE_URL")) // the cluster (writer) endpoint
	if err != nil {
		log.Fatal(err)
	}
	rw, err := sqldb.OpenReadWrite(ctx, f, cfg, nil) // nil: the reader endpoint's config is derived
	if err != nil {
		log.Fatal(err)
	}
	defer rw.Close()

	if _, err := rw.Writer().ExecContext(ctx, "INSERT INTO orders (id) VALUES ($1)", 42); err != nil {
		log.Fatal(err)
	}
	var n int
	// A read of the caller's own write goes to the writer.
	if err := rw.Read(holdfast.ReadYourWrites(ctx)).QueryRowContext(ctx, "SELECT count(*) FROM orders WHERE id = 42").Scan(&n); err != nil {
		log.Fatal(err)
	}
	// Reads that may trail by the replica lag go to the readers.
	err = sqldb.RunTx(ctx, f, rw.Read(ctx), &sql.TxOptions{ReadOnly: true}, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, "SELECT count(*) FROM orders").Scan(&n)
	})
	if err != nil {
		log.Fatal(err)
	}
}
