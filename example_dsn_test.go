package holdfast_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/fakes"
	"github.com/holdfast-db/holdfast/retry"
	"github.com/holdfast-db/holdfast/sqldb"
)

// One pool from a connection string, and the *sql.DB of the service's
// database/sql code over that same pool: one set of connections, every
// path protected. (It needs a database, so this example is compiled, not
// run; examples/quickstart runs it.)
func ExampleFactory_NewPoolFromDSN() {
	ctx := context.Background()
	f, err := holdfast.New()
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()

	pool, err := f.NewPoolFromDSN(ctx, os.Getenv("DATABASE_URL"), holdfast.PoolName("orders"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	db := sqldb.OpenDB(pool) // sqlx, GORM, Bun, ent, goose: over the same pool
	defer db.Close()
}

// A connection string that does not parse is a *ConfigError, whose text
// masks the password.
func ExampleFactory_NewPoolFromDSN_invalid() {
	f, err := holdfast.New()
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	_, err = f.NewPoolFromDSN(context.Background(), "postgres://app:secret@db.internal:54x2/orders")
	fmt.Println(err)
	var ce *holdfast.ConfigError
	fmt.Println(errors.As(err, &ce), ce.Field)
	// Output:
	// holdfast: invalid dsn: not a pgx connection string: cannot parse `postgres://app:xxxxx@db.internal:54x2/orders`: invalid port
	// true dsn
}

// levelAndMessage is a slog handler that prints each line's level, its
// message and its attributes named in keys.
type levelAndMessage struct{ keys []string }

func (h levelAndMessage) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (h levelAndMessage) Handle(_ context.Context, r slog.Record) error {
	line := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		for _, k := range h.keys {
			if a.Key == k {
				line += " " + a.String()
			}
		}
		return true
	})
	fmt.Println(line)
	return nil
}
func (h levelAndMessage) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h levelAndMessage) WithGroup(string) slog.Handler      { return h }

// The log lines of a pool whose first connection cannot be made, at the
// default level (Info): one WARN per retry round of the startup policy
// (sampled: lines of one kind at most once a second), and one when it
// gives up; the connection's own retries within a round log at DEBUG. Every line names
// its layer, its stage, the classified reason and its pool (the table of
// every line is in the repository's docs/telemetry.md). Here every dial
// is refused, with 1ns backoffs.
func ExampleWithLogger() {
	fast := retry.Default()
	fast.InitialInterval, fast.MaxInterval = time.Nanosecond, time.Nanosecond
	logger := slog.New(levelAndMessage{keys: []string{"holdfast.layer", "holdfast.stage", "error.reason", "holdfast.pool"}})
	f, err := holdfast.New(holdfast.WithLogger(logger), holdfast.WithRetryPolicy(fast), holdfast.WithStartupPolicy(fast))
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	cfg, err := pgxpool.ParseConfig("postgres://app@db.internal:5432/app?sslmode=disable")
	if err != nil {
		log.Fatal(err)
	}
	cfg.ConnConfig.DialFunc = fakes.NewConnector("", fakes.Refused().Forever()).Dial
	cfg.ConnConfig.LookupFunc = func(context.Context, string) ([]string, error) { return []string{"192.0.2.1"}, nil }

	_, err = f.NewPool(context.Background(), cfg, holdfast.PoolName("orders"))
	fmt.Println(f.Classify(err))
	// Output:
	// WARN holdfast: retrying after a transient failure holdfast.layer=startup error.reason=conn-refused holdfast.stage=startup holdfast.pool=orders
	// WARN holdfast: giving up after transient failures holdfast.layer=startup error.reason=conn-refused holdfast.stage=startup holdfast.pool=orders
	// transient/conn-refused
}
