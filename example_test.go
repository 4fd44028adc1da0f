package holdfast_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/fakes"
	"github.com/holdfast-db/holdfast/retry"
)

// A Factory configures a pool: dials and token fetches are classified and
// retried. (Connecting needs a database; see examples/demo.)
func Example() {
	tokens := fakes.NewPasswordSource("iam-token")
	f, err := holdfast.New(
		holdfast.WithPasswordFunc(tokens.Password),
		holdfast.WithRetryPolicy(retry.Default()),
	)
	if err != nil {
		panic(err)
	}
	cfg, err := pgxpool.ParseConfig("postgres://app@db.internal:5432/app?sslmode=disable")
	if err != nil {
		panic(err)
	}
	if err := f.Configure(cfg); err != nil {
		panic(err)
	}
	fmt.Println("DialFunc wrapped:", cfg.ConnConfig.DialFunc != nil)
	fmt.Println("BeforeConnect installed:", cfg.BeforeConnect != nil)
	// Output:
	// DialFunc wrapped: true
	// BeforeConnect installed: true
}

// Bad configuration is an error from New, never a panic. A partial
// retry.Policy is one: start from retry.Default() and change what you
// need.
func ExampleNew_invalid() {
	_, err := holdfast.New(holdfast.WithRetryPolicy(retry.Policy{MaxAttempts: 5}))
	fmt.Println(err)
	var ce *holdfast.ConfigError
	fmt.Println(errors.As(err, &ce), ce.Field)

	p := retry.Default()
	p.MaxAttempts = 5
	_, err = holdfast.New(holdfast.WithRetryPolicy(p))
	fmt.Println(err)
	// Output:
	// holdfast: invalid WithRetryPolicy: invalid policy: retry: invalid InitialInterval 0s: must be positive (left at zero: a Policy has no defaults of its own; start from retry.Default() and change the fields you need)
	// true WithRetryPolicy
	// <nil>
}

// Every package reports a configuration mistake as its own *ConfigError,
// one type for all.
func ExampleConfigError() {
	_, err := holdfast.New(holdfast.WithBlueGreen(bluegreen.Config{HighInterval: -1}))
	fmt.Println(err)
	// One type for every package's configuration errors: errors.As finds
	// the outermost, whose Err holds the package's own.
	var ce *holdfast.ConfigError
	fmt.Println(errors.As(err, &ce), ce.Field)
	var inner *holdfast.ConfigError
	fmt.Println(errors.As(ce.Err, &inner), inner.Pkg, inner.Field)
	// Output:
	// holdfast: invalid WithBlueGreen: invalid bluegreen.Config: bluegreen: invalid HighInterval: must not be negative (zero means the default 100ms)
	// true WithBlueGreen
	// true bluegreen HighInterval
}

// Classify tells what the factory would do with an error. (Package
// cloudsql's ExampleTypeRules does this with the Cloud SQL connector's
// errors.)
func ExampleFactory_Classify() {
	f, _ := holdfast.New()
	conn := fakes.NewConnector("127.0.0.1:1",
		fakes.Refused(),
		fakes.Fail(&pgconn.PgError{Severity: "FATAL", Code: "57P03"}), // the server is starting up
		fakes.Fail(&pgconn.PgError{Severity: "FATAL", Code: "28P01"}), // wrong password
		fakes.Fail(errors.New("proxy: no route to instance")),
	)
	for range 4 {
		_, err := conn.Dial(context.Background(), "tcp", "db:5432")
		fmt.Println(f.Classify(err))
	}
	// Output:
	// transient/conn-refused
	// transient/sqlstate-57P03
	// fatal/sqlstate-28P01
	// fatal/unknown
}

