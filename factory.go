package holdfast

import (
	"context"
	"log/slog"
	"time"

	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/internal/conn"
	"github.com/holdfast-db/holdfast/internal/obs"
	"github.com/holdfast-db/holdfast/retry"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Factory plugs classification and bounded retry into pgxpool. Build one
// with New, then build pools with NewPool (or call Configure on a
// *pgxpool.Config and build the pool yourself). It holds the
// configuration and the pools it configured, and builds their
// connections. A Factory is safe for concurrent use; one
// Factory may configure many pools, which then share its retry budget.
// With WithBlueGreen or WithFailover, the pools' monitors run until
// Factory.Close (or ClosePool).
type Factory struct {
	e          *conn.Engine // builds every connection of the factory's pools
	classifier *classify.Classifier
	txVerdict  *classify.Classifier // the transaction runner's verdict (tx.go)
	tx         retry.Retrier        // the transaction runner's, layer "transaction"
	failover   *failover.Config     // WithFailover, nil when off (NewReadWrite reads its aliases)
}

// defaultBudget is the retry budget of a factory built without
// WithRetryBudget: relative to demand, with retry.DemandBudget's rule
// (gRPC's retry throttling: every failed attempt takes a token, a retry
// runs only while more than half the bucket is left) and a bucket of 40
// tokens, so that a burst of failures across a factory's pools gets 19
// retries where DemandBudget's 5 tokens give 2, about the plain bucket's
// 20. That burst is a failover's or a switchover's first second, before
// the routing layers hold: with 2 the failover demo loses 1 to 38
// requests (examples/failover, TestFailover/crash), with 4 up to 3, with
// 9 up to 10 on a loaded machine, with 19 none. A sustained outage then
// drains it, and its first attempts keep it below half: no retry until
// completed connections (0.1 each) and time (0.5 a second) refill it. The
// outage hold (issue 30) is what keeps a fleet's retries within a few per
// pod; until it lands, this budget alone allows about 20 per pod per
// outage. internal/storm's "holdfast defaults" use the same config
// (TestStormUsesTheDefaultBudget).
var defaultBudget = retry.BudgetConfig{Capacity: 40, FailureCost: 1, Threshold: 20, SuccessRefill: 0.1, RefillPerSecond: 0.5}

// New returns a Factory built from opts, or a *ConfigError if an option is
// nil or a policy or budget makes no sense. The options and their defaults
// are listed in the package doc. An integration's policies replace the
// defaults, unless WithRetryPolicy or WithStartupPolicy is given. Two
// options that set the dial or the password function, or any invalid
// option, make New return a *ConfigError.
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
	if c.serverless != nil {
		if c.outage.Off {
			return nil, &ConfigError{Field: "WithServerlessV2", Why: "needs the outage layer, which WithOutage turns off"}
		}
		if !c.startupSet {
			c.startup = doubling(10, 200*time.Millisecond, 2*time.Second, 0.2, c.serverless.WakeFor)
		}
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
		c.budget, _ = retry.NewBudget(defaultBudget) // the default config is valid
	}
	// What was in flight decides first: a lost answer to a statement that
	// could commit is never retried, whatever broke the connection.
	rules := append([]classify.Rule{outcomeRule}, c.rules...)
	rules = append(rules, c.integrationRules...)
	rules = append(rules, conn.Rules()...)
	rules = append(rules, functionRule)
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
		MeterProvider:  c.meterProvider,
		TracerProvider: c.tracerProvider,
		Logger:         c.logger,
		Classify:       classifier.Classify,
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
	f := &Factory{classifier: classifier, failover: c.failover}
	f.txVerdict = classify.New(txRules(f)...)
	f.e = conn.New(conn.Config{
		Classifier:      classifier,
		Errors:          engineErrors,
		Password:        c.password,
		Credentials:     creds,
		Policy:          c.policy,
		StartupPolicy:   c.startup,
		Budget:          c.budget,
		Logger:          c.logger,
		Telemetry:       tel,
		GlobalProviders: c.meterProvider == nil && c.tracerProvider == nil,
		Dial:            c.dial,
		DialBy:          c.dialBy,
		Encrypted:       c.dialEncrypted,
		AuthRetry:       c.authRetry,
		Limit:           conn.Limit(c.connectLimit),
		BlueGreen:       c.blueGreen,
		Failover:        c.failover,
		Outage:          engineOutage(c.outage, c.serverless),
	})
	f.tx = f.e.Retrier(c.txPolicy, conn.LayerTransaction)
	return f, nil
}

