package holdfast

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/internal/cfgerr"
	"github.com/holdfast-db/holdfast/internal/conn"
	"github.com/holdfast-db/holdfast/internal/obs"
	"github.com/holdfast-db/holdfast/retry"
)

// Factory plugs classification and bounded retry into pgxpool. Build one
// with New, then call Configure on each *pgxpool.Config (or use NewPool).
// It holds the configuration and the pools it configured; its engine
// (internal/conn) builds their connections. A Factory is safe for
// concurrent use; one Factory may configure many pools, which then share
// its retry budget. With WithBlueGreen or WithFailover, the pools'
// monitors run until Factory.Close (or ClosePool).
type Factory struct {
	e          *conn.Engine // builds every connection of the factory's pools
	classifier *classify.Classifier
	acquire    retry.Retrier // Factory.Acquire, layer "acquire"
	startup    retry.Retrier // NewPool's first connection, layer "startup"
	tx         retry.Retrier // the transaction runners, layer "transaction" (tx.go)

	meterProvider  metric.MeterProvider // WithMeterProvider; nil: the global one
	tracerProvider trace.TracerProvider // WithTracerProvider; nil: the global one

	poolName string           // WithPoolName
	failover *failover.Config // WithFailover, nil when off (ReaderConfig reads its aliases)
}

// Retry layers: where a failure happened and was retried. They are the
// values of ConnectError.Layer and of the holdfast.layer attribute of
// metrics, span events and log lines.
const (
	LayerConnect  = conn.LayerConnect  // a dial, inside pgx's DialFunc
	LayerPassword = conn.LayerPassword // a password or token fetch, inside BeforeConnect
	LayerAcquire  = conn.LayerAcquire  // Factory.Acquire, around pool.Acquire
	LayerStartup  = conn.LayerStartup  // NewPool's and Factory.Start's first connection
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
	if err := c.txPolicy.Validate(); err != nil {
		return nil, &ConfigError{Field: "WithTxPolicy", Why: "invalid policy", Err: err}
	}
	if !c.budgetSet {
		c.budget, _ = retry.NewBudget(retry.DefaultBudget()) // the default config is valid
	}
	// What was in flight decides first: a lost answer to a statement that
	// could commit is never retried, whatever broke the connection.
	rules := append([]classify.Rule{outcomeRule}, c.rules...)
	rules = append(rules, c.integrationRules...)
	rules = append(rules, panicRule, queuedRule)
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
	classifier := classify.New(rules...).WithTypes(c.typeRules...)
	tel, err := obs.New(obs.Config{
		MeterProvider:       c.meterProvider,
		TracerProvider:      c.tracerProvider,
		Logger:              c.logger,
		Classify:            classifier.Classify,
		NoOperationDuration: c.noOpDuration,
	})
	if err != nil {
		return nil, &ConfigError{Field: "WithMeterProvider", Why: "cannot create the instruments", Err: err}
	}
	if c.failover != nil && c.failover.Redact == nil {
		c.failover.Redact = tel.Redact // the monitors' log lines and Status carry no secret holdfast knows
	}
	var creds func(ctx context.Context, host string) (conn.Credentials, error)
	if fn := c.credentials; fn != nil {
		creds = func(ctx context.Context, host string) (conn.Credentials, error) {
			cr, err := fn(ctx, host)
			return conn.Credentials{User: cr.User, Password: cr.Password, TTL: cr.TTL}, err
		}
	}
	f := &Factory{
		classifier:     classifier,
		meterProvider:  c.meterProvider,
		tracerProvider: c.tracerProvider,
		poolName:       c.poolName,
		failover:       c.failover,
	}
	f.e = conn.New(conn.Config{
		Classifier:      classifier,
		Errors:          engineErrors,
		Password:        c.password,
		Credentials:     creds,
		Policy:          c.policy,
		Budget:          c.budget,
		Logger:          c.logger,
		Telemetry:       tel,
		GlobalProviders: c.meterProvider == nil && c.tracerProvider == nil,
		Dial:            c.dial,
		DialBy:          c.dialBy,
		Encrypted:       c.dialEncrypted,
		AuthRetry:       c.authRetry,
		Limit:           conn.Limit(c.connectLimit),
		PoolName:        c.poolName,
		BlueGreen:       c.blueGreen,
		Failover:        c.failover,
	})
	f.acquire = f.e.Retrier(c.policy, LayerAcquire)
	f.startup = f.e.Retrier(c.startup, LayerStartup)
	f.tx = f.e.Retrier(c.txPolicy, LayerTransaction)
	return f, nil
}

