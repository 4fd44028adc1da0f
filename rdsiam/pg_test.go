package rdsiam_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/endpointcreds"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/fakes"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/rdsiam"
	"github.com/holdfast-db/holdfast/retry"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// Roles of the authenticating server.
const (
	scramUser     = "rds_scram" // password authentication: a wrong password is 28P01
	scramPassword = "correct-horse-battery-staple"
	pamUser       = "rds_pam" // PAM authentication, as RDS IAM: every token is rejected with 28000
)

// startAuthPG starts a server whose pg_hba.conf authenticates scramUser
// with scram-sha-256 and pamUser with PAM through a PAM service that does
// not exist, so PAM always fails, the way RDS answers an expired or
// rejected IAM token: SQLSTATE 28000 "PAM authentication failed". Every
// other user is trusted, as pgtest sets up.
func startAuthPG() (*pgtest.Server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := pgtest.Start(ctx, pgtest.Options{})
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			_ = s.Stop()
		}
	}()
	if err := s.Exec(ctx, fmt.Sprintf(`SET password_encryption = 'scram-sha-256';
		CREATE ROLE %s LOGIN PASSWORD '%s';
		CREATE ROLE %s LOGIN;`, scramUser, scramPassword, pamUser)); err != nil {
		return nil, err
	}
	// pgtest's initdb trusts everyone; our rules go first.
	rules := fmt.Sprintf("host all %s 0.0.0.0/0 scram-sha-256\nhost all %s 0.0.0.0/0 pam pamservice=holdfast-rds-iam-test\n", scramUser, pamUser)
	if err := s.PrependHBA(ctx, rules); err != nil {
		return nil, err
	}
	if code := connectCode(ctx, s, scramUser, "wrong"); code != "28P01" {
		return nil, fmt.Errorf("connecting as %s with a wrong password gives %q, want 28P01", scramUser, code)
	}
	ok = true
	return s, nil
}

// TestRealPostgres runs the tests that need a real server, sharing one
// server configured by startAuthPG.
func TestRealPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers of its own: skipped with -short")
	}
	t.Parallel()
	if _, err := pgtest.BinDir(); err != nil {
		if os.Getenv(pgtest.EnvRequire) == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	s, err := startAuthPG()
	if err != nil {
		t.Fatalf("starting the authenticating server: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, *pgtest.Server)
	}{
		{"stale token retried once with a fresh one", testStaleTokenRetriedOnceWithFreshToken},
		{"rejected token (28000 PAM) retried once then fatal", testRejectedTokenRetriedOnceThenFatal},
		{"startup retries a stale token once", testStartupRetriesAStaleTokenOnce},
		{"one token per connection", testTokenPerConnection},
		{"credentials endpoint 503 is retried", testCredentialsEndpoint503IsRetried},
		{"credentials endpoint 403 is fatal", testCredentialsEndpoint403IsFatal},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, s) })
	}
}

// connectCode connects as user and returns the SQLSTATE of the failure, ""
// on success, or the error text when there is no SQLSTATE.
func connectCode(ctx context.Context, s *pgtest.Server, user, password string) string {
	cfg, err := pgx.ParseConfig(fmt.Sprintf("host=%s port=%d user=%s dbname=postgres sslmode=disable", s.Host, s.Port, user))
	if err != nil {
		return err.Error()
	}
	cfg.Password = password
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err == nil {
		conn.Close(ctx)
		return ""
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return err.Error()
}

// recorder wraps a password function and remembers every value it returned.
type recorder struct {
	mu     sync.Mutex
	issued []string
	calls  atomic.Int32
	next   func(ctx context.Context, call int32) (string, error)
}

func (r *recorder) Password(ctx context.Context) (string, error) {
	n := r.calls.Add(1)
	pw, err := r.next(ctx, n)
	if err == nil {
		r.mu.Lock()
		r.issued = append(r.issued, pw)
		r.mu.Unlock()
	}
	return pw, err
}

func (r *recorder) leakedIn(texts ...string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, tok := range r.issued {
		for _, s := range texts {
			if tok != "" && strings.Contains(s, tok) {
				return tok
			}
		}
	}
	return ""
}

// newPool builds a pool for user on s through a holdfast Factory with the
// password function pw, rdsiam.Rules and the default retry policies.
func newPool(t *testing.T, s *pgtest.Server, user string, pw func(context.Context) (string, error)) (*holdfast.Factory, *pgxpool.Pool, *fakes.LogBuffer) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(fmt.Sprintf("host=%s port=%d user=%s dbname=postgres sslmode=disable", s.Host, s.Port, user))
	if err != nil {
		t.Fatal(err)
	}
	logs := &fakes.LogBuffer{}
	budget, err := retry.NewBudget(retry.DefaultBudget())
	if err != nil {
		t.Fatal(err)
	}
	f, err := holdfast.New(
		holdfast.WithPasswordFunc(func(ctx context.Context, _ string) (string, error) { return pw(ctx) }),
		holdfast.WithClassifier(rdsiam.Rules()...),
		holdfast.WithRetryBudget(budget),
		holdfast.WithLogger(slog.New(slog.NewTextHandler(logs, nil))),
	)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return f, pool, logs
}

