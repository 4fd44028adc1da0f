package holdfast_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/fakes"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/internal/cfgerr"
	"github.com/holdfast-db/holdfast/retry"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// fastPolicy retries quickly so that tests stay fast; 3 attempts in all.
func fastPolicy() retry.Policy {
	p := retry.Default()
	p.InitialInterval = time.Millisecond
	p.MaxInterval = 5 * time.Millisecond
	return p
}

// poolConfig parses dsn (with extra settings appended) and returns the config
// and the server's real address.
func poolConfig(t *testing.T, dsn string, extra ...string) (*pgxpool.Config, string) {
	t.Helper()
	for _, e := range extra {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		dsn += sep + e
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port)))
}

// resetErr is a dial or token fetch whose connection the peer reset, as
// net reports it: Transient "conn-reset" for the core's classifier. (Package
// cloudsql's tests play the Cloud SQL connector's own failures, such as a
// token endpoint answering 503.)
func resetErr() error {
	return &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
}

// deniedErr is a permission failure: Fatal "sqlstate-42501", as a server
// answers a role without the CONNECT privilege.
func deniedErr() error {
	return &pgconn.PgError{Severity: "FATAL", Code: "42501", Message: `permission denied for database "postgres"`}
}

// newFactory builds a factory with a private budget (so tests do not share
// the process budget) and fast retries.
func newFactory(t *testing.T, opts ...holdfast.Option) *holdfast.Factory {
	t.Helper()
	b, err := retry.NewBudget(retry.DefaultBudget())
	if err != nil {
		t.Fatal(err)
	}
	startup := fastPolicy()
	startup.MaxAttempts = 2
	base := []holdfast.Option{holdfast.WithRetryPolicy(fastPolicy()), holdfast.WithStartupPolicy(startup), holdfast.WithRetryBudget(b)}
	f, err := holdfast.New(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close) // after the test's pools (cleanups run last first): its probers and monitors end with it
	return f
}

