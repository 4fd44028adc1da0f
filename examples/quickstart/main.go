package main

import (
	"context"
	"log"
	"os"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/sqldb"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

func main() {
	ctx := context.Background()
	dsn := os.Getenv("DATABASE_URL")

	f, err := holdfast.New() // one factory per database; the defaults are safe
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()

	// A pgxpool service: only the constructor changes.
	cfg, err := pgxpool.ParseConfig(dsn) // set your own hooks on cfg as before
	if err != nil {
		log.Fatal(err)
	}
	pool, err := f.NewPool(ctx, cfg) // was: pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		log.Fatal(err) // a *holdfast.StartupError says whether it is transient
	}
	defer pool.Close()
	var n int
	if err := pool.QueryRow(ctx, "SELECT 1").Scan(&n); err != nil { // every pool path is protected
		log.Fatal(err)
	}
	// sqlc: db.New(f.DBTX(pool)) also retries a password the server refused with a fresh one.
	if _, err := f.DBTX(pool).Exec(ctx, "SELECT 1"); err != nil {
		log.Fatal(err)
	}
	// A transaction (sqlc: queries.WithTx(tx)), run again only when nothing of it committed:
	err = f.RunTx(ctx, pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, "SELECT count(*) FROM pg_class").Scan(&n)
	}) // errors.Is(err, holdfast.ErrOutcomeUnknown): its COMMIT was sent and the answer lost
	if err != nil {
		log.Fatal(err)
	}

	// A database/sql service (sqlx, GORM, Bun, ent, goose): likewise.
	sqlCfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		log.Fatal(err)
	}
	db, err := sqldb.Open(ctx, f, sqlCfg) // was: sql.Open("pgx", dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close() // closes its pool too
	if err := db.QueryRowContext(ctx, "SELECT 1").Scan(&n); err != nil {
		log.Fatal(err)
	}
}