func staticCreds() aws.CredentialsProvider {
	return credentials.NewStaticCredentialsProvider("AKIDHOLDFASTTEST", "holdfast-test-secret-key", "")
}

// testStaleTokenRetriedOnceWithFreshToken: the first token is rejected by
// the real server (28P01: the role authenticates with a password, and the
// first call returns a real RDS IAM token instead); holdfast retries once
// with a fresh password, which the server accepts.
func testStaleTokenRetriedOnceWithFreshToken(t *testing.T, s *pgtest.Server) {
	t.Parallel()
	mint, err := rdsiam.PasswordFunc(rdsiam.Config{Endpoint: s.Addr(), Region: "eu-west-1", User: scramUser, Credentials: staticCreds()})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{next: func(ctx context.Context, call int32) (string, error) {
		if call == 1 {
			return mint(ctx) // stale: the server does not accept it
		}
		return scramPassword, nil
	}}
	f, pool, logs := newPool(t, s, scramUser, rec.Password)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	c, err := f.Acquire(ctx, pool)
	if err != nil {
		t.Fatalf("Acquire = %v, want success with the fresh password", err)
	}
	var who string
	if err := c.QueryRow(ctx, "SELECT current_user").Scan(&who); err != nil || who != scramUser {
		t.Errorf("current_user = %q, %v", who, err)
	}
	c.Release()
	t.Logf("MEASURED %s: %v", t.Name(), time.Since(start).Round(time.Millisecond))
	if got := rec.calls.Load(); got != 2 {
		t.Errorf("password func calls = %d, want 2 (the rejected token, then a fresh one)", got)
	}
	if !strings.Contains(logs.String(), "error.reason=auth-failed-fresh-token") {
		t.Errorf("holdfast did not log the auth retry:\n%s", logs)
	}
	if tok := rec.leakedIn(logs.String()); tok != "" {
		t.Errorf("a password appears in the logs")
	}
}