func newPool(t *testing.T, f *holdfast.Factory, cfg *pgxpool.Config, opts ...holdfast.PoolOption) *pgxpool.Pool {
	t.Helper()
	if err := f.Configure(cfg, opts...); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// A transient failure on the first attempt, success on the second: one
// connection, two dial attempts. (cloudsql's tests play the same case with
// the Cloud SQL token-fetch 503.)
func TestTransientDialFailureIsAbsorbed(t *testing.T) {
	t.Parallel()
	cfg, addr := poolConfig(t, pgtest.DSN(t), "sslmode=disable")
	conn := fakes.NewConnector(addr, fakes.Fail(resetErr()), fakes.Connect())
	cfg.ConnConfig.DialFunc = conn.Dial
	pool := newPool(t, newFactory(t), cfg)

	if err := pool.Ping(context.Background()); err != nil {
		t.Fatalf("Ping = %v, want success after one retried reset", err)
	}
	if got := pool.Stat().NewConnsCount(); got != 1 {
		t.Errorf("NewConnsCount = %d, want 1", got)
	}
	if got := conn.Attempts(); got != 2 {
		t.Errorf("dial attempts = %d, want 2", got)
	}
}

// The same, when the failure comes from the password func.
func TestTransientPasswordFailureIsAbsorbed(t *testing.T) {
	t.Parallel()
	cfg, addr := poolConfig(t, pgtest.DSN(t), "sslmode=disable")
	conn := fakes.NewConnector(addr)
	cfg.ConnConfig.DialFunc = conn.Dial
	src := fakes.NewPasswordSource("iam-token", fakes.Fail(resetErr()), fakes.Connect())
	pool := newPool(t, newFactory(t, holdfast.WithPasswordFunc(src.Password)), cfg)

	if err := pool.Ping(context.Background()); err != nil {
		t.Fatalf("Ping = %v", err)
	}
	if got := pool.Stat().NewConnsCount(); got != 1 {
		t.Errorf("NewConnsCount = %d, want 1", got)
	}
	if src.Attempts() != 2 || conn.Attempts() != 1 {
		t.Errorf("password fetches = %d (want 2), dials = %d (want 1)", src.Attempts(), conn.Attempts())
	}
}

// A permission error is tried exactly once and fails at
// once, unwrapping to its cause.
func TestPermissionErrorsAreNotRetried(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	t.Run("permission denied at dial", func(t *testing.T) {
		t.Parallel()
		cfg, addr := poolConfig(t, dsn, "sslmode=disable")
		conn := fakes.NewConnector(addr, fakes.Fail(deniedErr()).Forever())
		cfg.ConnConfig.DialFunc = conn.Dial
		f := newFactory(t)
		pool := newPool(t, f, cfg)
		c, err := f.Acquire(context.Background(), pool)
		if err == nil {
			c.Release()
			t.Fatal("Acquire succeeded through a permission failure")
		}
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "42501" {
			t.Errorf("err = %v, want it to unwrap to the *pgconn.PgError 42501", err)
		}
		if !errors.Is(err, retry.ErrNotRetryable) || f.Classify(err).Class != classify.Fatal {
			t.Errorf("err = %v, want not retryable and Fatal", err)
		}
		if conn.Attempts() != 1 {
			t.Errorf("dial attempts = %d, want 1", conn.Attempts())
		}
	})
	t.Run("SQLSTATE 28000 role does not exist", func(t *testing.T) {
		t.Parallel()
		cfg, addr := poolConfig(t, dsn, "sslmode=disable", "user=no_such_role")
		conn := fakes.NewConnector(addr)
		cfg.ConnConfig.DialFunc = conn.Dial
		f := newFactory(t)
		pool := newPool(t, f, cfg)
		_, err := f.Acquire(context.Background(), pool)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "28000" {
			t.Fatalf("err = %v, want SQLSTATE 28000", err)
		}
		if !errors.Is(err, retry.ErrNotRetryable) {
			t.Errorf("err = %v, want retry.ErrNotRetryable", err)
		}
		if conn.Attempts() != 1 || pool.Stat().NewConnsCount() != 1 {
			t.Errorf("dials = %d, connects = %d; want 1 and 1", conn.Attempts(), pool.Stat().NewConnsCount())
		}
	})
	t.Run("SQLSTATE 28000 with an IAM token func gets one fresh token", func(t *testing.T) {
		t.Parallel()
		cfg, addr := poolConfig(t, dsn, "sslmode=disable", "user=no_such_role")
		conn := fakes.NewConnector(addr)
		cfg.ConnConfig.DialFunc = conn.Dial
		src := fakes.NewPasswordSource("iam-token")
		f := newFactory(t, holdfast.WithPasswordFunc(src.Password))
		pool := newPool(t, f, cfg)
		_, err := f.Acquire(context.Background(), pool)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "28000" || !errors.Is(err, retry.ErrNotRetryable) {
			t.Fatalf("err = %v, want SQLSTATE 28000 after one retry", err)
		}
		if src.Attempts() != 2 || conn.Attempts() != 2 {
			t.Errorf("token fetches = %d, dials = %d; want 2 and 2", src.Attempts(), conn.Attempts())
		}
	})
}

// queryCounter counts statements that pgx sends.
type queryCounter struct{ n atomic.Int64 }

func (q *queryCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	q.n.Add(1)
	return ctx
}
func (q *queryCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// A bad query is never retried.
func TestBadQueryIsNotRetried(t *testing.T) {
	t.Parallel()
	cfg, _ := poolConfig(t, pgtest.DSN(t), "sslmode=disable")
	qc := &queryCounter{}
	cfg.ConnConfig.Tracer = qc
	f := newFactory(t)
	pool := newPool(t, f, cfg)
	c, err := f.Acquire(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	_, err = c.Exec(context.Background(), "SELEC 1")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "42601" {
		t.Fatalf("err = %v, want a syntax error", err)
	}
	if v := f.Classify(err); v.Class != classify.Fatal {
		t.Errorf("verdict = %+v, want Fatal", v)
	}
	if got := qc.n.Load(); got != 1 {
		t.Errorf("statements sent = %d, want 1", got)
	}
}

// signalHandler is a slog handler that reports each record on a channel.
type signalHandler struct{ ch chan slog.Record }

func (h signalHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h signalHandler) Handle(_ context.Context, r slog.Record) error {
	select {
	case h.ch <- r:
	default:
	}
	return nil
}
func (h signalHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h signalHandler) WithGroup(string) slog.Handler      { return h }

// Cancelling the context stops a retry loop at once.
func TestCancelStopsRetryLoop(t *testing.T) {
	t.Parallel()
	cfg, addr := poolConfig(t, pgtest.DSN(t), "sslmode=disable")
	conn := fakes.NewConnector(addr, fakes.Refused().Forever())
	cfg.ConnConfig.DialFunc = conn.Dial
	retried := make(chan slog.Record, 1)
	p := retry.Default()
	// A long sleep, yet shorter than pgxpool's 2-minute connect timeout, so
	// that the loop does sleep (it never starts a sleep it cannot finish).
	p.InitialInterval, p.MaxInterval, p.Jitter, p.MaxElapsed = time.Minute, time.Minute, 0, 0
	f, err := holdfast.New(holdfast.WithRetryPolicy(p), holdfast.WithRetryBudget(nil),
		holdfast.WithLogger(slog.New(signalHandler{retried})))
	if err != nil {
		t.Fatal(err)
	}
	pool := newPool(t, f, cfg)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := f.Acquire(ctx, pool)
		done <- err
	}()
	select {
	case <-retried: // the dial failed and the loop is about to sleep for a minute
	case err := <-done:
		t.Fatalf("Acquire returned before any retry: %v", err)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Acquire = %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Acquire did not return after its context was canceled")
	}
	if conn.Attempts() != 1 {
		t.Errorf("dial attempts = %d, want 1", conn.Attempts())
	}
	// The connect goroutine belongs to the pool; Close stops its loop too
	// (TestMain's leak check fails otherwise).
	pool.Close()
}

// During an outage (every dial reset), 200 concurrent
// Acquires make at most their first attempts plus what the retry budget
// allows.
func TestRetryBudgetCapsAnOutage(t *testing.T) {
	t.Parallel()
	cfg, addr := poolConfig(t, pgtest.DSN(t), "sslmode=disable")
	cfg.MaxConns = 200
	conn := fakes.NewConnector(addr, fakes.Fail(resetErr()).Forever())
	cfg.ConnConfig.DialFunc = conn.Dial
	budget, err := retry.NewBudget(retry.BudgetConfig{Capacity: 50, RetryCost: 1})
	if err != nil {
		t.Fatal(err)
	}
	f, err := holdfast.New(holdfast.WithRetryPolicy(fastPolicy()), holdfast.WithRetryBudget(budget))
	if err != nil {
		t.Fatal(err)
	}
	pool := newPool(t, f, cfg)

	var wg sync.WaitGroup
	var failed, budgetStops atomic.Int64
	for range 200 {
		wg.Go(func() {
			c, err := f.Acquire(context.Background(), pool)
			if err == nil {
				c.Release()
				return
			}
			failed.Add(1)
			if errors.Is(err, retry.ErrBudgetExhausted) {
				budgetStops.Add(1)
			}
		})
	}
	wg.Wait()
	if failed.Load() != 200 {
		t.Errorf("failed Acquires = %d, want 200", failed.Load())
	}
	// Without a budget: 200 × 3 = 600 dials. With it: 200 first attempts + 50 retries.
	if got := conn.Attempts(); got != 250 {
		t.Errorf("dial attempts = %d, want 250", got)
	}
	if budget.Retries() != 50 || budgetStops.Load() < 150 {
		t.Errorf("budget retries = %d (want 50), budget stops = %d (want >= 150)", budget.Retries(), budgetStops.Load())
	}
}

// With sslmode=prefer pgx dials twice per connection; the factory's attempt
// allowance is per connection, so a dead target costs MaxAttempts dials, not
// twice as many.
func TestPreferCountsAttemptsPerConnection(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	t.Run("failing", func(t *testing.T) {
		t.Parallel()
		cfg, addr := poolConfig(t, dsn, "sslmode=prefer")
		conn := fakes.NewConnector(addr, fakes.Refused().Forever())
		cfg.ConnConfig.DialFunc = conn.Dial
		f := newFactory(t)
		pool := newPool(t, f, cfg)
		if _, err := f.Acquire(context.Background(), pool); err == nil {
			t.Fatal("Acquire succeeded through refused dials")
		}
		if conn.Attempts() != 3 {
			t.Errorf("dial attempts = %d, want 3 (MaxAttempts, shared by both sslmode=prefer dials)", conn.Attempts())
		}
	})
	t.Run("succeeding", func(t *testing.T) {
		t.Parallel()
		// The test server has no TLS: pgx dials for TLS, is refused, and
		// dials again in plain text. Both dials must be allowed.
		cfg, addr := poolConfig(t, dsn, "sslmode=prefer")
		conn := fakes.NewConnector(addr, fakes.Refused())
		cfg.ConnConfig.DialFunc = conn.Dial
		pool := newPool(t, newFactory(t), cfg)
		if err := pool.Ping(context.Background()); err != nil {
			t.Fatal(err)
		}
		if conn.Attempts() != 3 || pool.Stat().NewConnsCount() != 1 {
			t.Errorf("dials = %d (want refused + TLS + plain = 3), connects = %d", conn.Attempts(), pool.Stat().NewConnsCount())
		}
	})
}

// A server error of the startup handshake (SQLSTATE 53300, too many
// connections for a role) arrives after the dial; the connect retries it,
// safely, since no statement was sent (connect.go), so Factory.Acquire
// gets a working connection.
func TestAcquireRetriesStartupServerErrors(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	admin := refusedRole(t, dsn, "limited_role")

	cfg, addr := poolConfig(t, dsn, "sslmode=disable", "user=limited_role")
	conn := fakes.NewConnector(addr)
	cfg.ConnConfig.DialFunc = conn.Dial
	var logs bytes.Buffer
	var mu sync.Mutex
	raised := false
	h := hookHandler{fn: func(r slog.Record) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintln(&logs, r.Message, attrs(r))
		if !raised { // the database recovers while the loop backs off
			raised = true
			mustExec(t, admin, "ALTER ROLE limited_role CONNECTION LIMIT -1")
		}
	}}
	f := newFactory(t, holdfast.WithLogger(slog.New(h)))
	pool := newPool(t, f, cfg)
	c, err := f.Acquire(context.Background(), pool)
	if err != nil {
		t.Fatalf("Acquire = %v, want success after the role's limit was raised", err)
	}
	c.Release()
	if conn.Attempts() != 2 {
		t.Errorf("dials = %d, want 2", conn.Attempts())
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logs.String(), "holdfast.layer=connect") || !strings.Contains(logs.String(), "error.reason=sqlstate-53300") {
		t.Errorf("logs = %q, want one connect-layer retry for sqlstate-53300 (inside the connect)", logs.String())
	}
}

// refusedRole creates role, whose connections the server refuses (53300:
// CONNECTION LIMIT 0), on dsn's server, and drops it when the test ends.
// It returns the admin connection that made it, to lift the limit with.
func refusedRole(t *testing.T, dsn, role string) *pgx.Conn {
	t.Helper()
	admin, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	mustExec(t, admin, "CREATE ROLE "+role+" LOGIN CONNECTION LIMIT 0")
	t.Cleanup(func() { mustExec(t, admin, "DROP ROLE "+role) })
	return admin
}

func mustExec(t *testing.T, c *pgx.Conn, sql string) {
	t.Helper()
	if _, err := c.Exec(context.Background(), sql); err != nil {
		t.Errorf("%s: %v", sql, err)
	}
}

type hookHandler struct{ fn func(slog.Record) }

func (h hookHandler) Enabled(context.Context, slog.Level) bool      { return true }
func (h hookHandler) Handle(_ context.Context, r slog.Record) error { h.fn(r); return nil }
func (h hookHandler) WithAttrs([]slog.Attr) slog.Handler            { return h }
func (h hookHandler) WithGroup(string) slog.Handler                 { return h }

func attrs(r slog.Record) string {
	var b strings.Builder
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, "%s=%v ", a.Key, a.Value)
		return true
	})
	return b.String()
}

