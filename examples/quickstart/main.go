package main

import (
	"context"
	"log"

	"github.com/holdfast-db/holdfast"
	"github.com/jackc/pgx/v5/pgxpool"
)

func main() {
	ctx := context.Background()
	f, err := holdfast.New() // options below; defaults are safe
	if err != nil {
		log.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig("postgres://app@db.internal:5432/app?sslmode=verify-full")
	if err != nil {
		log.Fatal(err)
	}
	// Set your own DialFunc (a Cloud SQL dialer) and hooks first; Configure wraps them.
	if err := f.Configure(cfg); err != nil {
		log.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	// Or: pool, err := f.NewPool(ctx, cfg) — Configure, NewWithConfig, and a
	// first connection under the startup policy (a *holdfast.StartupError if it fails).

	conn, err := f.Acquire(ctx, pool) // pool.Acquire with request-scope retry
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Release()
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		log.Fatal(err)
	}
}
