package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"

	"cloud.google.com/go/cloudsqlconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/cloudsql"
)

// realMain connects to the instance of the environment and prints the
// user it logged in as.
func realMain() {
	if err := runReal(); err != nil {
		log.Fatal(err)
	}
}

func runReal() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	instance, user, db := os.Getenv("INSTANCE_CONNECTION_NAME"), os.Getenv("DB_USER"), os.Getenv("DB_NAME")
	if instance == "" || user == "" || db == "" {
		return errors.New("set INSTANCE_CONNECTION_NAME, DB_USER and DB_NAME")
	}

	// The connector: IAM authn, Application Default Credentials.
	d, err := cloudsqlconn.NewDialer(ctx, cloudsqlconn.WithIAMAuthN())
	if err != nil {
		return err
	}
	defer d.Close() // deferred first, runs last: after the pool is closed

	cfg, err := pgxpool.ParseConfig("")
	if err != nil {
		return err
	}
	cfg.ConnConfig.User, cfg.ConnConfig.Database = user, db // no password: the connector logs in with IAM
	// Dial through the connector (once per connect, without pgx's own TLS),
	// retry sized for it, and its errors classified.
	f, err := holdfast.New(cloudsql.With(d, instance), holdfast.WithLogger(slog.Default()))
	if err != nil {
		return err
	}
	pool, err := f.NewPool(ctx, cfg) // the first connection, under cloudsql.StartupPolicy
	if ce := (*holdfast.ConnectError)(nil); errors.As(err, &ce) && ce.Layer == "startup" {
		// Transient: the instance or Google's APIs may come back; report
		// not ready and try later. Fatal: fix the configuration.
		return fmt.Errorf("database not reachable (%s): %w", f.Classify(err), err)
	}
	if err != nil {
		return err
	}
	defer pool.Close()

	conn, err := f.Acquire(ctx, pool) // request-scope retry of a new connection
	if err != nil {
		return err
	}
	defer conn.Release()
	var who string
	if err := conn.QueryRow(ctx, "SELECT current_user").Scan(&who); err != nil {
		return err
	}
	fmt.Println("connected as", who)
	return nil
}