func TestNewPool(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	t.Run("first connection retried at startup", func(t *testing.T) {
		t.Parallel()
		cfg, addr := poolConfig(t, dsn, "sslmode=disable")
		// 3 refusals exhaust the first connect's dial retries; the startup
		// policy tries a second connect, which succeeds after one more.
		conn := fakes.NewConnector(addr, fakes.Refused().Times(4))
		cfg.ConnConfig.DialFunc = conn.Dial
		pool, err := newFactory(t).NewPool(context.Background(), cfg)
		if err != nil {
			t.Fatalf("NewPool = %v", err)
		}
		defer pool.Close()
		if conn.Attempts() != 5 || pool.Stat().TotalConns() != 1 {
			t.Errorf("dials = %d (want 5), conns = %d (want 1)", conn.Attempts(), pool.Stat().TotalConns())
		}
	})
	t.Run("fatal cause fails at once", func(t *testing.T) {
		t.Parallel()
		cfg, addr := poolConfig(t, dsn, "sslmode=disable")
		conn := fakes.NewConnector(addr, fakes.Fail(deniedErr()).Forever())
		cfg.ConnConfig.DialFunc = conn.Dial
		f := newFactory(t)
		pool, err := f.NewPool(context.Background(), cfg)
		var ce *holdfast.ConnectError
		if !errors.As(err, &ce) || pool != nil || ce.Layer != "startup" {
			t.Fatalf("NewPool = %v, %v; want a *ConnectError of layer startup", pool, err)
		}
		if v := f.Classify(err); v.Class != classify.Fatal || conn.Attempts() != 1 {
			t.Errorf("verdict = %+v, dials = %d; want Fatal after 1 dial", v, conn.Attempts())
		}
	})
	t.Run("transient cause is bounded", func(t *testing.T) {
		t.Parallel()
		cfg, addr := poolConfig(t, dsn, "sslmode=disable")
		conn := fakes.NewConnector(addr, fakes.Refused().Forever())
		cfg.ConnConfig.DialFunc = conn.Dial
		f := newFactory(t)
		pool, err := f.NewPool(context.Background(), cfg)
		var ce *holdfast.ConnectError
		if !errors.As(err, &ce) || pool != nil || ce.Layer != "startup" {
			t.Fatalf("NewPool = %v, %v; want a *ConnectError of layer startup", pool, err)
		}
		if v := f.Classify(err); v.Class != classify.Transient || v.Reason != "conn-refused" {
			t.Errorf("verdict = %+v, want Transient conn-refused", v)
		}
		// 2 startup attempts × 3 dials each.
		if conn.Attempts() != 6 {
			t.Errorf("dials = %d, want 6", conn.Attempts())
		}
	})
}

