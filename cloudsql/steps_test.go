package cloudsql_test

// The core retry cases (a transient failure absorbed, a permission error
// tried once), played with Cloud SQL's failures through a pool that holdfast
// configures, with the connector's failures scripted by fakes/cloudsqltest's
// steps instead of the real dialer (e2e_test.go plays them through the real
// dialer). The factory classifies them with this package's rules, as With
// installs them. The core's own tests play vendor-neutral failures.

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/api/googleapi"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/cloudsql"
	"github.com/holdfast-db/holdfast/fakes"
	fake "github.com/holdfast-db/holdfast/fakes/cloudsqltest"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/retry"
)

// scriptedPool returns a pool of the package's PostgreSQL server whose dials
// play steps, configured by a factory with fast retries (3 attempts), a
// private budget, this package's classification and opts.
func scriptedPool(t *testing.T, steps []fakes.Step, opts ...holdfast.Option) (*holdfast.Factory, *pgxpool.Pool, *fakes.Connector) {
	t.Helper()
	dsn, sep := pgtest.DSN(t), "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	cfg, err := pgxpool.ParseConfig(dsn + sep + "sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	conn := fakes.NewConnector(net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))), steps...)
	cfg.ConnConfig.DialFunc = conn.Dial
	budget, err := retry.NewBudget(retry.DefaultBudget())
	if err != nil {
		t.Fatal(err)
	}
	p := retry.Default()
	p.InitialInterval, p.MaxInterval = time.Millisecond, 5*time.Millisecond
	f, err := holdfast.New(append([]holdfast.Option{
		holdfast.WithRetryPolicy(p), holdfast.WithRetryBudget(budget),
		holdfast.WithIntegration(holdfast.Integration{Name: "cloudsql-errors", Rules: cloudsql.Rules(), TypeRules: cloudsql.TypeRules()}),
	}, opts...)...)
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
	return f, pool, conn
}

// A token-fetch 503 on the first attempt, success on the
// second: one connection, two dial attempts.
func TestScriptedTokenFetch503AtDialIsAbsorbed(t *testing.T) {
	t.Parallel()
	_, pool, conn := scriptedPool(t, []fakes.Step{fake.TokenFetch503(), fakes.Connect()})
	if err := pool.Ping(context.Background()); err != nil {
		t.Fatalf("Ping = %v, want success after one retried 503", err)
	}
	if got := pool.Stat().NewConnsCount(); got != 1 {
		t.Errorf("NewConnsCount = %d, want 1", got)
	}
	if got := conn.Attempts(); got != 2 {
		t.Errorf("dial attempts = %d, want 2", got)
	}
}

// The same, when the 503 comes from the IAM token func.
func TestScriptedTokenFetch503FromPasswordFuncIsAbsorbed(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the Cloud SQL connector's own Admin API retry (seconds): skipped with -short")
	}
	t.Parallel()
	src := fakes.NewPasswordSource("iam-token", fake.TokenFetch503(), fakes.Connect())
	_, pool, conn := scriptedPool(t, nil, holdfast.WithPasswordFunc(src.Password))
	if err := pool.Ping(context.Background()); err != nil {
		t.Fatalf("Ping = %v", err)
	}
	if got := pool.Stat().NewConnsCount(); got != 1 {
		t.Errorf("NewConnsCount = %d, want 1", got)
	}
	if src.Attempts() != 2 || conn.Attempts() != 1 {
		t.Errorf("token fetches = %d (want 2), dials = %d (want 1)", src.Attempts(), conn.Attempts())
	}
}

// The Admin API's 403 is tried exactly once and fails
// at once, unwrapping to its cause.
func TestScriptedForbiddenIsNotRetried(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the Cloud SQL connector's own Admin API retry (seconds): skipped with -short")
	}
	t.Parallel()
	f, pool, conn := scriptedPool(t, []fakes.Step{fake.Forbidden().Forever()})
	c, err := f.Acquire(context.Background(), pool)
	if err == nil {
		c.Release()
		t.Fatal("Acquire succeeded through a 403")
	}
	var gerr *googleapi.Error
	if !errors.As(err, &gerr) || gerr.Code != 403 {
		t.Errorf("err = %v, want it to unwrap to *googleapi.Error 403", err)
	}
	want := classify.Verdict{Class: classify.Fatal, Reason: classify.ReasonPermissionDenied}
	if !errors.Is(err, retry.ErrNotRetryable) || f.Classify(err) != want {
		t.Errorf("err = %v (%v), want not retryable and %v", err, f.Classify(err), want)
	}
	if conn.Attempts() != 1 {
		t.Errorf("dial attempts = %d, want 1", conn.Attempts())
	}
}
