package holdfast

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/internal/obs"
	"github.com/holdfast-db/holdfast/retry"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Factory plugs classification and bounded retry into pgxpool. Build one with
// New, then call Configure on each *pgxpool.Config (or use NewPool). A Factory
// is safe for concurrent use; one Factory may configure many pools, which then
// share its retry budget. With WithBlueGreen, each configured pool gets a
// bluegreen.Router whose monitors run until Factory.Close.
type Factory struct {
	classifier *classify.Classifier
	password   func(ctx context.Context, host string) (string, error)
	budget     *retry.Budget
	logger     *slog.Logger
	tel        *obs.Telemetry // metrics, spans and log lines (telemetry.go)

	meterProvider  metric.MeterProvider // WithMeterProvider; nil: the global one
	tracerProvider trace.TracerProvider // WithTracerProvider; nil: the global one

	dial     retry.Retrier // one dial, layer "connect"
	fetch    retry.Retrier // one password fetch, layer "password"
	acquire  retry.Retrier // Factory.Acquire, layer "acquire"
	startup  retry.Retrier // NewPool's first connection, layer "startup"
	maxDials int
	perTry   time.Duration // the retry policy's AttemptTimeout, for first attempts

	poolName  string          // WithPoolName
	dialFn    pgconn.DialFunc // Integration.Dial; nil: the config's or pgx's
	encrypted bool            // Integration.Encrypted
	authRetry bool            // Integration.RetryAuthFailure
	dialBy    string          // the integration (or option) that set dialFn
	hinted    atomic.Bool     // hintIntegration warned

	blueGreen *bluegreen.Config // WithBlueGreen, nil when off
	failover  *failover.Config  // WithFailover, nil when off
	bgObserve bool              // give each pool's router an observer of the factory's telemetry

	mu         sync.Mutex                                  // guards the fields below
	pools      []*poolHooks                                // every configured pool config's layers (hooks.go)
	configured map[weak.Pointer[pgxpool.Config]]*poolHooks // which configs this factory configured
	monitors   map[string]*failover.Monitor                // WithFailover: one per cluster (failover.go)
	closed     bool
}

// Retry layers: where a failure happened and was retried. They are the
// values of ConnectError.Layer and of the holdfast.layer attribute of
// metrics, span events and log lines.
const (
	LayerConnect  = "connect"  // a dial, inside pgx's DialFunc
	LayerPassword = "password" // a password or token fetch, inside BeforeConnect
	LayerAcquire  = "acquire"  // Factory.Acquire, around pool.Acquire
	LayerStartup  = "startup"  // NewPool's and Factory.Start's first connection
)

// The retry layers' former names.
const (
	// Deprecated: use LayerConnect.
	StageConnect = LayerConnect
	// Deprecated: use LayerPassword.
	StagePassword = LayerPassword
	// Deprecated: use LayerAcquire.
	StageAcquire = LayerAcquire
	// Deprecated: use LayerStartup.
	StageStartup = LayerStartup
)