// Classify classifies err with the factory's rules (WithClassifier) and the
// built-in ones.
func (f *Factory) Classify(err error) classify.Verdict { return f.classifier.Classify(err) }

// Close stops and joins the monitors of every pool the factory configured
// (the blue/green monitors of WithBlueGreen, the failover monitors of
// WithFailover); their pools keep working with plain host names. It is
// idempotent. Close the pools first or after, in any order. After Close,
// Configure and NewPool return a *ConfigError.
func (f *Factory) Close() {
	if f == nil {
		return
	}
	f.e.Close()
}

// ClosePool closes pool and stops what the factory runs for it: its
// blue/green monitors, and its cluster's failover monitor when no other
// pool of the factory uses it. Use it for pools that come and go (one per
// tenant, one per job) under a long-lived factory: pool.Close alone leaves
// them running until Factory.Close. A pool this factory did not configure
// is only closed.
func (f *Factory) ClosePool(pool *pgxpool.Pool) {
	if pool == nil {
		return
	}
	p := f.e.PoolOf(pool)
	pool.Close()
	f.e.Forget(p)
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
	return c, f.e.Redact(err)
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
	return f.e.Redact(f.retryAcquire(ctx, pool, firstErr, &f.acquire, false, acquire))
}

// waitedBelow reports whether err was already retried at the dial or
// password layer (it carries a *retry.Error) or already held for its
// bound (blue/green's suspension, the admission queue): waiting for it
// again would multiply the bound.
func waitedBelow(err error) bool { return conn.WaitedBelow(err, queued) }

// queued reports whether err is a connect the admission limit did not
// admit.
func queued(err error) bool { return errors.Is(err, ErrQueued) }

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
	return f.e.Reacquire(ctx, pool, firstErr, r, patient, queued, acquire)
}

