package main

import (
	"context"
	"log"
	"os"

	"github.com/jackc/pgx/v5"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/sqldb"
)

func main() {
	ctx := context.Background()

	f, err := holdfast.New() // one factory per database; the defaults are safe
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()

	// was: pgxpool.New(ctx, dsn). The first connection is made (and retried) before it returns.
	pool, err := f.NewPoolFromDSN(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err) // f.Classify(err) says whether it is transient
	}
	defer pool.Close()
	// database/sql code (sqlx, GORM, Bun, ent, goose) over the same pool; was: stdlib.OpenDBFromPool(pool).
	db := sqldb.OpenDB(pool)
	defer db.Close()

	// Every path is protected. f.DBTX(pool) (sqlc: db.New(f.DBTX(pool))) and db also retry a
	// password the server refused with a fresh one.
	var n int
	if err := f.DBTX(pool).QueryRow(ctx, "SELECT 1").Scan(&n); err != nil {
		log.Fatal(err)
	}
	if err := db.QueryRowContext(ctx, "SELECT 1").Scan(&n); err != nil {
		log.Fatal(err)
	}
	// A transaction, run again only when nothing of it committed:
	err = f.RunTx(ctx, pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "SELECT 1")
		return err
	}) // errors.Is(err, holdfast.ErrOutcomeUnknown): its COMMIT was sent and the answer lost
	if err != nil {
		log.Fatal(err)
	}
}