// One factory per database, with the options a service usually sets. The
// defaults are safe: bounded retries, and a retry budget of the factory's
// own. The factory's classifier decides what its pools retry.
func ExampleNew() {
	f, err := holdfast.New(
		holdfast.WithLogger(slog.New(slog.NewJSONHandler(os.Stderr, nil))),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close() // stops blue/green monitors, if any (WithBlueGreen)

	for _, code := range []string{"53300", "57P03", "28P01", "42P01"} {
		fmt.Println(code, f.Classify(&pgconn.PgError{Severity: "FATAL", Code: code}))
	}
	// Output:
	// 53300 transient/sqlstate-53300
	// 57P03 transient/sqlstate-57P03
	// 28P01 fatal/sqlstate-28P01
	// 42P01 fatal/sqlstate-42P01
}

// NewPool replaces pgxpool.NewWithConfig: it configures cfg, builds the
// pool and makes its first connection under the startup policy. Every path
// of the pool it returns is protected, so the rest of the service is
// unchanged. (It needs a database, so this example is compiled, not run.)
func ExampleFactory_NewPool() {
	ctx := context.Background()
	f, err := holdfast.New()
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()

	cfg, err := pgxpool.ParseConfig(os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	cfg.MaxConns = 20 // your settings and hooks, as before: holdfast chains them
	pool, err := f.NewPool(ctx, cfg, holdfast.PoolName("orders"))
	if err != nil {
		if f.Classify(err).Retryable() {
			log.Fatalf("database unreachable for now: %v", err) // report not-ready, try again later
		}
		log.Fatal(err) // a mistake to fix: permission, database name, TLS
	}
	defer pool.Close()

	var now time.Time
	if err := pool.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
		log.Fatal(err)
	}
}

// When the database cannot be reached, NewPool fails within the startup
// policy with a *holdfast.ConnectError of Layer "startup"; Classify says
// whether to try again later. Here every dial is refused, with 1ns
// backoffs.
func ExampleFactory_NewPool_unreachable() {
	fast := retry.Default()
	fast.InitialInterval, fast.MaxInterval = time.Nanosecond, time.Nanosecond
	f, err := holdfast.New(holdfast.WithRetryPolicy(fast), holdfast.WithStartupPolicy(fast))
	if err != nil {
		log.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig("postgres://app@db.internal:5432/app?sslmode=disable")
	if err != nil {
		log.Fatal(err)
	}
	refused := fakes.NewConnector("", fakes.Refused().Forever())
	cfg.ConnConfig.DialFunc = refused.Dial
	cfg.ConnConfig.LookupFunc = func(context.Context, string) ([]string, error) { return []string{"192.0.2.1"}, nil }

	_, err = f.NewPool(context.Background(), cfg)
	var ce *holdfast.ConnectError
	fmt.Println(errors.As(err, &ce), ce.Layer, f.Classify(err))
	fmt.Println("dials:", refused.Attempts()) // 3 startup attempts, each a connection of 3 dials
	// Output:
	// true startup transient/conn-refused
	// dials: 9
}

// Factory.Acquire is pool.Acquire with a request-scope retry of what a
// connection's own retries leave over: an authentication failure 28P01
// retried once with a fresh token (WithPasswordFunc), and any other
// transient failure that reaches it unretried. Failures already retried
// while connecting are returned as they are. (It needs a database, so this
// example is compiled, not run.)
func ExampleFactory_Acquire() {
	ctx := context.Background()
	tokens := func(ctx context.Context, host string) (string, error) { return os.Getenv("DB_TOKEN"), nil } // an IAM token source, for host
	f, err := holdfast.New(holdfast.WithPasswordFunc(tokens))
	if err != nil {
		log.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig(os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	pool, err := f.NewPool(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	conn, err := f.Acquire(ctx, pool)
	if err != nil {
		v := f.Classify(err)
		log.Fatalf("acquire: %v (%v)", err, v) // v.Retryable(): answer 503 and let the client retry
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT 1"); err != nil {
		log.Fatal(err)
	}
}

// RunTx runs a transaction as pgx.BeginTxFunc does, and runs the whole of
// it again only when nothing of it committed (a serialization failure, a
// connection lost before COMMIT). A COMMIT whose answer was lost is
// ErrOutcomeUnknown: it may have committed, and it is not run again. (It
// needs a database, so this example is compiled, not run.)
func ExampleFactory_RunTx() {
	ctx := context.Background()
	f, err := holdfast.New()
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	cfg, err := pgxpool.ParseConfig(os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	pool, err := f.NewPool(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	orderID := "9f1c…" // the request's idempotency key
	err = f.RunTx(ctx, pool, pgx.TxOptions{IsoLevel: pgx.Serializable}, func(tx pgx.Tx) error {
		// With sqlc: queries.WithTx(tx). This may run more than once.
		_, err := tx.Exec(ctx, "INSERT INTO charges (order_id, cents) VALUES ($1, $2)", orderID, 1299)
		return err
	})
	switch {
	case errors.Is(err, holdfast.ErrOutcomeUnknown):
		// Look the key up on a new connection: charged if it is there.
	case err != nil:
		log.Fatal(err) // f.Classify(err) says why, and whether a later request may succeed
	}
}

// RunTx takes anything that begins a pgx transaction: a pool, a DBTX, a
// connection, or here one whose COMMITs are scripted. A first run meets a
// serialization failure at COMMIT (the server rolled back: run again); a
// second transaction's COMMIT loses its answer (never run again).
func ExampleFactory_RunTx_verdicts() {
	f, err := holdfast.New()
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	ctx := context.Background()

	db := &scripted{commits: []error{&pgconn.PgError{Code: "40001", Message: "could not serialize access"}, nil}}
	err = f.RunTx(ctx, db, pgx.TxOptions{}, func(pgx.Tx) error { return nil })
	fmt.Println("serialization failure:", db.runs, "runs, err", err)

	db = &scripted{commits: []error{io.ErrUnexpectedEOF}} // COMMIT sent, the connection lost
	err = f.RunTx(ctx, db, pgx.TxOptions{}, func(pgx.Tx) error { return nil })
	fmt.Println("COMMIT answer lost:", db.runs, "run,", errors.Is(err, holdfast.ErrOutcomeUnknown), f.Classify(err))
	// Output:
	// serialization failure: 2 runs, err <nil>
	// COMMIT answer lost: 1 run, true fatal/outcome-unknown
}

// scripted begins transactions whose COMMITs return commits in turn.
type scripted struct {
	commits []error
	runs    int
}

func (s *scripted) BeginTx(context.Context, pgx.TxOptions) (pgx.Tx, error) {
	err := s.commits[s.runs]
	s.runs++
	return &scriptedTx{commit: err}, nil
}

// scriptedTx is a transaction of scripted: only what the runner calls.
type scriptedTx struct {
	pgx.Tx
	commit error
}

func (t *scriptedTx) Commit(context.Context) error   { return t.commit }
func (t *scriptedTx) Rollback(context.Context) error { return nil }
func (t *scriptedTx) Conn() *pgx.Conn                { return nil }

// An Aurora Serverless v2 cluster that scales to zero, with
// SecondsUntilAutoPause 600: the pools let their connections go after
// 5 minutes idle, so that the instance may pause, and the first request
// after a pause waits for the resume (up to WakeFor, 60 s) instead of
// failing. (It needs a database, so this example is compiled, not run;
// fakes/outagetest.Serverless simulates one.)
func ExampleWithServerlessV2() {
	f, err := holdfast.New(holdfast.WithServerlessV2(holdfast.ServerlessV2Config{AutoPause: 10 * time.Minute}))
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	ctx := context.Background()
	pool, err := f.NewPoolFromDSN(ctx, os.Getenv("DATABASE_URL")) // waits for a resume too
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	// Any request, however long the pool was idle: a paused instance is
	// woken by one dial, the other requests wait for it.
	if _, err := pool.Exec(ctx, "SELECT 1"); err != nil {
		log.Print(f.Classify(err), err) // a wake past WakeFor: a *DatabaseDownError, Transient
	}
}