// New returns a Factory built from opts, or a *ConfigError if an option is
// nil or a policy or budget makes no sense.
func New(opts ...Option) (*Factory, error) {
	c := defaults()
	for _, o := range opts {
		if o == nil {
			return nil, &ConfigError{Field: "Option", Why: "an option is nil"}
		}
		o(&c)
	}
	if c.invalidOption != nil {
		return nil, c.invalidOption
	}
	if c.integrationPolicy != nil && !c.policySet {
		c.policy = *c.integrationPolicy
	}
	if c.integrationStartup != nil && !c.startupSet {
		c.startup = *c.integrationStartup
	}
	if err := c.policy.Validate(); err != nil {
		return nil, &ConfigError{Field: "WithRetryPolicy", Why: "invalid policy", Err: err}
	}
	if err := c.startup.Validate(); err != nil {
		return nil, &ConfigError{Field: "WithStartupPolicy", Why: "invalid policy", Err: err}
	}
	if !c.budgetSet {
		c.budget, _ = retry.NewBudget(retry.DefaultBudget()) // the default config is valid
	}
	rules := append(append([]classify.Rule(nil), c.rules...), c.integrationRules...)
	rules = append(rules, panicRule)
	if c.blueGreen != nil {
		rules = append(rules, bluegreen.Rule)
		if c.blueGreen.Logger == nil && c.logger.Handler() != slog.DiscardHandler {
			c.blueGreen.Logger = c.logger
		}
	}
	if c.failover != nil {
		rules = append(rules, failover.Rule)
		if c.failover.Logger == nil && c.logger.Handler() != slog.DiscardHandler {
			c.failover.Logger = c.logger
		}
	}
	f := &Factory{
		failover:   c.failover,
		blueGreen:  c.blueGreen,
		classifier: classify.New(rules...).WithTypes(c.typeRules...),
		dialFn:     c.dial,
		dialBy:     c.dialBy,
		poolName:   c.poolName,
		authRetry:  c.authRetry,
		encrypted:  c.dialEncrypted,
		password:   c.password,
		budget:     c.budget,
		logger:     c.logger,
		maxDials:   c.policy.MaxAttempts,
		perTry:     c.policy.AttemptTimeout,
	}
	if err := f.newTelemetry(&c); err != nil {
		return nil, err
	}
	f.dial = f.retrier(c.policy, LayerConnect)
	// A dial that connects may reach a front end whose database is down:
	// the budget is refilled when the handshake completes (connect.go).
	f.dial.NoRefund = true
	f.fetch = f.retrier(c.policy, LayerPassword)
	f.fetch.NoRefund = true // likewise: only a completed handshake refills the budget
	f.acquire = f.retrier(c.policy, LayerAcquire)
	f.startup = f.retrier(c.startup, LayerStartup)
	if f.failover != nil {
		if f.failover.Redact == nil {
			f.failover.Redact = f.tel.Redact // the monitors' log lines and Status carry no secret holdfast knows
		}
		onEvent, tel := f.failover.OnEvent, f.tel
		f.failover.OnEvent = func(e failover.Event) {
			tel.FailoverEvent(context.Background(), e.Name)
			if onEvent != nil {
				onEvent(e)
			}
		}
	}
	return f, nil
}

func (f *Factory) retrier(p retry.Policy, layer string) retry.Retrier {
	return retry.Retrier{
		Policy:   p,
		Classify: f.classifier.Classify,
		Budget:   f.budget,
		OnRetry: func(ctx context.Context, e retry.Event) {
			// One WARN line (holdfast.layer, attempt, delay, error.class,
			// error.reason, holdfast.stage, redacted error), a metric and
			// a span event: see telemetry.go.
			f.onRetry(ctx, layer, e)
		},
	}
}

// Classify classifies err with the factory's rules (WithClassifier) and the
// built-in ones.
func (f *Factory) Classify(err error) classify.Verdict { return f.classifier.Classify(err) }

// Close stops and joins the blue/green monitors of every pool the factory
// configured (WithBlueGreen); their pools keep working with plain host
// names. It is idempotent and does nothing without WithBlueGreen. Close the
// pools first or after, in any order. After Close, Configure and NewPool
// return a *ConfigError.
func (f *Factory) Close() {
	if f == nil {
		return
	}
	f.mu.Lock()
	pools, monitors := f.pools, f.monitors
	f.pools, f.monitors, f.closed = nil, nil, true
	f.mu.Unlock()
	for _, ph := range pools {
		ph.close()
	}
	for _, m := range monitors {
		m.Close()
	}
}

// fetchPassword fetches the password or token of a connection to host,
// under the retry policy.
func (f *Factory) fetchPassword(ctx context.Context, host string) (string, error) {
	pw, err := f.firstPassword(ctx, host)
	if err == nil {
		// No budget refund: a token fetched while the database is down
		// says nothing of the database. The refund comes when the
		// connection's handshake completes (connect.go).
		f.tel.FirstTry(ctx, LayerPassword)
		return pw, nil
	}
	err = f.retryFrom(ctx, &f.fetch, LayerPassword, err, func(ctx context.Context) error {
		p, err := f.callPassword(ctx, host)
		pw = p
		return err
	})
	if err != nil {
		return "", newConnectError(LayerPassword, err)
	}
	return pw, nil
}