// testRejectedTokenRetriedOnceThenFatal: the server rejects every token the
// way RDS rejects an expired or unauthorised IAM token, SQLSTATE 28000
// "PAM authentication failed"; holdfast mints one fresh token, then gives
// up with a Fatal verdict. No token appears in the error or the logs.
func testRejectedTokenRetriedOnceThenFatal(t *testing.T, s *pgtest.Server) {
	t.Parallel()
	mint, err := rdsiam.PasswordFunc(rdsiam.Config{Endpoint: s.Addr(), Region: "eu-west-1", User: pamUser, Credentials: staticCreds()})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{next: func(ctx context.Context, _ int32) (string, error) { return mint(ctx) }}
	f, pool, logs := newPool(t, s, pamUser, rec.Password)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	_, err = f.Acquire(ctx, pool)
	t.Logf("MEASURED %s: %v", t.Name(), time.Since(start).Round(time.Millisecond))
	if err == nil {
		t.Fatal("Acquire succeeded")
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "28000" || !strings.Contains(pe.Message, "PAM authentication failed") {
		t.Fatalf("err = %v; want SQLSTATE 28000 PAM authentication failed", err)
	}
	if v := f.Classify(err); v != (classify.Verdict{Class: classify.Fatal, Reason: "sqlstate-28000"}) {
		t.Errorf("verdict = %v, want fatal/sqlstate-28000", v)
	}
	var re *retry.Error
	if !errors.As(err, &re) || re.Attempts != 2 || re.Stop != retry.StopFatal {
		t.Errorf("retry error = %+v; want 2 attempts (one fresh token), then fatal", re)
	}
	if got := rec.calls.Load(); got != 2 {
		t.Errorf("password func calls = %d, want 2", got)
	}
	if tok := rec.leakedIn(err.Error(), logs.String()); tok != "" {
		t.Errorf("a token appears in the error or the logs")
	}
	if strings.Contains(err.Error(), "X-Amz-Signature") || strings.Contains(logs.String(), "X-Amz-Signature") {
		t.Errorf("token material in the error or logs")
	}
}

// testStartupRetriesAStaleTokenOnce: NewPool's first connection gets the
// same single fresh-token retry.
func testStartupRetriesAStaleTokenOnce(t *testing.T, s *pgtest.Server) {
	t.Parallel()
	rec := &recorder{next: func(_ context.Context, call int32) (string, error) {
		if call == 1 {
			return "expired-token", nil
		}
		return scramPassword, nil
	}}
	f, pool, _ := newPool(t, s, scramUser, rec.Password)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := f.Start(ctx, pool); err != nil {
		t.Fatalf("Start = %v", err)
	}
	if got := rec.calls.Load(); got != 2 {
		t.Errorf("password func calls = %d, want 2", got)
	}
}

// testTokenPerConnection: every new connection mints its own token (the
// credentials are retrieved once per connection).
func testTokenPerConnection(t *testing.T, s *pgtest.Server) {
	t.Parallel()
	var retrieved atomic.Int32
	creds := aws.CredentialsProviderFunc(func(ctx context.Context) (aws.Credentials, error) {
		retrieved.Add(1)
		return staticCreds().Retrieve(ctx)
	})
	mint, err := rdsiam.PasswordFunc(rdsiam.Config{Endpoint: s.Addr(), Region: "eu-west-1", User: "postgres", Credentials: creds})
	if err != nil {
		t.Fatal(err)
	}
	_, pool, _ := newPool(t, s, "postgres", mint) // postgres is trusted: any token connects
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var conns []*pgxpool.Conn
	for i := 0; i < 3; i++ {
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}
	if got := retrieved.Load(); got != 3 {
		t.Errorf("credentials retrieved %d times for 3 connections, want 3", got)
	}
}

// testCredentialsEndpoint503IsRetried: the container credentials endpoint
// (the AWS SDK's endpointcreds provider, as on ECS or EKS Pod Identity)
// answers 503 once. rdsiam.Rules makes the password fetch Transient and
// holdfast retries it; the connection is made.
func testCredentialsEndpoint503IsRetried(t *testing.T, s *pgtest.Server) {
	t.Parallel()
	creds, hits := credentialsEndpoint(t, 503, 1)
	mint, err := rdsiam.PasswordFunc(rdsiam.Config{Endpoint: s.Addr(), Region: "eu-west-1", User: "postgres", Credentials: creds})
	if err != nil {
		t.Fatal(err)
	}
	_, pool, logs := newPool(t, s, "postgres", mint)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	if err := pool.Ping(ctx); err != nil {
		t.Fatalf("Ping = %v", err)
	}
	t.Logf("MEASURED %s: %v", t.Name(), time.Since(start).Round(time.Millisecond))
	if got := hits.Load(); got != 2 {
		t.Errorf("credentials endpoint hits = %d, want 2", got)
	}
	if !strings.Contains(logs.String(), "holdfast.layer=password") || !strings.Contains(logs.String(), "error.reason=aws-credentials-503") {
		t.Errorf("holdfast did not log a retried aws-credentials-503 password fetch:\n%s", logs)
	}
}

// testCredentialsEndpoint403IsFatal: a 403 from the credentials endpoint is
// not retried.
func testCredentialsEndpoint403IsFatal(t *testing.T, s *pgtest.Server) {
	t.Parallel()
	creds, hits := credentialsEndpoint(t, 403, -1)
	mint, err := rdsiam.PasswordFunc(rdsiam.Config{Endpoint: s.Addr(), Region: "eu-west-1", User: "postgres", Credentials: creds})
	if err != nil {
		t.Fatal(err)
	}
	f, pool, _ := newPool(t, s, "postgres", mint)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = f.Acquire(ctx, pool)
	if err == nil {
		t.Fatal("Acquire succeeded")
	}
	if v := f.Classify(err); v != (classify.Verdict{Class: classify.Fatal, Reason: rdsiam.ReasonCredentialsDenied}) {
		t.Errorf("verdict = %v, want fatal/%s", v, rdsiam.ReasonCredentialsDenied)
	}
	var te *rdsiam.TokenError
	if !errors.As(err, &te) || te.User != "postgres" {
		t.Errorf("err = %v, want a *rdsiam.TokenError", err)
	}
	if got := hits.Load(); got != 1 {
		t.Errorf("credentials endpoint hits = %d, want 1", got)
	}
}

// credentialsEndpoint serves AWS container credentials on loopback, failing
// the first n requests with status (n < 0: all). The provider is the AWS
// SDK's own endpointcreds provider, without its SDK-level retries so that
// the count is exact.
func credentialsEndpoint(t *testing.T, status, n int) (aws.CredentialsProvider, *atomic.Int32) {
	t.Helper()
	hits := &atomic.Int32{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := int(hits.Add(1))
		if n < 0 || h <= n {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			fmt.Fprintf(w, `{"code":"Unavailable","message":"status %d"}`, status)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"AccessKeyId":"AKIDENDPOINT","SecretAccessKey":"endpoint-secret","Token":"session","Expiration":%q}`,
			time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	}))
	t.Cleanup(srv.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	p := endpointcreds.New(srv.URL, func(o *endpointcreds.Options) {
		o.Retryer = aws.NopRetryer{}
		o.HTTPClient = &http.Client{Transport: tr}
	})
	return p, hits
}
