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

// A pool whose connections authenticate with RDS IAM tokens. Static
// credentials keep the example offline; in production use the credentials
// of config.LoadDefaultConfig (module github.com/aws/aws-sdk-go-v2/config).
func Example() {
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
	f, err := holdfast.New(holdfast.WithPasswordFunc(pw), holdfast.WithClassifier(rdsiam.Rules()...))
	if err != nil {
		log.Fatal(err)
	}
	if err := f.Configure(cfg); err != nil {
		log.Fatal(err)
	}
	// pool, err := pgxpool.NewWithConfig(ctx, cfg); then f.Start(ctx, pool)
	// and f.Acquire(ctx, pool), or f.NewPool(ctx, cfg) for both.

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

func ExamplePasswordFunc_invalid() {
	_, err := rdsiam.PasswordFunc(rdsiam.Config{Endpoint: "mydb.example", Region: "eu-west-1", User: "app"})
	fmt.Println(errors.Is(err, rdsiam.ErrInvalidConfig))
	fmt.Println(err)
	// Output:
	// true
	// rdsiam: invalid Endpoint: "mydb.example" is not "host:port"
}