// NewPool configures cfg (unless this factory already did), builds the
// pool with pgxpool.NewWithConfig and makes the first connection under the
// startup policy, so that a pool that is returned has reached the
// database. When the first connection cannot be made, NewPool closes the
// pool (and its monitors) and returns a *StartupError.
func (f *Factory) NewPool(ctx context.Context, cfg *pgxpool.Config, opts ...PoolOption) (*pgxpool.Pool, error) {
	p := f.configured(cfg)
	if p == nil {
		if err := f.Configure(cfg, opts...); err != nil {
			return nil, err
		}
		p = f.configured(cfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		f.e.Forget(p)
		return nil, err
	}
	if err := f.Start(ctx, pool); err != nil {
		f.e.Forget(p)
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// configured returns this factory's binding of cfg, or nil.
func (f *Factory) configured(cfg *pgxpool.Config) *conn.Pool {
	if f == nil {
		return nil
	}
	return f.e.ConfigOf(cfg)
}

// Start makes pool's first connection under the startup policy and
// releases it to the pool (it starts nothing else: a pool's monitors
// start with its first connection, whatever makes it). It returns nil or
// a *StartupError wrapping the last failure. Failures already retried at
// the dial layer are retried again here: startup is more patient than a
// request, and still bounded. It returns a *ConfigError when the pool's
// connection was not made through this factory (a pool built from a
// config it did not configure, or whose BeforeConnect was replaced after
// Configure).
func (f *Factory) Start(ctx context.Context, pool *pgxpool.Pool) error {
	if pool == nil {
		return &ConfigError{Field: "pool", Why: "nil pool"}
	}
	ctx, traced := f.e.BeginStartup(ctx) // holdfast.stage=startup, holdfast.startup span
	c, err := pool.Acquire(ctx)
	if err != nil {
		c, err = f.acquireAgain(ctx, pool, err, &f.startup, true)
	} else {
		f.e.FirstTry(ctx, LayerStartup)
	}
	traced(err)
	if err != nil {
		return &StartupError{Verdict: f.classifier.Classify(err), Err: f.e.Redact(err)}
	}
	ok := f.e.Started(pool, c.Conn())
	c.Release()
	if !ok {
		return &ConfigError{Field: "pgxpool.Config.BeforeConnect",
			Why: "this factory's connect layer did not run for the pool's connection: the pool was not built from a config this factory configured, or BeforeConnect was replaced after Configure (set your hooks before Configure: holdfast chains them)"}
	}
	return nil
}

// BlueGreen returns the blue/green router of pool (WithBlueGreen), or nil:
// for its Status, Changed and LastSummary. It finds the pool's layers from
// its config: NewPool, or Configure and pgxpool.NewWithConfig, alike.
func (f *Factory) BlueGreen(pool *pgxpool.Pool) bluegreen.Router {
	if p := f.e.PoolOf(pool); p != nil {
		return p.BlueGreen()
	}
	return nil
}

// Failover returns the writer-failover monitor of pool's cluster, or nil
// when WithFailover is off, pool's endpoint gets no failover routing (an
// RDS Proxy, an Aurora global endpoint) or pool was not built from a
// config this factory configured. It finds the pool's layers from its
// config: NewPool, or Configure and pgxpool.NewWithConfig, alike.
func (f *Factory) Failover(pool *pgxpool.Pool) failover.Monitor {
	if p := f.e.PoolOf(pool); p != nil {
		if m := p.Failover(); m != nil {
			return m
		}
	}
	return nil
}

// Configure installs the factory into cfg, which must come from
// pgxpool.ParseConfig: classification and bounded retry around every dial
// (of the dial function of WithDialFunc or an integration such as
// cloudsql.With, else of cfg.ConnConfig.DialFunc, else pgx's), a fresh
// password per connection (WithPasswordFunc, rdsiam.With), blue/green
// routing (WithBlueGreen), writer-failover routing (WithFailover) and
// telemetry, composed in one declared order with the hooks already on
// cfg, which keep running after holdfast's (see the package
// documentation). Set your own hooks before Configure.
//
// Retries are counted per connection, not per dial: with sslmode=prefer pgx
// dials twice for one connection (TLS, then plain), and both dials draw on
// the same MaxAttempts.
//
// With WithBlueGreen or WithFailover, the pool's monitors start when the
// pool first connects, on goroutines that Factory.Close (or ClosePool)
// joins. They dial through the factory's dial path and fetch the
// factory's password, and never run the pool's own BeforeConnect.
//
// Configure returns a *ConfigError for a nil factory or config, for a
// config this factory already configured (configure a config once;
// NewPool accepts one that was), and after Close.
func (f *Factory) Configure(cfg *pgxpool.Config, opts ...PoolOption) error {
	if f == nil {
		return &ConfigError{Field: "Factory", Why: "nil factory: use holdfast.New"}
	}
	if cfg == nil {
		return &ConfigError{Field: "pgxpool.Config", Why: "nil config"}
	}
	if cfg.ConnConfig == nil {
		return &ConfigError{Field: "pgxpool.Config.ConnConfig", Why: "nil: build the config with pgxpool.ParseConfig"}
	}
	var po poolOptions
	for _, o := range opts {
		if o != nil {
			o(&po)
		}
	}
	if po.err != nil {
		return po.err
	}
	return f.e.Configure(cfg, po.name, po.instance)
}

// ErrInvalidConfig is matched by every *ConfigError.
var ErrInvalidConfig = cfgerr.ErrInvalid

// ConfigError reports a nil or nonsense option, argument or configuration
// field. It is not retryable: fix the configuration. Every package of
// holdfast reports its configuration errors with this one type
// (holdfast.ConfigError, bluegreen.ConfigError, failover.ConfigError, ...
// are the same), so one errors.As finds any of them; Error reads
// "holdfast: invalid <Field>: <Why>", and Unwrap returns Err.
type ConfigError = cfgerr.Error

// engineErrors make the face's errors for the engine.
var engineErrors = conn.Errors{
	Connect: func(layer string, err error) error { return &ConnectError{Layer: layer, Stage: layer, Err: err} },
	Queued: func(waited time.Duration, inFlight int, err error) error {
		return &QueuedError{Waited: waited, InFlight: inFlight, Err: err}
	},
	OutcomeUnknown: func(statement string, err error) error { return &OutcomeUnknownError{Statement: statement, Err: err} },
	Panic:          func(value any, stack []byte) error { return &PanicError{Value: value, Stack: stack} },
}

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