// NewPoolFromDSN is NewPool from a connection string: the pool is built,
// named by its pool options and connected; a connection string that does
// not parse is a *ConfigError that wraps pgx's *pgconn.ParseConfigError
// and does not print the password.
func TestNewPoolFromDSN(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFactory(t)
	pool, err := f.NewPoolFromDSN(ctx, pgtest.DSN(t)+"&sslmode=disable&pool_max_conns=3", holdfast.PoolName("orders"))
	if err != nil {
		t.Fatalf("NewPoolFromDSN = %v", err)
	}
	defer f.ClosePool(pool)
	if got := pool.Stat().TotalConns(); got != 1 {
		t.Errorf("connections after NewPoolFromDSN: %d, want 1 (the first one, made under the startup policy)", got)
	}
	if got := pool.Config().MaxConns; got != 3 {
		t.Errorf("MaxConns = %d, want 3 (pool_max_conns of the DSN)", got)
	}
	var one int
	if err := pool.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Errorf("SELECT 1 = %d, %v", one, err)
	}

	for _, dsn := range []string{
		"postgres://app:s3cret-pw@db.example:notaport/orders",
		"host=db.example password=s3cret-pw port=notaport",
	} {
		pool, err := f.NewPoolFromDSN(ctx, dsn)
		var ce *holdfast.ConfigError
		var pe *pgconn.ParseConfigError
		switch {
		case pool != nil || !errors.As(err, &ce) || ce.Field != "dsn":
			t.Errorf("NewPoolFromDSN(%q) = %v, %v; want a *ConfigError of Field dsn", dsn, pool, err)
		case !errors.As(err, &pe):
			t.Errorf("NewPoolFromDSN(%q) = %v; want it to wrap a *pgconn.ParseConfigError", dsn, err)
		case strings.Contains(err.Error(), "s3cret-pw"):
			t.Errorf("NewPoolFromDSN(%q) = %q: the password is in the text", dsn, err)
		}
	}
	var nilFactory *holdfast.Factory
	if _, err := nilFactory.NewPoolFromDSN(ctx, pgtest.DSN(t)); !errors.Is(err, cfgerr.ErrInvalid) {
		t.Errorf("a nil factory: %v, want a *ConfigError", err)
	}
}

