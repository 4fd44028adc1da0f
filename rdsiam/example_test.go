package rdsiam_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/rdsiam"
)

// A pool whose connections authenticate with RDS IAM tokens: a fresh one
// for every new connection. It needs an RDS instance, so this example is
// compiled, not run. In production, take the credentials of
// config.LoadDefaultConfig (module github.com/aws/aws-sdk-go-v2/config).
func Example() {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig("postgres://app@mydb.abc123.eu-west-1.rds.amazonaws.com:5432/app?sslmode=verify-full&sslrootcert=system")
	if err != nil {
		log.Fatal(err)
	}
	creds := aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""))
	rc, err := rdsiam.ConfigFor(cfg, "eu-west-1", creds) // host:port and user of cfg
	if err != nil {
		log.Fatal(err)
	}
	f, err := holdfast.New(rdsiam.With(rc))
	if err != nil {
		log.Fatal(err)
	}
	pool, err := f.NewPool(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
}

// The token PasswordFunc mints, for holdfast.WithPasswordFunc or a pool
// without holdfast: a presigned "connect" request. Static credentials keep
// the example offline.
func ExamplePasswordFunc() {
	cfg, err := pgxpool.ParseConfig("host=mydb.abc123.eu-west-1.rds.amazonaws.com port=5432 user=app dbname=app sslmode=verify-full sslrootcert=system")
	if err != nil {
		log.Fatal(err)
	}
	creds := aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""))
	rc, err := rdsiam.ConfigFor(cfg, "eu-west-1", creds)
	if err != nil {
		log.Fatal(err)
	}
	pw, err := rdsiam.PasswordFunc(rc)
	if err != nil {
		log.Fatal(err)
	}
	tok, err := pw(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	endpoint, query, _ := strings.Cut(tok, "?")
	q, _ := url.ParseQuery(query)
	fmt.Println(endpoint)
	fmt.Println(q.Get("Action"), q.Get("DBUser"), q.Get("X-Amz-Expires"))
	fmt.Println(strings.Contains(q.Get("X-Amz-Credential"), "/eu-west-1/rds-db/"))
	// Output:
	// mydb.abc123.eu-west-1.rds.amazonaws.com:5432
	// connect app 900
	// true
}

// A Config with a missing field is an error from holdfast.New.
func ExampleWith() {
	_, err := holdfast.New(rdsiam.With(rdsiam.Config{Endpoint: "mydb.abc123.eu-west-1.rds.amazonaws.com:5432", Region: "eu-west-1"}))
	var ce *holdfast.ConfigError
	fmt.Println(errors.Is(err, rdsiam.ErrInvalidConfig), errors.As(err, &ce))
	fmt.Println(err)
	// Output:
	// true true
	// holdfast: invalid rdsiam: invalid arguments: rdsiam: invalid User: empty: want the database user that has the rds_iam role
}

func ExamplePasswordFunc_invalid() {
	_, err := rdsiam.PasswordFunc(rdsiam.Config{Endpoint: "mydb.example", Region: "eu-west-1", User: "app"})
	fmt.Println(errors.Is(err, rdsiam.ErrInvalidConfig))
	fmt.Println(err)
	// Output:
	// true
	// rdsiam: invalid Endpoint: "mydb.example" is not "host:port"
}