// firstDial is the fast-path first attempt of a dial: a plain call of base,
// bounded by the policy's AttemptTimeout when there is one (pgxpool gives a
// connection being built no caller cancellation, so without a bound a hung
// dial would hold a pool slot until pgx's ConnectTimeout). A success refills
// the retry budget and is recorded; a failure is left to the caller's retry.
func (f *Factory) firstDial(ctx context.Context, base pgconn.DialFunc, network, addr string) (net.Conn, error) {
	return f.dialWithin(ctx, f.perTry, base, network, addr)
}

// dialWithin is firstDial bounded by d (0: no bound) instead of the
// policy's AttemptTimeout.
func (f *Factory) dialWithin(ctx context.Context, d time.Duration, base pgconn.DialFunc, network, addr string) (net.Conn, error) {
	dctx := ctx
	if d > 0 && !endsWithin(ctx, d) {
		var cancel context.CancelFunc
		dctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	conn, err := base(dctx, network, addr)
	if err != nil {
		f.hintIntegration(ctx, err) // a dialer used without its integration
	}
	if err == nil {
		// No budget refund here: a front end (a proxy, a load balancer) may
		// accept the dial of a database that is down. The refund comes when
		// the handshake completes (connect.go).
		f.tel.FirstTry(ctx, LayerConnect) // no allocation unless a span records
	}
	return conn, err
}

// endsWithin reports whether ctx's deadline is at most d away, so that a
// bound of d would change nothing (and need not be allocated).
func endsWithin(ctx context.Context, d time.Duration) bool {
	dl, ok := ctx.Deadline()
	return ok && time.Until(dl) <= d
}

// firstPassword is the fast-path first attempt of a password fetch, bounded
// like firstDial.
func (f *Factory) firstPassword(ctx context.Context, host string) (string, error) {
	if f.perTry <= 0 {
		return f.callPassword(ctx, host)
	}
	ctx, cancel := context.WithTimeout(ctx, f.perTry)
	defer cancel()
	return f.callPassword(ctx, host)
}

// redial carries on after a failed dial, under the dial policy limited to
// allowance attempts in all (the failed one included). It returns the
// connection or a *ConnectError, and how many attempts were made.
func (f *Factory) redial(ctx context.Context, base pgconn.DialFunc, network, addr string, firstErr error, allowance int) (net.Conn, int, error) {
	r := f.dial
	r.Policy.MaxAttempts = allowance
	var conn net.Conn
	attempts := 1
	err := f.retryFrom(ctx, &r, LayerConnect, firstErr, func(ctx context.Context) error {
		attempts++
		c, err := base(ctx, network, addr)
		conn = c
		return err
	})
	if err != nil {
		return nil, attempts, newConnectError(LayerConnect, err)
	}
	return conn, attempts, nil
}

// Acquire is pool.Acquire with request-scope retry. Every path of a
// configured pool already retries a connect's transient failures (the
// dial, the password fetch and the startup handshake: 57P03, 53300, 57P01,
// a reset, a 28000 with a fresh token), inside the connect; Acquire adds
// what only a new connect config can do: one retry of a 28P01 with a
// freshly fetched token (pgx stops a connect at 28P01), and a retry of a
// failure that the connect could not see why it failed. Failures already
// retried below are returned as they are, so retries do not multiply. It
// is safe: no statement has been sent. Its error carries no secret
// holdfast knows.
//
// When nothing fails, Acquire costs what pool.Acquire costs.
func (f *Factory) Acquire(ctx context.Context, pool *pgxpool.Pool) (*pgxpool.Conn, error) {
	if pool == nil {
		return nil, &ConfigError{Field: "pool", Why: "nil pool"}
	}
	if dl, ok := ctx.Deadline(); ok {
		// The connect that pool.Acquire may make runs without ctx's
		// deadline (pgxpool keeps building it after the caller gives
		// up); its retries still do not sleep past it.
		ctx = retry.WithCallerDeadline(ctx, dl)
	}
	c, err := pool.Acquire(ctx)
	if err == nil {
		return c, nil
	}
	c, err = f.acquireAgain(ctx, pool, err, &f.acquire, false)
	return c, f.redact(err)
}

// Reacquire carries Acquire's retry to code that acquires its own way
// (package sqldb: pgx's stdlib connector calls pool.Acquire): after
// acquire failed with firstErr, it calls acquire again as Acquire retries
// pool.Acquire — one retry of a 28P01 or 28000 with a freshly fetched
// password or token, and a failure that the connect could not see why it
// failed; a failure the connect already retried is returned as it is. It
// returns nil once acquire succeeds, else an error that carries no secret
// holdfast knows. pool is the pool acquire takes from (its name is in the
// log lines).
func (f *Factory) Reacquire(ctx context.Context, pool *pgxpool.Pool, firstErr error, acquire func(context.Context) error) error {
	switch {
	case pool == nil:
		return &ConfigError{Field: "pool", Why: "nil pool"}
	case acquire == nil:
		return &ConfigError{Field: "acquire", Why: "nil func"}
	case firstErr == nil:
		return nil
	}
	if dl, ok := ctx.Deadline(); ok {
		ctx = retry.WithCallerDeadline(ctx, dl) // as Acquire: for the connects acquire waits on
	}
	return f.redact(f.retryAcquire(ctx, pool, firstErr, &f.acquire, false, acquire))
}

// reasonRetriedBelow marks a failure that a lower layer already retried.
const reasonRetriedBelow = "retried-below"

// waitedBelow reports whether err was already retried at the dial or
// password layer (it carries a *retry.Error) or already held for the
// blue/green bound: waiting for it again would multiply the bound.
func waitedBelow(err error) bool {
	var below *retry.Error
	return errors.As(err, &below) || errors.Is(err, bluegreen.ErrSuspended)
}

// acquireAgain retries pool.Acquire after a first failure firstErr. Unless
// patient, a failure that waitedBelow is not retried: a first one is
// returned as it is, a later one ends the loop.
func (f *Factory) acquireAgain(ctx context.Context, pool *pgxpool.Pool, firstErr error, r *retry.Retrier, patient bool) (*pgxpool.Conn, error) {
	var conn *pgxpool.Conn
	err := f.retryAcquire(ctx, pool, firstErr, r, patient, func(ctx context.Context) error {
		c, err := pool.Acquire(ctx)
		conn = c
		return err
	})
	if err != nil {
		return nil, err
	}
	return conn, nil
}

// retryAcquire is acquireAgain's loop over any acquire.
func (f *Factory) retryAcquire(ctx context.Context, pool *pgxpool.Pool, firstErr error, r *retry.Retrier, patient bool, acquire func(context.Context) error) error {
	if !patient && waitedBelow(firstErr) {
		return firstErr
	}
	if cfg := pool.Config(); cfg.ConnConfig != nil { // a failure path: the copy is affordable
		ctx = obs.WithTarget(ctx, obs.NewTarget(cfg.ConnConfig, f.poolName))
	}
	rr := *r
	authRetried := false
	rr.Classify = func(err error) classify.Verdict {
		if !patient && waitedBelow(err) {
			return classify.Verdict{Class: classify.Fatal, Reason: reasonRetriedBelow}
		}
		v := f.classifier.Classify(err)
		if f.password == nil {
			return v
		}
		return retryAuthOnce(v, err, &authRetried) // a freshly fetched token
	}
	return f.retryFrom(ctx, &rr, acquireLayer(patient), firstErr, acquire)
}

// NewPool configures cfg (unless this factory already did), builds the
// pool with pgxpool.NewWithConfig and makes the first connection under the
// startup policy, so that a pool that is returned has reached the
// database. When the first connection cannot be made, NewPool closes the
// pool (and its blue/green monitors) and returns a *StartupError.
func (f *Factory) NewPool(ctx context.Context, cfg *pgxpool.Config) (*pgxpool.Pool, error) {
	ph := f.hooksOf(cfg)
	if ph == nil {
		if err := f.Configure(cfg); err != nil {
			return nil, err
		}
		ph = f.hooksOf(cfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		f.forget(ph)
		return nil, err
	}
	if err := f.Start(ctx, pool); err != nil { // Start attaches the pool's layers
		f.forget(ph)
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// Start makes pool's first connection under the startup policy and releases
// it to the pool. It returns nil or a *StartupError wrapping the last
// failure. Failures already retried at the dial layer are retried again
// here: startup is more patient than a request, and still bounded. It also
// tells the factory's layers which pool they serve (blue/green closes idle
// connections to an old blue instance at once; telemetry reports the
// pool's connection counts), and returns a *ConfigError when the pool's
// connection was not made through this factory (a pool built from a config
// it did not configure, or whose BeforeConnect was replaced after
// Configure).
func (f *Factory) Start(ctx context.Context, pool *pgxpool.Pool) error {
	if pool == nil {
		return &ConfigError{Field: "pool", Why: "nil pool"}
	}
	ctx, traced := f.tel.BeginStartup(ctx) // holdfast.stage=startup, holdfast.startup span
	c, err := pool.Acquire(ctx)
	if err != nil {
		c, err = f.acquireAgain(ctx, pool, err, &f.startup, true)
	} else {
		f.tel.FirstTry(ctx, LayerStartup)
	}
	traced(err)
	if err != nil {
		return &StartupError{Verdict: f.classifier.Classify(err), Err: f.redact(err)}
	}
	a, made := c.Conn().PgConn().CustomData()[madeKey].(*attempt)
	c.Release()
	if made && a.ph.f == f {
		a.ph.attach(pool) // the layers learn their pool (blue/green sweeps, connection counts)
	}
	if !made || a.ph.f != f {
		return &ConfigError{Field: "pgxpool.Config.BeforeConnect",
			Why: "this factory's connect layer did not run for the pool's connection: the pool was not built from a config this factory configured, or BeforeConnect was replaced after Configure (set your hooks before Configure: holdfast chains them)"}
	}
	return nil
}

// BlueGreen returns the blue/green router of pool (WithBlueGreen), or nil:
// for its Status, Changed and LastSummary. The factory learns which pool a
// config became at the pool's first Acquire (NewPool and Start make one).
func (f *Factory) BlueGreen(pool *pgxpool.Pool) *bluegreen.Router {
	if f == nil || pool == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ph := range f.pools {
		if ph.bg != nil && ph.bg.Pool() == pool {
			return ph.bg
		}
	}
	return nil
}

// ErrInvalidConfig is matched by every *ConfigError.
var ErrInvalidConfig = errors.New("holdfast: invalid configuration")

// ConfigError reports a nil or nonsense option, policy or pool config. It is
// not retryable: fix the configuration.
type ConfigError struct {
	Field string // the option or argument at fault, for example "WithRetryPolicy" or "pgxpool.Config"
	Why   string
	Err   error // the underlying error, if any: a policy's or a package's own ConfigError
}

// Error returns "holdfast: invalid <Field>: <Why>", followed by ": <Err>"
// when Err is set.
func (e *ConfigError) Error() string {
	msg := "holdfast: invalid " + e.Field + ": " + e.Why
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns Err.
func (e *ConfigError) Unwrap() error { return e.Err }

// Is matches [ErrInvalidConfig].
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// ConnectError is a failed dial or password fetch of one connection, after
// the factory's retries. Err is a *retry.Error that says how many attempts
// were made and wraps the last failure. Whether it is worth trying again
// later is Err's Retryable.
type ConnectError struct {
	Layer string // LayerConnect or LayerPassword
	Err   error

	// Deprecated: use Layer, which has the same value.
	Stage string
}

func (e *ConnectError) Error() string {
	return "holdfast: " + e.Layer + ": " + e.Err.Error()
}

// Unwrap returns the *retry.Error.
func (e *ConnectError) Unwrap() error { return e.Err }

// ErrStartup is matched by every *StartupError.
var ErrStartup = errors.New("holdfast: first connection failed")

// StartupError says that a pool's first connection could not be made within
// the startup policy. Verdict classifies the cause: a Transient cause means
// the database may come back (report not-ready and try again later); a Fatal
// one is a mistake to fix (permission, database name, TLS).
type StartupError struct {
	Verdict classify.Verdict
	Err     error
}

func (e *StartupError) Error() string {
	return fmt.Sprintf("holdfast: first connection failed (%s %s): %v", e.Verdict.Class, e.Verdict.Reason, e.Err)
}

// Unwrap returns the last failure.
func (e *StartupError) Unwrap() error { return e.Err }

// Is matches ErrStartup.
func (e *StartupError) Is(target error) bool { return target == ErrStartup }