func TestConfigureChainsUserHooks(t *testing.T) {
	t.Parallel()
	cfg, addr := poolConfig(t, pgtest.DSN(t), "sslmode=disable")
	conn := fakes.NewConnector(addr)
	cfg.ConnConfig.DialFunc = conn.Dial
	var userCalls atomic.Int64
	var sawPassword atomic.Bool
	cfg.BeforeConnect = func(_ context.Context, cc *pgx.ConnConfig) error {
		userCalls.Add(1)
		sawPassword.Store(cc.Password == "fresh-token")
		return nil
	}
	src := fakes.NewPasswordSource("fresh-token")
	pool := newPool(t, newFactory(t, holdfast.WithPasswordFunc(src.Password)), cfg)
	if err := pool.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	if userCalls.Load() != 1 || !sawPassword.Load() || conn.Attempts() != 1 {
		t.Errorf("user BeforeConnect calls = %d, saw fresh password = %v, dials = %d",
			userCalls.Load(), sawPassword.Load(), conn.Attempts())
	}

	// The user's hook error reaches the caller.
	cfg2, _ := poolConfig(t, pgtest.DSN(t), "sslmode=disable")
	errUser := errors.New("user hook says no")
	cfg2.BeforeConnect = func(context.Context, *pgx.ConnConfig) error { return errUser }
	pool2 := newPool(t, newFactory(t), cfg2)
	if err := pool2.Ping(context.Background()); !errors.Is(err, errUser) {
		t.Errorf("Ping = %v, want the user's hook error", err)
	}
}

