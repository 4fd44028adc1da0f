package rdssecrets_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/fakes"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/fakes/secretsmanagertest"
	"github.com/holdfast-db/holdfast/internal/conn"
	"github.com/holdfast-db/holdfast/rdssecrets"
	"github.com/holdfast-db/holdfast/retry"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The application's two users (alternating users rotates between them),
// each authenticated with scram-sha-256.
const (
	appUser      = "app"
	cloneUser    = "app_clone"
	initPassword = "initial-password-0"
	secretName   = "prod/app/db"
)

// startPG starts a server that authenticates appUser and cloneUser with
// scram-sha-256 (a wrong password is 28P01); other users are trusted.
func startPG(t *testing.T) *pgtest.Server {
	t.Helper()
	if _, err := pgtest.BinDir(); err != nil {
		if os.Getenv(pgtest.EnvRequire) == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := pgtest.Start(ctx, pgtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	for _, u := range []string{appUser, cloneUser} {
		if err := s.PasswordRole(ctx, u, initPassword); err != nil {
			t.Fatal(err)
		}
	}
	if code := connectCode(ctx, s, appUser, "wrong"); code != "28P01" {
		t.Fatalf("a wrong password for %s: %q, want 28P01", appUser, code)
	}
	return s
}

func connectCode(ctx context.Context, s *pgtest.Server, user, password string) string {
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://%s:%s@%s/postgres?sslmode=disable", user, password, s.Addr()))
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

// smClient is the real SDK client on the fake, with static credentials.
// The SDK's own retries are off, so that the test sees holdfast's.
func smClient(sm *secretsmanagertest.Server) *secretsmanager.Client {
	return secretsmanager.New(secretsmanager.Options{
		Region:       secretsmanagertest.Region,
		BaseEndpoint: aws.String(sm.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "SECRETTEST", ""),
		Retryer:      aws.NopRetryer{},
	})
}

// newSecret creates the application's secret on the fake.
func newSecret(sm *secretsmanagertest.Server, s *pgtest.Server) {
	sm.CreateSecret(secretName, secretsmanagertest.RDSSecret{
		Engine: "postgres", Host: s.Host, Port: s.Port, Username: appUser, Password: initPassword, DBName: "postgres",
	}.JSON())
}

// rotator changes passwords on the real server (setSecret) and logs in
// with the new ones (testSecret).
func rotator(s *pgtest.Server, strategy secretsmanagertest.Strategy) secretsmanagertest.Rotator {
	return secretsmanagertest.Rotator{
		Strategy: strategy,
		SetSecret: func(ctx context.Context, pending, _ secretsmanagertest.RDSSecret) error {
			return s.Exec(ctx, fmt.Sprintf("SET password_encryption = 'scram-sha-256'; ALTER ROLE %s PASSWORD '%s'", pending.Username, pending.Password))
		},
		TestSecret: func(ctx context.Context, pending secretsmanagertest.RDSSecret) error {
			if code := connectCode(ctx, s, pending.Username, pending.Password); code != "" {
				return fmt.Errorf("testSecret: %s", code)
			}
			return nil
		},
	}
}

// poolConfig is the application's pool config: no password (the secret
// gives it), connections replaced every ~30ms so that new ones keep
// authenticating.
func poolConfig(t *testing.T, s *pgtest.Server, user, password string) *pgxpool.Config {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(fmt.Sprintf("postgres://%s:%s@%s/postgres?sslmode=disable&pool_max_conns=4", user, password, s.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConnLifetime = 30 * time.Millisecond
	cfg.MaxConnLifetimeJitter = 10 * time.Millisecond
	return cfg
}

func fastPolicy() retry.Policy {
	p := retry.Default()
	p.InitialInterval = 5 * time.Millisecond
	p.MaxInterval = 20 * time.Millisecond
	return p
}

// load runs workers that each run a query through do until stop, and
// counts what failed.
type load struct {
	ok, failed atomic.Int64
	mu         sync.Mutex
	firstErr   error
	wg         sync.WaitGroup
	stop       chan struct{}
}

func startLoad(workers int, do func(ctx context.Context) error) *load {
	l := &load{stop: make(chan struct{})}
	for range workers {
		l.wg.Go(func() {
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				err := do(ctx)
				cancel()
				if err != nil {
					l.failed.Add(1)
					l.mu.Lock()
					if l.firstErr == nil {
						l.firstErr = err
					}
					l.mu.Unlock()
				} else {
					l.ok.Add(1)
				}
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
	return l
}

func (l *load) end() { close(l.stop); l.wg.Wait() }

// query acquires through acquire and runs one statement.
func query(acquire func(context.Context) (*pgxpool.Conn, error)) func(context.Context) error {
	return func(ctx context.Context) error {
		c, err := acquire(ctx)
		if err != nil {
			return err
		}
		defer c.Release()
		_, err = c.Exec(ctx, "SELECT 1")
		return err
	}
}

// rotationRun is one rotation test: a holdfast pool on rdssecrets and a
// control (a plain pgxpool with the secret read once at start) under the
// same load through the rotation steps.
func rotationRun(t *testing.T, strategy secretsmanagertest.Strategy, rotations int) {
	s := startPG(t)
	sm := secretsmanagertest.New()
	defer sm.Close()
	newSecret(sm, s)
	client := smClient(sm)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var logs fakes.LogBuffer
	f, err := holdfast.New(
		rdssecrets.With(rdssecrets.Config{Client: client, SecretID: secretName}),
		holdfast.WithRetryPolicy(fastPolicy()),
		holdfast.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pool, err := f.NewPool(ctx, poolConfig(t, s, appUser, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	// The control: the secret read once, at start.
	sec, err := rdssecrets.Get(ctx, client, secretName, "")
	if err != nil {
		t.Fatal(err)
	}
	control, err := pgxpool.NewWithConfig(ctx, poolConfig(t, s, sec.Username, sec.Password))
	if err != nil {
		t.Fatal(err)
	}
	defer control.Close()

	hf := startLoad(4, query(func(ctx context.Context) (*pgxpool.Conn, error) { return f.Acquire(ctx, pool) }))
	ctl := startLoad(4, query(control.Acquire))
	pause := func(d time.Duration) {
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
	}
	pause(200 * time.Millisecond)
	var passwords []string
	for range rotations {
		ro := sm.Rotate(secretName, rotator(s, strategy))
		for _, step := range []struct {
			name string
			fn   func(context.Context) error
			wait time.Duration
		}{
			{"createSecret", ro.CreateSecret, 100 * time.Millisecond},
			{"setSecret", ro.SetSecret, 700 * time.Millisecond}, // the window: the database wants AWSPENDING
			{"testSecret", ro.TestSecret, 100 * time.Millisecond},
			{"finishSecret", ro.FinishSecret, 300 * time.Millisecond},
		} {
			if err := step.fn(ctx); err != nil {
				t.Fatalf("%s: %v", step.name, err)
			}
			pause(step.wait)
		}
		v, _, _ := sm.Value(secretName, secretsmanagertest.StageCurrent)
		r, _ := secretsmanagertest.ParseRDSSecret(v)
		passwords = append(passwords, r.Password)
	}
	hf.end()
	ctl.end()

	var user string
	if err := pool.QueryRow(ctx, "SELECT current_user").Scan(&user); err != nil {
		t.Fatal(err)
	}
	cur, _, _ := sm.Value(secretName, secretsmanagertest.StageCurrent)
	want, _ := secretsmanagertest.ParseRDSSecret(cur)
	t.Logf("%s, %d rotation(s): holdfast %d ok, %d failed; control (pgxpool, secret read once) %d ok, %d failed (first: %v); GetSecretValue calls %d, credentials calls %d; the pool now logs in as %s",
		strategy, rotations, hf.ok.Load(), hf.failed.Load(), ctl.ok.Load(), ctl.failed.Load(), ctl.firstErr,
		sm.Calls("GetSecretValue"), credentialsCalls(pool), user)
	if n := hf.failed.Load(); n != 0 {
		t.Errorf("holdfast lost %d requests through the rotation (first: %v)", n, hf.firstErr)
	}
	// A loaded machine (-race, two cores) runs fewer requests in the
	// window; the rotation is exercised when the refused credentials were
	// fetched again (credentials calls ≥ 2) and requests ran at all.
	if hf.ok.Load() < 20 || credentialsCalls(pool) < 2 {
		t.Errorf("holdfast ran %d requests and %d credentials calls: the load or the rotation did not run", hf.ok.Load(), credentialsCalls(pool))
	}
	if ctl.failed.Load() == 0 {
		t.Errorf("the control lost no request: the rotation did not refuse the old credentials")
	}
	if strategy == secretsmanagertest.SingleUser && user != want.Username {
		t.Errorf("current_user = %s, want %s", user, want.Username)
	}
	for _, pw := range append(passwords, initPassword) {
		if strings.Contains(logs.String(), pw) {
			t.Errorf("a password of the secret is in the log:\n%s", logs.String())
		}
	}
}

// TestSingleUserRotationUnderLoad: setSecret changes the user's password
// before finishSecret moves AWSCURRENT; new connections in that window are
// refused with the old one, and holdfast takes AWSPENDING.
func TestSingleUserRotationUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("rotates the secret under load on a real server: skipped with -short")
	}
	rotationRun(t, secretsmanagertest.SingleUser, 1)
}

// TestAlternatingUsersRotationUnderLoad: two rotations; the second changes
// the password of the user the first one left (which the cache still
// holds): refused, and holdfast takes the new AWSCURRENT (the other user).
func TestAlternatingUsersRotationUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("rotates the secret under load on a real server: skipped with -short")
	}
	rotationRun(t, secretsmanagertest.AlternatingUsers, 2)
}

func TestSecretFetch(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server of its own: skipped with -short")
	}
	s := startPG(t)
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, *pgtest.Server)
	}{
		{"throttled fetch retried within bounds", testThrottledRetried},
		{"throttled forever gives up within the policy", testThrottledForever},
		{"deleted secret fails fast", testDeletedFailsFast},
		{"single flight: concurrent connects make one fetch", testSingleFlight},
		{"TTL cache: no fetch per connect", testTTLCache},
		{"access denied is fatal", testAccessDenied},
		{"a secret the database refuses, no rotation: RotationError", testWrongSecret},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, s) })
	}
}

type fixture struct {
	sm   *secretsmanagertest.Server
	f    *holdfast.Factory
	pool *pgxpool.Pool
	cfg  *pgxpool.Config
}

// newFixture builds a factory on a fresh fake and configures (does not
// start) a pool.
func newFixture(t *testing.T, s *pgtest.Server, opts ...holdfast.Option) *fixture {
	t.Helper()
	sm := secretsmanagertest.New()
	t.Cleanup(sm.Close)
	newSecret(sm, s)
	f, err := holdfast.New(append([]holdfast.Option{
		rdssecrets.With(rdssecrets.Config{Client: smClient(sm), SecretID: secretName}),
		holdfast.WithRetryPolicy(fastPolicy()),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	cfg := poolConfig(t, s, appUser, "")
	cfg.MaxConnLifetime = time.Hour
	cfg.MaxConns = 16
	if err := f.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return &fixture{sm: sm, f: f, pool: pool, cfg: cfg}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func testThrottledRetried(t *testing.T, s *pgtest.Server) {
	fx := newFixture(t, s)
	fx.sm.Throttle("GetSecretValue", 2)
	ctx := testCtx(t)
	c, err := fx.f.Acquire(ctx, fx.pool)
	if err != nil {
		t.Fatalf("two throttled fetches, then one answered: %v", err)
	}
	c.Release()
	if n := fx.sm.Calls("GetSecretValue"); n != 3 {
		t.Fatalf("GetSecretValue calls = %d, want 3 (2 throttled, 1 answered)", n)
	}
}

func testThrottledForever(t *testing.T, s *pgtest.Server) {
	fx := newFixture(t, s)
	fx.sm.Throttle("GetSecretValue", -1)
	ctx := testCtx(t)
	start := time.Now()
	_, err := fx.f.Acquire(ctx, fx.pool)
	took := time.Since(start)
	var se *rdssecrets.SecretError
	if !errors.As(err, &se) || se.Code != "ThrottlingException" || se.Status != 400 {
		t.Fatalf("err = %v, want a *SecretError ThrottlingException 400", err)
	}
	if v := fx.f.Classify(err); v.Class != classify.Transient || v.Reason != rdssecrets.ReasonThrottled {
		t.Fatalf("verdict = %v, want Transient %s", v, rdssecrets.ReasonThrottled)
	}
	var re *retry.Error
	if !errors.As(err, &re) || re.Attempts != 3 {
		t.Fatalf("err = %v, want a *retry.Error of 3 attempts", err)
	}
	if n := fx.sm.Calls("GetSecretValue"); n != 3 {
		t.Fatalf("GetSecretValue calls = %d, want 3 (the policy's MaxAttempts)", n)
	}
	if took > 2*time.Second {
		t.Fatalf("gave up after %s", took)
	}
	t.Logf("throttled forever: gave up after %d calls in %s: %v", fx.sm.Calls("GetSecretValue"), took.Round(time.Millisecond), err)
}

func testDeletedFailsFast(t *testing.T, s *pgtest.Server) {
	fx := newFixture(t, s)
	fx.sm.DeleteSecret(secretName)
	ctx := testCtx(t)
	start := time.Now()
	err := fx.f.Start(ctx, fx.pool)
	took := time.Since(start)
	var ce *holdfast.ConnectError
	if !errors.Is(err, rdssecrets.ErrNotFound) || !errors.As(err, &ce) || ce.Layer != "startup" {
		t.Fatalf("err = %v, want a startup ConnectError matching rdssecrets.ErrNotFound", err)
	}
	if v := fx.f.Classify(err); v.Class != classify.Fatal || v.Reason != rdssecrets.ReasonNotFound {
		t.Fatalf("err = %v, want Fatal %s", err, rdssecrets.ReasonNotFound)
	}
	if n := fx.sm.Calls("GetSecretValue"); n != 1 {
		t.Fatalf("GetSecretValue calls = %d, want 1", n)
	}
	if took > time.Second {
		t.Fatalf("took %s to fail", took)
	}
	t.Logf("deleted secret: failed in %s with %v", took.Round(time.Millisecond), err)
}

func testAccessDenied(t *testing.T, s *pgtest.Server) {
	fx := newFixture(t, s)
	fx.sm.Fail("GetSecretValue", "AccessDeniedException", 400, -1)
	_, err := fx.f.Acquire(testCtx(t), fx.pool)
	if !errors.Is(err, rdssecrets.ErrAccessDenied) {
		t.Fatalf("err = %v, want rdssecrets.ErrAccessDenied", err)
	}
	if v := fx.f.Classify(err); v.Class != classify.Fatal || v.Reason != rdssecrets.ReasonDenied {
		t.Fatalf("verdict = %v", v)
	}
	if n := fx.sm.Calls("GetSecretValue"); n != 1 {
		t.Fatalf("GetSecretValue calls = %d, want 1", n)
	}
}

func testSingleFlight(t *testing.T, s *pgtest.Server) {
	fx := newFixture(t, s)
	fx.sm.SetLatency(100 * time.Millisecond) // the connects overlap the fetch
	ctx := testCtx(t)
	const n = 16
	conns := make(chan *pgxpool.Conn, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			c, err := fx.f.Acquire(ctx, fx.pool)
			if err != nil {
				errs <- err
				return
			}
			conns <- c // held: each goroutine has its own connection
		})
	}
	wg.Wait()
	close(conns)
	close(errs)
	held := 0
	for c := range conns {
		held++
		c.Release()
	}
	for err := range errs {
		t.Error(err)
	}
	if held != n {
		t.Fatalf("%d of %d connections", held, n)
	}
	if got := fx.sm.Calls("GetSecretValue"); got != 1 {
		t.Fatalf("%d concurrent connects made %d GetSecretValue calls, want 1", n, got)
	}
	if got := credentialsCalls(fx.pool); got != 1 {
		t.Fatalf("credentials calls = %d, want 1", got)
	}
}

func testTTLCache(t *testing.T, s *pgtest.Server) {
	var connects atomic.Int32
	fx := newFixture(t, s)
	ctx := testCtx(t)
	for range 20 {
		c, err := fx.f.Acquire(ctx, fx.pool)
		if err != nil {
			t.Fatal(err)
		}
		if c.Conn().PgConn().ParameterStatus("session_authorization") != appUser {
			t.Fatalf("session user %q", c.Conn().PgConn().ParameterStatus("session_authorization"))
		}
		connects.Add(1)
		c.Release()
		fx.pool.Reset() // every connection closed: the next Acquire connects again
	}
	if got := fx.sm.Calls("GetSecretValue"); got != 1 {
		t.Fatalf("20 connects made %d GetSecretValue calls, want 1 (cached for the TTL)", got)
	}
}

func testWrongSecret(t *testing.T, s *pgtest.Server) {
	sm := secretsmanagertest.New()
	defer sm.Close()
	sm.CreateSecret(secretName, secretsmanagertest.RDSSecret{Username: appUser, Password: "not-the-password"}.JSON())
	f, err := holdfast.New(
		rdssecrets.With(rdssecrets.Config{Client: smClient(sm), SecretID: secretName, RotationWait: 300 * time.Millisecond, PollInterval: 50 * time.Millisecond}),
		holdfast.WithRetryPolicy(fastPolicy()), holdfast.WithStartupPolicy(fastPolicy()),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	start := time.Now()
	_, err = f.NewPool(testCtx(t), poolConfig(t, s, appUser, ""))
	took := time.Since(start)
	var re *rdssecrets.RotationError
	if !errors.As(err, &re) || re.Pending {
		t.Fatalf("err = %v, want a *RotationError without a pending version", err)
	}
	if v := f.Classify(err); v.Class != classify.Fatal || v.Reason != rdssecrets.ReasonMismatch {
		t.Fatalf("verdict = %v", v)
	}
	if strings.Contains(err.Error(), "not-the-password") {
		t.Fatalf("the password is in the error: %v", err)
	}
	if took > 3*time.Second {
		t.Fatalf("took %s", took)
	}
	t.Logf("a secret the database refuses: %d GetSecretValue calls, failed in %s: %v", sm.Calls("GetSecretValue"), took.Round(time.Millisecond), err)
}

// credentialsCalls is how many times the factory of pool called its
// credentials function.
func credentialsCalls(pool *pgxpool.Pool) int64 { return conn.OfPool(pool).Engine().CredentialsCalls() }
