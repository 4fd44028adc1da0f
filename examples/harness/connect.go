package harness

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"

	"github.com/holdfast-db/holdfast"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Main is the main of an example that connects to a cloud database
// (cloudsql, rds): it runs run with a context that an interrupt (Ctrl-C)
// cancels, and exits with run's error logged.
func Main(run func(ctx context.Context) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx)
	stop()
	if err != nil {
		log.Fatal(err)
	}
}

// ConnectedAs acquires a connection of pool through f (a request-scope
// retry of a new connection), asks it who it is connected as and prints
// "connected as USER" on w.
func ConnectedAs(ctx context.Context, w io.Writer, f *holdfast.Factory, pool *pgxpool.Pool) error {
	conn, err := f.Acquire(ctx, pool)
	if err != nil {
		return err
	}
	defer conn.Release()
	var who string
	if err := conn.QueryRow(ctx, "SELECT current_user").Scan(&who); err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, "connected as", who)
	return err
}