func TestBadConfiguration(t *testing.T) {
	t.Parallel()
	okPolicy := retry.Default()
	badPolicy := retry.Default()
	badPolicy.MaxAttempts = -1
	zeroInterval := retry.Default()
	zeroInterval.InitialInterval = 0
	tests := []struct {
		name string
		opts []holdfast.Option
	}{
		{"nil option", []holdfast.Option{nil}},
		{"negative attempts", []holdfast.Option{holdfast.WithRetryPolicy(badPolicy)}},
		{"zero interval", []holdfast.Option{holdfast.WithRetryPolicy(zeroInterval)}},
		{"bad startup policy", []holdfast.Option{holdfast.WithRetryPolicy(okPolicy), holdfast.WithStartupPolicy(badPolicy)}},
		{"nil password func", []holdfast.Option{holdfast.WithPasswordFunc(nil)}},
		{"two password funcs", []holdfast.Option{holdfast.WithPasswordFunc(func(context.Context, string) (string, error) { return "", nil }),
			holdfast.WithPasswordFunc(func(context.Context, string) (string, error) { return "", nil })}},
		{"an integration's password func and the option's", []holdfast.Option{holdfast.WithIntegration(holdfast.Integration{
			Password: func(context.Context, string) (string, error) { return "", nil }}),
			holdfast.WithPasswordFunc(func(context.Context, string) (string, error) { return "", nil })}},
		{"nil logger", []holdfast.Option{holdfast.WithLogger(nil)}},
		{"nil rule", []holdfast.Option{holdfast.WithClassifier(nil)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := holdfast.New(tt.opts...)
			if f != nil || !errors.Is(err, errInvalidConfig) || !strings.HasPrefix(err.Error(), "holdfast: ") {
				t.Fatalf("New = %v, %v; want a holdfast ConfigError", f, err)
			}
		})
	}
	f, err := holdfast.New()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Configure(nil); !errors.Is(err, errInvalidConfig) {
		t.Errorf("Configure(nil) = %v", err)
	}
	if err := f.Configure(&pgxpool.Config{}); !errors.Is(err, errInvalidConfig) {
		t.Errorf("Configure(zero config) = %v", err)
	}
	var nilF *holdfast.Factory
	if err := nilF.Configure(&pgxpool.Config{}); !errors.Is(err, errInvalidConfig) {
		t.Errorf("nil Factory Configure = %v", err)
	}
	if _, err := f.Acquire(context.Background(), nil); !errors.Is(err, errInvalidConfig) {
		t.Errorf("Acquire(nil pool) = %v", err)
	}
	if _, err := f.NewPool(context.Background(), nil); !errors.Is(err, errInvalidConfig) {
		t.Errorf("NewPool(nil) = %v", err)
	}
	if err := f.Start(context.Background(), nil); !errors.Is(err, errInvalidConfig) {
		t.Errorf("Start(nil pool) = %v", err)
	}
}

