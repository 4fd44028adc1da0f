package cloudsql_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"cloud.google.com/go/cloudsqlconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/oauth2"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/cloudsql"
	"github.com/holdfast-db/holdfast/fakes"
	"github.com/holdfast-db/holdfast/fakes/cloudsqltest"
)

// The production setup, with IAM database authentication and Application
// Default Credentials. It needs a real Cloud SQL instance, so this example
// is compiled but not run.
func Example() {
	ctx := context.Background()
	d, err := cloudsqlconn.NewDialer(ctx, cloudsqlconn.WithIAMAuthN())
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close() // after the pool

	f, err := holdfast.New(cloudsql.With(d, os.Getenv("INSTANCE_CONNECTION_NAME")))
	if err != nil {
		log.Fatal(err)
	}
	// The user is the IAM principal; no password. sslmode does not matter:
	// the connector encrypts, and pgx's own TLS is turned off.
	cfg, err := pgxpool.ParseConfig("user=app@my-project.iam dbname=app")
	if err != nil {
		log.Fatal(err)
	}
	pool, err := f.NewPool(ctx, cfg) // first connection under cloudsql.StartupPolicy
	if err != nil {
		log.Fatal(err) // a *holdfast.StartupError: its Verdict says transient or fatal
	}
	defer pool.Close()

	var now time.Time
	if err := pool.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
		log.Fatal(err)
	}
}

// With makes the factory dial through the connector and turns pgx's own
// TLS off for the pools it configures; bad arguments are an error from
// holdfast.New.
func ExampleWith() {
	// A dialer with explicit credentials does no I/O until it dials. In
	// production, let it find Application Default Credentials instead.
	d, err := cloudsqlconn.NewDialer(context.Background(),
		cloudsqlconn.WithTokenSource(oauth2.StaticTokenSource(&oauth2.Token{AccessToken: "t", Expiry: time.Now().Add(time.Hour)})),
		cloudsqlconn.WithBuiltInMetrics(false))
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()

	f, err := holdfast.New(cloudsql.With(d, "my-project:europe-west1:my-instance"))
	if err != nil {
		log.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig("host=localhost user=app dbname=app sslmode=prefer")
	if err != nil {
		log.Fatal(err)
	}
	if err := f.Configure(cfg); err != nil {
		log.Fatal(err)
	}
	fmt.Println("pgx TLS:", cfg.ConnConfig.TLSConfig != nil, "fallbacks:", len(cfg.ConnConfig.Fallbacks))

	_, err = holdfast.New(cloudsql.With(nil, "my-project:europe-west1:my-instance"))
	var ce *holdfast.ConfigError
	fmt.Println(errors.Is(err, cloudsql.ErrInvalidConfig), errors.As(err, &ce))
	// Output:
	// pgx TLS: false fallbacks: 0
	// true true
}

// Configure, for a pool without holdfast, replaces pgx's dial function,
// host lookup and TLS settings.
func ExampleConfigure() {
	// A dialer with explicit credentials does no I/O until it dials. In
	// production, let it find Application Default Credentials instead.
	d, err := cloudsqlconn.NewDialer(context.Background(),
		cloudsqlconn.WithTokenSource(oauth2.StaticTokenSource(&oauth2.Token{AccessToken: "t", Expiry: time.Now().Add(time.Hour)})),
		cloudsqlconn.WithBuiltInMetrics(false))
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()

	cfg, err := pgxpool.ParseConfig("host=localhost user=app dbname=app sslmode=prefer")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("before:", cfg.ConnConfig.TLSConfig != nil, len(cfg.ConnConfig.Fallbacks))
	if err := cloudsql.Configure(cfg, d, "my-project:europe-west1:my-instance"); err != nil {
		log.Fatal(err)
	}
	fmt.Println("after:", cfg.ConnConfig.TLSConfig != nil, len(cfg.ConnConfig.Fallbacks))

	err = cloudsql.Configure(cfg, d, "")
	fmt.Println(errors.Is(err, cloudsql.ErrInvalidConfig), err)
	// Output:
	// before: true 1
	// after: false 0
	// true cloudsql: invalid instance: empty instance connection name: want "project:region:instance"
}

// The policy holdfast uses with the connector: one holdfast retry, each
// attempt allowed more time than the connector's own Admin API retry.
func ExampleRetryPolicy() {
	p := cloudsql.RetryPolicy()
	fmt.Println("attempts:", p.MaxAttempts)
	fmt.Println("first retry after:", p.InitialInterval)
	fmt.Println("per attempt:", p.AttemptTimeout, "> connector's own retry:", cloudsql.ConnectorRetryMax)
	fmt.Println("overall:", p.MaxElapsed)
	// Output:
	// attempts: 2
	// first retry after: 250ms
	// per attempt: 12s > connector's own retry: 8.5s
	// overall: 30s
}

// Rules makes a closed dialer Fatal with its own reason.
func ExampleRules() {
	c := classify.New(cloudsql.Rules()...)
	err := fmt.Errorf("dial: %w", cloudsqlconn.ErrDialerClosed)
	fmt.Println(c.Classify(err))
	fmt.Println(classify.Classify(err)) // the built-in rules alone
	// Output:
	// fatal/dialer-closed
	// fatal/unknown
}

// TypeRules classify the connector's errors. Here a scripted connector
// (fakes/cloudsqltest's steps) plays two of them into a factory that has
// the rules, as With installs them.
func ExampleTypeRules() {
	f, _ := holdfast.New(holdfast.WithIntegration(holdfast.Integration{TypeRules: cloudsql.TypeRules()}))
	conn := fakes.NewConnector("127.0.0.1:1", cloudsqltest.TokenFetch503(), cloudsqltest.Forbidden())
	for range 2 {
		_, err := conn.Dial(context.Background(), "tcp", "db:5432")
		fmt.Println(f.Classify(err))
	}
	// Output:
	// transient/token-fetch-503
	// fatal/permission-denied
}
