package gcptest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/fakes"
	"github.com/holdfast-db/holdfast/retry"
)

// MustAs returns what errors.As finds of type T in err, failing t if it
// finds none.
func MustAs[T error](t testing.TB, err error) T {
	t.Helper()
	var target T
	if !errors.As(err, &target) {
		t.Fatalf("no %T in %v", target, err)
	}
	return target
}

// MustNotAs fails t if errors.As finds a T in err.
func MustNotAs[T error](t testing.TB, err error) {
	t.Helper()
	var target T
	if errors.As(err, &target) {
		t.Errorf("unexpected %T in %v", target, err)
	}
}

// Fatal is the Fatal verdict of reason.
func Fatal(reason string) classify.Verdict {
	return classify.Verdict{Class: classify.Fatal, Reason: reason}
}

// Transient is the Transient verdict of reason.
func Transient(reason string) classify.Verdict {
	return classify.Verdict{Class: classify.Transient, Reason: reason}
}

// CtxFor is a context that ends after d, or with the test.
func CtxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Measured logs how long a case took, in the fixed format the packages'
// docs quote: "MEASURED <test name>: <duration>".
func Measured(t testing.TB, start time.Time) {
	t.Helper()
	t.Logf("MEASURED %s: %v", t.Name(), time.Since(start).Round(time.Millisecond))
}

// NewFactory is holdfast.New with a private retry budget (tests must not
// share the process's) and a logger writing to logs, closed when the test
// ends.
func NewFactory(t testing.TB, logs *fakes.LogBuffer, opts ...holdfast.Option) *holdfast.Factory {
	t.Helper()
	budget, err := retry.NewBudget(retry.DefaultBudget())
	if err != nil {
		t.Fatal(err)
	}
	f, err := holdfast.New(append([]holdfast.Option{holdfast.WithRetryBudget(budget),
		holdfast.WithLogger(slog.New(slog.NewTextHandler(logs, nil)))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

// Parse is pgxpool.ParseConfig, failing t on an error.
func Parse(t testing.TB, dsn string) *pgxpool.Config {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Pool is a pool of cfg configured by f, not started, closed when the test
// ends.
func Pool(t testing.TB, f *holdfast.Factory, cfg *pgxpool.Config) *pgxpool.Pool {
	t.Helper()
	if err := f.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Counted returns in with its Dial counting its calls in n: the dials
// holdfast makes through a connector.
func Counted(in holdfast.Integration, n *atomic.Int32) holdfast.Integration {
	inner := in.Dial
	in.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		n.Add(1)
		return inner(ctx, network, addr)
	}
	return in
}

// Failure is what holdfast says of a failed connect: the factory's
// verdict, the *retry.Error of the loop that gave up and its
// ConnectError's hint.
type Failure struct {
	Verdict classify.Verdict
	Retry   *retry.Error
	Hint    string
}

// FailureOf is the Failure of err, classified by f.
func FailureOf(f *holdfast.Factory, err error) Failure {
	fl := Failure{Verdict: f.Classify(err)}
	errors.As(err, &fl.Retry)
	var ce *holdfast.ConnectError
	if errors.As(err, &ce) {
		fl.Hint = ce.Hint
	}
	return fl
}

// Fake is what [Dialer] needs of a fake: the options that point a real
// connector's dialer at it, with or without IAM database authentication.
type Fake[O any] interface {
	DialerOptions() ([]O, error)
	IAMDialerOptions() ([]O, error)
}

// Dialer builds a real connector's dialer with newDialer (the connector's
// NewDialer) from the fake's options (with IAM database authentication
// when iam) and extra, closed when the test ends.
func Dialer[O any, D io.Closer](t testing.TB, fake Fake[O], iam bool, newDialer func(context.Context, ...O) (D, error), extra ...O) D {
	t.Helper()
	opts, err := fake.DialerOptions()
	if iam {
		opts, err = fake.IAMDialerOptions()
	}
	if err != nil {
		t.Fatal(err)
	}
	d, err := newDialer(context.Background(), append(opts, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// Started returns s, which its New returned with err, failing t on err;
// s is closed when the test ends, and a failing Close fails the test.
func Started[S io.Closer](t testing.TB, s S, err error) S {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// WantConnectorDial fails t unless cfg, configured by f with a connector's
// integration whose dialer is closed, has pgx's TLS off, passes the host
// to the dial unresolved, and dials through the connector: the dial fails
// at once with the dialer's closed sentinel, Fatal "dialer-closed".
func WantConnectorDial(t testing.TB, f *holdfast.Factory, cfg *pgxpool.Config, closed error) {
	t.Helper()
	if err := f.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	cc := cfg.ConnConfig
	if cc.TLSConfig != nil || len(cc.Fallbacks) != 0 {
		t.Errorf("pgx TLS still on: TLSConfig %v, %d fallbacks", cc.TLSConfig != nil, len(cc.Fallbacks))
	}
	if addrs, err := cc.LookupFunc(context.Background(), "db.example"); err != nil || len(addrs) != 1 || addrs[0] != "db.example" {
		t.Errorf("LookupFunc = %v, %v; want the host unresolved", addrs, err)
	}
	// The dial must reach the connector (not pgx's TCP dial to
	// db.example) and fail with its error, classified Fatal, once.
	start := time.Now()
	_, err := cc.DialFunc(context.Background(), "tcp", "db.example:5433")
	if !errors.Is(err, closed) {
		t.Errorf("dial = %v, want the connector's %v", err, closed)
	}
	if v := f.Classify(err); v.Retryable() || v.Reason != classify.ReasonDialerClosed {
		t.Errorf("Classify = %v, want fatal/dialer-closed", v)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("a fatal dial took %v", d)
	}
	if got := f.Classify(errors.New("x")); got.Reason != classify.ReasonUnknown {
		t.Errorf("Classify(plain error) = %v", got)
	}
}

// WantUnclassified pings pool three times, through a failing token
// endpoint, with a connector's Dial set as its dial function by hand (not
// through the connector's integration), and fails t unless f's verdict is
// not retryable and f logged one WARN naming the connector's module pkg
// and the option that would classify its errors.
func WantUnclassified(t testing.TB, f *holdfast.Factory, pool *pgxpool.Pool, logs *fakes.LogBuffer, pkg, option string) {
	t.Helper()
	var err error
	for range 3 {
		if err = pool.Ping(CtxFor(t, 30*time.Second)); err == nil {
			t.Fatal("Ping succeeded through a failing token endpoint")
		}
	}
	if v := f.Classify(err); v.Retryable() {
		t.Errorf("Classify = %v: the factory classified the connector's error without %s", v, option)
	}
	if n := strings.Count(logs.String(), `level=WARN msg="holdfast: a dial failed with an error of `+pkg); n != 1 ||
		!strings.Contains(logs.String(), `check="`+option+`"`) {
		t.Errorf("%d lines name the connector, want one naming %s:\n%s", n, option, logs.String())
	}
}