func TestUserClassifierRulesComeFirst(t *testing.T) {
	t.Parallel()
	cfg, addr := poolConfig(t, pgtest.DSN(t), "sslmode=disable")
	errSDK := errors.New("other SDK: throttled")
	conn := fakes.NewConnector(addr, fakes.Fail(errSDK), fakes.Connect())
	cfg.ConnConfig.DialFunc = conn.Dial
	rule := func(err error) (classify.Verdict, bool) {
		if errors.Is(err, errSDK) {
			return classify.Verdict{Class: classify.Transient, Reason: "sdk-throttled"}, true
		}
		return classify.Verdict{}, false
	}
	pool := newPool(t, newFactory(t, holdfast.WithClassifier(rule)), cfg)
	if err := pool.Ping(context.Background()); err != nil {
		t.Fatalf("Ping = %v, want the user rule to make the SDK error retryable", err)
	}
	if conn.Attempts() != 2 {
		t.Errorf("dials = %d, want 2", conn.Attempts())
	}
}

// The hot path costs nothing extra: Acquire through the factory allocates
// no more than pool.Acquire, and a successful dial through the wrapped
// DialFunc allocates nothing (the benchmarks measure time).
func TestHotPathAllocations(t *testing.T) {
	cfg, _ := poolConfig(t, pgtest.DSN(t), "sslmode=disable")
	f := newFactory(t)
	pool := newPool(t, f, cfg)
	ctx := context.Background()
	if err := pool.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	plain := testing.AllocsPerRun(200, func() {
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c.Release()
	})
	through := testing.AllocsPerRun(200, func() {
		c, err := f.Acquire(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		c.Release()
	})
	if through > plain {
		t.Errorf("f.Acquire allocates %v per call, pool.Acquire %v", through, plain)
	}

	// A dial's allocations, with and without AttemptTimeout: TestDialAllocations.
}

// The first attempt of a dial and of a password fetch is bounded by the
// policy's AttemptTimeout, like every retry: pgxpool builds connections
// without the caller's cancellation, so a hung first dial must not hold a
// pool slot until pgx's two-minute ConnectTimeout.
func TestFirstAttemptIsBoundedByAttemptTimeout(t *testing.T) {
	t.Parallel()
	p := fastPolicy()
	p.AttemptTimeout = 100 * time.Millisecond
	for _, tc := range []struct {
		name     string
		dial     []fakes.Step
		password []fakes.Step
	}{
		{"dial hangs once", []fakes.Step{fakes.Hang()}, nil},
		{"password fetch hangs once", nil, []fakes.Step{fakes.Hang()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, addr := poolConfig(t, pgtest.DSN(t), "sslmode=disable")
			conn := fakes.NewConnector(addr, tc.dial...)
			cfg.ConnConfig.DialFunc = conn.Dial
			src := fakes.NewPasswordSource("token", tc.password...)
			f, err := holdfast.New(holdfast.WithRetryPolicy(p), holdfast.WithRetryBudget(nil), holdfast.WithPasswordFunc(src.Password))
			if err != nil {
				t.Fatal(err)
			}
			pool := newPool(t, f, cfg)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if err := pool.Ping(ctx); err != nil {
				t.Fatalf("Ping = %v, want success after the hung first attempt timed out", err)
			}
			if got := conn.Attempts() + src.Attempts(); got != 3 {
				t.Errorf("dials + fetches = %d, want 3 (one hung attempt, then one of each)", got)
			}
		})
	}
}

// A blue/green suspension that reached its bound is not waited out again by
// Factory.Acquire: the bound (ConnectTimeout) is the caller's whole wait.
func TestAcquireDoesNotRewaitASuspension(t *testing.T) {
	t.Parallel()
	cfg, _ := poolConfig(t, pgtest.DSN(t), "sslmode=disable")
	var calls atomic.Int64
	cfg.PrepareConn = func(context.Context, *pgx.Conn) (bool, error) {
		calls.Add(1)
		return false, &bluegreen.SuspendError{Op: "acquire", Phase: bluegreen.InProgress, Err: context.DeadlineExceeded}
	}
	f := newFactory(t, holdfast.WithBlueGreen(bluegreen.Config{}))
	defer f.Close()
	pool := newPool(t, f, cfg)
	_, err := f.Acquire(context.Background(), pool)
	if !errors.As(err, new(*bluegreen.SuspendError)) {
		t.Fatalf("Acquire = %v, want the suspension", err)
	}
	if v := f.Classify(err); v.Class != classify.Transient {
		t.Errorf("verdict = %v, want Transient (the caller may try again later)", v)
	}
	if calls.Load() != 1 {
		t.Errorf("PrepareConn calls = %d, want 1: the suspension was waited out again", calls.Load())
	}
}

// errInvalidConfig is matched (errors.Is) by every *holdfast.ConfigError.
var errInvalidConfig = cfgerr.ErrInvalid
