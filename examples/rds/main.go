// Command rds connects to Amazon RDS or Aurora PostgreSQL with IAM database
// authentication: every new connection presents a fresh token signed with
// the process's AWS credentials, through holdfast:
//
//	DATABASE_URL='postgres://app@mydb.abc123.eu-west-1.rds.amazonaws.com:5432/app?sslmode=verify-full&sslrootcert=system' \
//	AWS_REGION=eu-west-1 go run ./examples/rds
//
// The database user needs "GRANT rds_iam TO app" and the principal an IAM
// policy allowing rds-db:connect. Credentials come from the container
// credentials endpoint (ECS, EKS Pod Identity) or from AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN. A real application would
// rather use config.LoadDefaultConfig of github.com/aws/aws-sdk-go-v2/config
// and pass its Credentials.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/endpointcreds"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/rdsiam"
)

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	dsn, region := os.Getenv("DATABASE_URL"), os.Getenv("AWS_REGION")
	if dsn == "" || region == "" {
		return errors.New("set DATABASE_URL (without a password) and AWS_REGION")
	}
	creds, err := credentialsFromEnv()
	if err != nil {
		return err
	}

	cfg, err := pgxpool.ParseConfig(dsn) // keep sslmode=verify-full: RDS IAM authn requires TLS
	if err != nil {
		return err
	}
	rc, err := rdsiam.ConfigFor(cfg, region, creds) // the token is signed for this host:port and user
	if err != nil {
		return err
	}
	f, err := holdfast.New(
		rdsiam.With(rc),                     // a fresh token per new connection; credential 5xx transient
		holdfast.WithLogger(slog.Default()), // retries are logged; tokens never are
	)
	if err != nil {
		return err
	}
	pool, err := f.NewPool(ctx, cfg)
	if err != nil {
		return err // a *holdfast.ConnectError of Layer "startup"; a rejected token (28000) was retried once
	}
	defer pool.Close()

	conn, err := f.Acquire(ctx, pool)
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

// credentialsFromEnv returns cached AWS credentials from the container
// credentials endpoint or from the environment.
func credentialsFromEnv() (aws.CredentialsProvider, error) {
	endpoint := os.Getenv("AWS_CONTAINER_CREDENTIALS_FULL_URI")
	if rel := os.Getenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"); endpoint == "" && rel != "" {
		endpoint = "http://169.254.170.2" + rel // ECS
	}
	if endpoint != "" {
		return aws.NewCredentialsCache(endpointcreds.New(endpoint, func(o *endpointcreds.Options) {
			o.AuthorizationToken = os.Getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN")
			if file := os.Getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"); file != "" { // EKS Pod Identity
				o.AuthorizationTokenProvider = endpointcreds.TokenProviderFunc(func() (string, error) {
					b, err := os.ReadFile(file)
					return strings.TrimSpace(string(b)), err
				})
			}
		})), nil
	}
	id, secret := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	if id == "" || secret == "" {
		return nil, errors.New("no AWS credentials: set AWS_CONTAINER_CREDENTIALS_FULL_URI or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
	}
	return aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(id, secret, os.Getenv("AWS_SESSION_TOKEN"))), nil
}
