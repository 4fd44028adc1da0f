package alloydb_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"time"

	"cloud.google.com/go/alloydbconn"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/alloydb"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/fakes"
	"github.com/holdfast-db/holdfast/fakes/alloydbtest"
)

// The production setup, with automatic IAM database authentication and
// Application Default Credentials. It needs a real AlloyDB instance, so
// this example is compiled but not run.
func Example() {
	ctx := context.Background()
	d, err := alloydbconn.NewDialer(ctx, alloydbconn.WithIAMAuthN())
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close() // after the pool

	f, err := holdfast.New(alloydb.With(d, os.Getenv("ALLOYDB_INSTANCE_URI")))
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	// The user is the IAM principal (a service account's email without
	// .gserviceaccount.com); no password. sslmode does not matter: the
	// connector encrypts, and pgx's own TLS is turned off.
	pool, err := f.NewPoolFromDSN(ctx, "user=app@my-project.iam dbname=app")
	if err != nil {
		log.Fatal(err) // a *holdfast.ConnectError: f.Classify says transient or fatal
	}
	defer pool.Close()

	var now time.Time
	if err := pool.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
		log.Fatal(err)
	}
}

// A read pool is an instance of its own, with its own URI: give it a pool
// of its own. With one factory, name the read pool's URI as the reader's
// host: writes go to the primary, reads to the read pool, which stays up
// while the primary fails over. (It needs a cluster, so this example is
// compiled, not run.)
func Example_readPool() {
	ctx := context.Background()
	d, err := alloydbconn.NewDialer(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	const cluster = "projects/my-project/locations/europe-west1/clusters/orders"

	f, err := holdfast.New(alloydb.With(d, cluster+"/instances/primary"))
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	writer, err := pgxpool.ParseConfig("user=app password=" + os.Getenv("PGPASSWORD") + " dbname=orders")
	if err != nil {
		log.Fatal(err)
	}
	reader := writer.Copy()
	reader.ConnConfig.Host = cluster + "/instances/read-pool-1" // this pool dials the read pool
	rw, err := f.NewReadWrite(ctx, writer, reader, holdfast.PoolName("orders"))
	if err != nil {
		log.Fatal(err)
	}
	defer rw.Close()

	err = f.RunTx(ctx, rw.Write(), pgx.TxOptions{}, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO orders (id, total) VALUES ($1, $2)", 42, 100)
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	var n int
	if err := rw.Read(ctx).QueryRow(ctx, "SELECT count(*) FROM orders").Scan(&n); err != nil {
		log.Fatal(err)
	}
}

// The seed's test plan against the fake AlloyDB of fakes/alloydbtest, on
// loopback and without a database: the IAM login token endpoint answers
// 503 once, then the instance refuses the login in its metadata exchange.
// holdfast retries the 503 once, and stops at the refusal, Fatal, with a
// hint.
func ExampleWith() {
	srv, err := alloydbtest.New(alloydbtest.Config{Backend: "127.0.0.1:1"}) // nothing gets that far
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	opts, err := srv.IAMDialerOptions()
	if err != nil {
		log.Fatal(err)
	}
	d, err := alloydbconn.NewDialer(context.Background(), opts...)
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	f, err := holdfast.New(alloydb.With(d, srv.URI()), holdfast.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()

	srv.Fail(alloydbtest.LoginToken, 503, 1)
	srv.Primary().RejectMetadataExchange(-1, "")
	_, err = f.NewPoolFromDSN(context.Background(), "user=app@my-project.iam dbname=app")

	var ce *holdfast.ConnectError
	fmt.Println(errors.As(err, &ce), ce.Attempts, f.Classify(err))
	fmt.Println("login tokens fetched:", srv.Stats().LoginTokens, "exchanges refused:", srv.Primary().Stats().Rejected)
	fmt.Println(ce.Hint)
	// Output:
	// true 2 fatal/alloydb-metadata-exchange
	// login tokens fetched: 2 exchanges refused: 1
	// the AlloyDB instance refused the connection in the connector's metadata exchange (its reason is in the error): check that the identity has roles/alloydb.client, and with IAM database authentication (alloydbconn.WithIAMAuthN) that it has roles/alloydb.databaseUser and that user in the connection string is that IAM principal (a service account's email without .gserviceaccount.com)
}

// The policy holdfast uses with the connector: one holdfast retry, each
// dial bounded.
func ExampleRetryPolicy() {
	p := alloydb.RetryPolicy()
	fmt.Println("attempts:", p.MaxAttempts)
	fmt.Println("first retry after:", p.InitialInterval)
	fmt.Println("per attempt:", p.AttemptTimeout, "= DialTimeout:", alloydb.DialTimeout)
	fmt.Println("overall:", p.MaxElapsed)
	// Output:
	// attempts: 2
	// first retry after: 250ms
	// per attempt: 12s = DialTimeout: 12s
	// overall: 30s
}

// TypeRules classify the connector's errors. Here a scripted connector
// (fakes/alloydbtest's steps) plays three of them into a factory that has
// the rules, as With installs them.
func ExampleTypeRules() {
	f, _ := holdfast.New(holdfast.WithIntegration(holdfast.Integration{TypeRules: alloydb.TypeRules()}))
	conn := fakes.NewConnector("127.0.0.1:1", alloydbtest.TokenFetch503(), alloydbtest.LoginTokenFetch(503), alloydbtest.Forbidden())
	for range 3 {
		_, err := conn.Dial(context.Background(), "tcp", "db:5432")
		fmt.Println(f.Classify(err))
	}
	// Output:
	// transient/token-fetch-503
	// transient/token-fetch-503
	// fatal/alloydb-permission-denied
}

// Rules make a closed dialer Fatal with its own reason.
func ExampleRules() {
	c := classify.New(alloydb.Rules()...)
	err := fmt.Errorf("dial: %w", alloydbconn.ErrDialerClosed)
	fmt.Println(c.Classify(err))
	fmt.Println(classify.Classify(err)) // the built-in rules alone
	// Output:
	// fatal/dialer-closed
	// fatal/unknown
}