// Configure installs the factory into cfg, which must come from
// pgxpool.ParseConfig, for a pool you build yourself with
// pgxpool.NewWithConfig (NewPool does both, and makes the first
// connection): classification and bounded retry around every dial (of an
// integration's dial, such as cloudsql.With's, else of
// cfg.ConnConfig.DialFunc, else pgx's), a fresh password per connection
// (WithPasswordFunc, rdsiam.With), blue/green routing (WithBlueGreen),
// writer-failover routing (WithFailover) and telemetry, composed in one
// declared order with the hooks already on cfg, which keep running after
// holdfast's (the layers and their order:
// https://github.com/holdfast-db/holdfast/blob/main/docs/guide.md#layers).
// Set your own hooks before Configure.
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
	switch {
	case f == nil:
		return &ConfigError{Field: "Factory", Why: "nil factory: use holdfast.New"}
	case cfg == nil:
		return &ConfigError{Field: "pgxpool.Config", Why: "nil config"}
	case cfg.ConnConfig == nil:
		return &ConfigError{Field: "pgxpool.Config.ConnConfig", Why: "nil: build the config with pgxpool.ParseConfig"}
	}
	po, err := poolOptionsOf(opts)
	if err != nil {
		return err
	}
	return f.e.Configure(cfg, po.name, po.instance)
}

// NewPool configures cfg (unless this factory already did), builds the
// pool with pgxpool.NewWithConfig and makes the first connection under the
// startup policy (Start), so that a pool that is returned has reached the
// database. When the first connection cannot be made, NewPool closes the
// pool (and its monitors) and returns Start's *ConnectError.
func (f *Factory) NewPool(ctx context.Context, cfg *pgxpool.Config, opts ...PoolOption) (*pgxpool.Pool, error) {
	if f == nil {
		return nil, &ConfigError{Field: "Factory", Why: "nil factory: use holdfast.New"}
	}
	p := f.e.ConfigOf(cfg)
	if p == nil {
		if err := f.Configure(cfg, opts...); err != nil {
			return nil, err
		}
		p = f.e.ConfigOf(cfg)
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

// NewPoolFromDSN is [Factory.NewPool] for a connection string, as
// pgxpool.New is pgxpool.NewWithConfig for one: it parses dsn with
// pgxpool.ParseConfig (a postgres:// URL or key=value pairs, pgxpool's
// pool_max_conns and the like included) and builds the pool as NewPool
// does, first connection included. A dsn that does not parse is a
// *ConfigError of Field "dsn" whose Err is pgx's *pgconn.ParseConfigError
// (its text masks the password, as pgx's does). To set hooks on the
// config, parse it yourself and call NewPool.
func (f *Factory) NewPoolFromDSN(ctx context.Context, dsn string, opts ...PoolOption) (*pgxpool.Pool, error) {
	if f == nil {
		return nil, &ConfigError{Field: "Factory", Why: "nil factory: use holdfast.New"}
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, &ConfigError{Field: "dsn", Why: "not a pgx connection string", Err: err}
	}
	return f.NewPool(ctx, cfg, opts...)
}

// Start makes pool's first connection under the startup policy and
// releases it to the pool, for a pool built from a config Configure
// installed (NewPool calls it). It starts nothing else: a pool's monitors
// start with its first connection, whatever makes it. It returns nil, or
// a *ConnectError of Layer "startup" wrapping the last failure (classify
// it with Factory.Classify: Transient, the database may come back;
// Fatal, a mistake to fix). Failures already retried at the dial layer are
// retried again here: startup is more patient than a request, and still
// bounded: it ends within the startup policy's MaxElapsed from the call,
// its first connection included. It returns a *ConfigError when the pool's connection was not
// made through this factory (a pool built from a config it did not
// configure, or whose BeforeConnect was replaced after Configure).
func (f *Factory) Start(ctx context.Context, pool *pgxpool.Pool) error {
	if pool == nil {
		return &ConfigError{Field: "pool", Why: "nil pool"}
	}
	return f.e.Start(ctx, pool)
}

// Acquire is pool.Acquire with request-scope retry; most code needs only
// the pool's own paths (pool.Query, Exec, Begin, ...), which retry a
// connect's transient failures inside the connect (the dial, the password
// fetch and the startup handshake: 57P03, 53300, 57P01, a reset, a 28000
// with a fresh token). Acquire adds what only a new connect config can
// do: one retry of a 28P01 with a freshly fetched token (pgx stops a
// connect at 28P01), and a retry of a failure that the connect could not
// see why it failed. Use it, or [Factory.DBTX] which takes every
// connection through it, with a password or token function. Failures
// already retried below are returned as they are, so retries do not
// multiply. It is safe: no statement has been sent. Its error carries no
// secret holdfast knows.
//
// When nothing fails, Acquire costs what pool.Acquire costs.
func (f *Factory) Acquire(ctx context.Context, pool *pgxpool.Pool) (*pgxpool.Conn, error) {
	if pool == nil {
		return nil, &ConfigError{Field: "pool", Why: "nil pool"}
	}
	return f.e.Acquire(ctx, pool)
}

// Classify classifies err with the factory's rules (WithClassifier, the
// integrations', the packages' it uses) and the built-in ones.
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
// RDS Proxy, an Aurora global endpoint without
// failover.Config.Global.Regions) or pool was not built from a config
// this factory configured. It finds the pool's layers from its config:
// NewPool, or Configure and pgxpool.NewWithConfig, alike.
func (f *Factory) Failover(pool *pgxpool.Pool) failover.Monitor {
	if p := f.e.PoolOf(pool); p != nil {
		if m := p.Failover(); m != nil {
			return m
		}
	}
	return nil
}
