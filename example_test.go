package holdfast_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/fakes"
	"github.com/holdfast-db/holdfast/retry"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
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

// Bad configuration is an error from New, never a panic.
func ExampleNew_invalid() {
	p := retry.Default()
	p.MaxAttempts = 0
	_, err := holdfast.New(holdfast.WithRetryPolicy(p))
	fmt.Println(err)
	fmt.Println(errors.Is(err, holdfast.ErrInvalidConfig))
	// Output:
	// holdfast: invalid WithRetryPolicy: invalid policy: retry: invalid MaxAttempts 0: must be at least 1
	// true
}

// Every package reports a configuration mistake as its own *ConfigError;
// one that wraps another matches both packages' ErrInvalidConfig.
func ExampleConfigError() {
	_, err := holdfast.New(holdfast.WithBlueGreen(bluegreen.Config{HighInterval: -1}))
	fmt.Println(err)
	fmt.Println(errors.Is(err, holdfast.ErrInvalidConfig), errors.Is(err, bluegreen.ErrInvalidConfig))
	var ce *bluegreen.ConfigError
	fmt.Println(errors.As(err, &ce), ce.Field)
	// Output:
	// holdfast: invalid WithBlueGreen: invalid bluegreen.Config: bluegreen: invalid HighInterval: must not be negative (zero means the default 100ms)
	// true true
	// true HighInterval
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
