package holdfast

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/internal/bgroute"
	"github.com/holdfast-db/holdfast/internal/conn"
	"github.com/holdfast-db/holdfast/internal/failovermon"
	"github.com/holdfast-db/holdfast/retry"
	"github.com/jackc/pgx/v5/pgconn"
)

// An Option configures a Factory. Options are checked by New, in any
// order; the first invalid one makes New return its *ConfigError.
type Option func(*config)

// config holds every setting; defaults lives in one place, below.
type config struct {
	password    func(ctx context.Context, host string) (string, error)
	credentials func(ctx context.Context, host string) (Credentials, error) // Integration.Credentials
	passwordBy  string                                                      // the option that set password or credentials
	rules       []classify.Rule
	policy      retry.Policy
	policySet   bool // WithRetryPolicy was given
	startup     retry.Policy
	startupSet  bool // WithStartupPolicy was given
	txPolicy    retry.Policy

	dial          pgconn.DialFunc // Integration.Dial
	dialBy        string
	dialEncrypted bool
	authRetry     bool // Integration.RetryAuthFailure

	integrationRules   []classify.Rule
	typeRules          []classify.TypeRule
	integrationPolicy  *retry.Policy
	integrationStartup *retry.Policy

	budget        *retry.Budget
	budgetSet     bool
	logger        *slog.Logger
	blueGreen     *bluegreen.Config
	failover      *failover.Config
	outage        Outage
	serverless    *ServerlessV2Config // WithServerlessV2
	connectLimit  ConnectLimit
	invalidOption error

	meterProvider  metric.MeterProvider // nil: the global one
	tracerProvider trace.TracerProvider // nil: the global one
}

// defaults returns the configuration New starts from.
func defaults() config {
	return config{
		policy:   retry.Default(),
		startup:  doubling(5, 200*time.Millisecond, 2*time.Second, 0.2, 30*time.Second),
		txPolicy: doubling(3, 20*time.Millisecond, 200*time.Millisecond, 0.5, 10*time.Second),
		logger:   slog.New(slog.DiscardHandler),
	}
}

// doubling is a policy of attempts in all, the delay between them doubling
// from initial to at most limit, with jitter, overall bounding the retries
// (MaxElapsed) and no bound on an attempt: the defaults of
// WithStartupPolicy and WithTxPolicy, as their docs put them.
func doubling(attempts int, initial, limit time.Duration, jitter float64, overall time.Duration) retry.Policy {
	return retry.Policy{
		MaxAttempts:     attempts,
		InitialInterval: initial,
		Multiplier:      2,
		Jitter:          jitter,
		MaxInterval:     limit,
		MaxElapsed:      overall,
	}
}

func (c *config) fail(err error) {
	if c.invalidOption == nil {
		c.invalidOption = err
	}
}

// WithPasswordFunc makes every new connection fetch a fresh password or IAM
// token from fn (an RDS IAM auth token, a Cloud SQL IAM login token, a
// secret that rotates). fn is called from pgxpool's BeforeConnect, on the
// goroutine building the connection, with a context that carries the
// Acquire caller's values but not its cancellation; it must honour ctx.
//
// host is the name of the server the connection reaches, to issue a token
// for (an RDS IAM token is signed for a host name): the connection's host
// (the pool config's Host, or the fallback host pgx dials), except when
// blue/green routing (WithBlueGreen) sends the connection to a server
// that answers to another name. During a switchover's POST phase a blue
// name leads to green, which answers to its green name until green takes
// the blue names; host is then the green name, or the blue name once the
// metadata shows the rename, and the one retry with a fresh token after a
// 28000 is issued for the other of the two names, as the AWS JDBC wrapper
// does. The blue/green monitors' connections get a token for their own
// server's name. A function that needs no host ignores it.
//
// Transient failures of fn (a token endpoint returning 503) are retried
// under the retry policy; fatal ones fail the connect at once; each call is
// bounded by the policy's AttemptTimeout; a panic is recovered into a
// Fatal error ("panic", logged at ERROR with its stack). When fn is set, a
// connection refused with SQLSTATE 28000 (an expired or rejected token)
// gets one more attempt with a freshly fetched token, on every path of the
// pool; a 28P01, after which pgx tries nothing more within the connect,
// gets it from Factory.Acquire and Factory.Start. The value returned by fn
// is never logged, and is removed from the errors holdfast returns.
//
// For a user and a password that come together and may be cached (a
// secrets manager's secret), give an Integration with Credentials
// instead (package rdssecrets does).
func WithPasswordFunc(fn func(ctx context.Context, host string) (string, error)) Option {
	return nonNil(fn == nil, "WithPasswordFunc", "function", func(c *config) { c.setPassword("WithPasswordFunc", fn, nil) })
}

// nonNil returns an Option that calls set, or that fails the
// configuration when the argument of option, a what, is nil.
func nonNil(isNil bool, option, what string, set func(*config)) Option {
	return func(c *config) {
		if isNil {
			c.fail(&ConfigError{Field: option, Why: "the " + what + " is nil"})
			return
		}
		set(c)
	}
}

// setPassword sets the factory's password or credentials function (one
// of them), set by the option or integration by.
func (c *config) setPassword(by string, pw func(context.Context, string) (string, error), cr func(context.Context, string) (Credentials, error)) {
	if c.password != nil || c.credentials != nil {
		c.fail(&ConfigError{Field: by, Why: "a password function is already set by " + c.passwordBy})
		return
	}
	c.password, c.credentials, c.passwordBy = pw, cr, by
}

// WithIntegration applies in to the factory (see [Integration]). A factory
// takes at most one Dial and one password or credentials function: two
// integrations that both set one, or an Integration's together with
// WithPasswordFunc, make New return a *ConfigError.
func WithIntegration(in Integration) Option {
	return func(c *config) {
		name := in.Name
		if name == "" {
			name = "WithIntegration"
		}
		if in.Err != nil {
			c.fail(&ConfigError{Field: name, Why: "invalid arguments", Err: in.Err})
			return
		}
		for _, r := range in.Rules {
			if r == nil {
				c.fail(&ConfigError{Field: name, Why: "a classification rule is nil"})
				return
			}
		}
		if in.Dial != nil {
			if c.dial != nil {
				c.fail(&ConfigError{Field: name, Why: "a dial function is already set by " + c.dialBy})
				return
			}
			c.dial, c.dialBy, c.dialEncrypted = in.Dial, name, in.Encrypted
		}
		switch {
		case in.Password != nil && in.Credentials != nil:
			c.fail(&ConfigError{Field: name, Why: "both Credentials and a password function are set"})
			return
		case in.Password != nil, in.Credentials != nil:
			c.setPassword(name, in.Password, in.Credentials)
		}
		c.authRetry = c.authRetry || in.RetryAuthFailure
		c.integrationRules = append(c.integrationRules, in.Rules...)
		c.typeRules = append(c.typeRules, in.TypeRules...)
		if in.RetryPolicy != nil {
			c.integrationPolicy = in.RetryPolicy
		}
		if in.StartupPolicy != nil {
			c.integrationStartup = in.StartupPolicy
		}
	}
}

// WithClassifier adds rules that the factory consults, in order, before the
// built-in classify rules: use it for another SDK's error types. One rule
// runs before them: a statement or COMMIT whose answer was lost is Fatal
// "outcome-unknown" whatever broke its connection ([ErrOutcomeUnknown]),
// Transient "lost-on-standby" on a server in hot standby.
func WithClassifier(rules ...classify.Rule) Option {
	return func(c *config) {
		for _, r := range rules {
			if r == nil {
				c.fail(&ConfigError{Field: "WithClassifier", Why: "a rule is nil"})
				return
			}
		}
		c.rules = append(c.rules, rules...)
	}
}

// WithRetryPolicy sets the policy for connect-level retries (each dial,
// each password fetch) and for Factory.Acquire. Default: retry.Default().
func WithRetryPolicy(p retry.Policy) Option {
	return func(c *config) { c.policy, c.policySet = p, true }
}

// WithStartupPolicy sets the policy of a pool's first connection (NewPool,
// Factory.Start). Default: 5 attempts, 200ms doubling to at most 2s with
// 20% jitter, 30s overall: more patient than the request-scope default
// because nothing is waiting on a user request yet, and still bounded, so
// that a dead database fails startup instead of looping: its MaxElapsed
// bounds the whole startup, counted from the call, the first connection
// included. Each attempt is a connection with the retry policy's dials
// (with the defaults, 5 attempts of 3 dials, about 4.5 s against a refused
// port). This policy alone bounds a startup: its retries and its
// connections' dial retries are neither charged to the retry budget
// (WithRetryBudget) nor refused by it, so that a service started before
// its database comes up. A refused port and a
// missing Unix socket (a Cloud SQL Auth Proxy sidecar in unix-socket mode
// that starts after this service: classify's "socket-missing") are waited
// for within this bound; raise MaxAttempts and MaxElapsed if the proxy or
// the database may take longer to come up.
func WithStartupPolicy(p retry.Policy) Option {
	return func(c *config) { c.startup, c.startupSet = p, true }
}

// WithTxPolicy sets the policy of the transaction runner (Factory.RunTx,
// sqldb.RunTx). Default: 3 runs in all, 20 ms doubling to at most 200 ms
// between them with 50 % jitter (two transactions that conflicted should
// not meet again), 10 s overall (from the call; a first run that takes
// longer ends at its own bound); the caller's deadline bounds it too, and
// a run is not bounded (a transaction takes what it takes) unless the
// policy's AttemptTimeout is set.
func WithTxPolicy(p retry.Policy) Option {
	return func(c *config) { c.txPolicy = p }
}

// WithRetryBudget sets the retry budget: a token bucket that every
// request-scope retry of the factory's pools draws on (each connection's
// dials, lookups and password fetches, Factory.Acquire's, the transaction
// runner's) and every completed connection refills, so that an outage
// cannot turn into a retry storm (see retry.Budget). A pool's startup
// (NewPool, Start, sqldb.Open) draws nothing from it: the startup policy
// bounds it (WithStartupPolicy).
//
// Default: a budget of the factory's own, relative to demand: gRPC's retry
// throttling, as retry.DemandBudget() (every failed attempt, first
// attempts included, takes a token; a retry runs only while more than half
// the bucket is left), with 20 tokens (retry.BudgetConfig{Capacity: 20,
// FailureCost: 1, Threshold: 10, SuccessRefill: 0.1, RefillPerSecond:
// 0.5}). A lone failure is retried at once and a lone connect keeps its
// three dials; a burst of failures across the factory's pools gets 9
// retries (a failover's or a switchover's first second), and then retries
// stop until completed connections and time refill the bucket, however
// many requests fail. In the storm simulation, with nothing else, a fleet
// in a 30 s outage retries 1.5 to 12.5 % of its first attempts at 20 to 2
// requests per second per pod; with the outage hold, which makes requests
// wait instead, 0.1 to 3.3 %. retry.DemandBudget() (2 retries in a burst:
// 0.3 to 3.3 % with nothing else) is stingier, too stingy for a failover's
// first second. Until this default, it was retry.DefaultBudget(), the
// plain bucket (about 20 retries at once, then one every 5 seconds,
// whatever the demand: 41 % of a quiet fleet's first attempts); pass
// retry.NewBudget(retry.DefaultBudget()) to keep it.
//
// It belongs to the factory, as gRPC's retry throttling belongs to a client
// connection (one target) and the AWS SDK's retry quota to a client: one
// dead database spends its factory's budget and no other's. Build one
// factory per database (per target); for one cap on the whole process,
// build one budget with retry.NewBudget and pass it to every factory. nil
// retries without a budget (not recommended outside tests).
func WithRetryBudget(b *retry.Budget) Option {
	return func(c *config) { c.budget, c.budgetSet = b, true }
}

// ConnectLimit is the admission limit of a pool's new connections, given
// to [WithConnectLimit]; every pool of the factory gets a limiter of its
// own. The zero value is the default.
type ConnectLimit struct {
	// InFlight is how many connects of one pool may be in flight at once
	// (from the first dial to the end of the handshake, retries
	// included). 0: the default, max(2, MaxConns/4) of the pool's config
	// (a quarter of the pool refills an empty pool in four connect
	// latencies while a wave of reconnects is a quarter of what pgxpool
	// alone would send; at least two, so that a connect stuck on a hung
	// server does not stop every other); negative: no limit.
	InFlight int
	// PerSecond is how many new connects one pool may start per second
	// (a token bucket); 0: no rate limit. It must not be negative.
	PerSecond float64
	// Burst is how many connects the rate lets through at once; 0: 1.
	// Only with PerSecond.
	Burst int
}

// WithConnectLimit sets the admission limit of new connections of the
// factory's pools (see [ConnectLimit]; the default is ConnectLimit{}:
// max(2, MaxConns/4) connects in flight per pool, no rate). A connect that
// finds no slot waits, bounded by the earliest of the caller's deadline
// (Factory.Acquire passes it), the retry policy's MaxElapsed (else its
// AttemptTimeout) and pgx's ConnectTimeout; one that waited is counted
// (holdfast.connect.queued) and its wait recorded on its connect span.
// One whose wait ended unadmitted fails with an error that matches
// [ErrQueued]. ConnectLimit{InFlight: -1} turns the limit off.
func WithConnectLimit(l ConnectLimit) Option {
	return func(c *config) {
		if err := l.validate(); err != nil {
			c.fail(err)
			return
		}
		c.connectLimit = l
	}
}

func (l ConnectLimit) validate() error {
	bad := func(field, why string) error {
		return &ConfigError{Field: "WithConnectLimit", Why: "invalid ConnectLimit",
			Err: &ConfigError{Field: field, Why: why}}
	}
	switch {
	case math.IsNaN(l.PerSecond) || math.IsInf(l.PerSecond, 0) || l.PerSecond < 0:
		return bad("PerSecond", fmt.Sprintf("%v: must be a finite number, zero or more (zero: no rate)", l.PerSecond))
	case l.Burst < 0:
		return bad("Burst", "must not be negative (zero means 1)")
	case l.Burst > 0 && l.PerSecond == 0:
		return bad("Burst", "a burst without a rate: set PerSecond too")
	case l.PerSecond > 0 && l.PerSecond < 1e-3:
		return bad("PerSecond", "below one connect in 1,000 s: a pool could not replace a connection")
	}
	return nil
}

// WithLogger sets the logger. Default: discard (holdfast writes nothing
// unless given a logger). A WARN line per retried failure, with the retry
// layer ("holdfast.layer": connect, password, acquire, startup,
// transaction), attempt, delay, error.class, error.reason, the service
// stage ("holdfast.stage": startup, pool-growth, request) and the error
// text, from which passwords, tokens and connection-string secrets are
// removed; a WARN line when a loop gives up on a transient failure; an
// INFO "holdfast: recovered" line when a retried operation succeeds
// (attempts, took). During startup the connection's own dial and password
// retries write those lines at DEBUG: the startup loop writes one WARN
// line per round, with the round's error (its cause and attempts, one
// line). Every line names the database (server.address,
// server.port, db.namespace, and holdfast.pool with PoolName). Lines of
// one kind (message, layer, stage, reason, database) are written at most
// once a second; the next one says how many were suppressed. A panicking
// password function is logged at ERROR with its stack. Every line and its
// attributes:
// https://github.com/holdfast-db/holdfast/blob/main/docs/telemetry.md#log-lines.
func WithLogger(l *slog.Logger) Option {
	return nonNil(l == nil, "WithLogger", "logger", func(c *config) { c.logger = l })
}

// WithMeterProvider sets the OpenTelemetry meter provider of the factory's
// metrics. Default: the global provider (otel.GetMeterProvider()), so an
// application that installed its SDK gets holdfast's metrics for free.
//
// Pools are instrumented when, at Configure, the meter or the tracer
// provider is real; with no-op providers Configure installs no tracer and
// Acquire costs exactly what it costs in pgxpool. With the global providers
// before the application installs its SDK, connections made after the SDK
// is installed are instrumented (connect spans and metrics, statement
// durations, connection counts once the pool is attached by Start); the
// acquire and release metrics need the SDK at Configure. With the SDK,
// Acquire costs one small allocation and three histogram records per
// Acquire, statement and Release.
//
// The instruments and their attributes are listed in the repository's
// telemetry page
// (https://github.com/holdfast-db/holdfast/blob/main/docs/telemetry.md).
// An application that also records
// db.client.operation.duration with another tracer (otelpgx) keeps one of
// the two with an OpenTelemetry view: drop the instrument of one scope
// (sdkmetric.NewView with sdkmetric.Instrument{Name:
// "db.client.operation.duration", Scope: instrumentation.Scope{Name:
// "github.com/holdfast-db/holdfast"}} and sdkmetric.AggregationDrop{}).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return nonNil(mp == nil, "WithMeterProvider", "provider", func(c *config) { c.meterProvider = mp })
}

// WithTracerProvider sets the OpenTelemetry tracer provider of the
// factory's spans. Default: the global provider (otel.GetTracerProvider()).
// See WithMeterProvider for when pools are instrumented.
//
//	holdfast.connect    one per connection a pool opens (kind client), from
//	                    BeforeConnect to the end of pgx's connect; one
//	                    holdfast.attempt event per password fetch and dial
//	                    attempt (holdfast.layer, holdfast.attempt,
//	                    holdfast.outcome, error.type, holdfast.error.class,
//	                    holdfast.retry.delay in seconds); status Error with
//	                    the classified verdict on failure
//	holdfast.acquire    Factory.Acquire's request-scope retry, from the
//	                    first failure, with one event per attempt
//	holdfast.startup    Factory.Start (and NewPool), with one event per attempt
//	holdfast.bluegreen.switchover  a switchover (WithBlueGreen), from
//	                    PREPARATION to its end, one event per phase; a held
//	                    connect, Acquire or statement gets
//	                    holdfast.bluegreen.suspended.duration (seconds) and
//	                    .reason on its span, and a link to this span
//
// Spans never carry error text, passwords or tokens.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return nonNil(tp == nil, "WithTracerProvider", "provider", func(c *config) { c.tracerProvider = tp })
}

// WithBlueGreen enables RDS and Aurora blue/green switchover routing (see
// package bluegreen) for every pool the factory configures. The zero
// bluegreen.Config works: every zero field takes its documented default.
// When c.Logger is nil and WithLogger was given, the factory's logger is
// used (else nothing is logged).
//
// Each pool then gets two monitor goroutines, each with its own connection
// outside the pool, started when the pool first connects: call
// Factory.Close when the pools are closed to stop them (or
// Factory.ClosePool for one pool). The factory's classifier also learns
// the package's errors (bluegreen.Rule): a wait that reached its bound is
// Transient, a rejected green host name Fatal.
func WithBlueGreen(c bluegreen.Config) Option {
	return func(cfg *config) {
		if err := bgroute.Validate(c); err != nil {
			cfg.fail(&ConfigError{Field: "WithBlueGreen", Why: "invalid bluegreen.Config", Err: configErr(err)})
			return
		}
		cfg.blueGreen = &c
	}
}

// WithFailover turns on writer-failover routing (package failover) for
// every pool the factory configures on an Aurora or RDS Multi-AZ DB
// cluster: a monitor per cluster reads its topology and watches its
// writer; connections by the writer endpoint are held while no writer is
// known, sent to the new writer while DNS lags, and refused when they land
// on a reader; connections to the old writer are cut. Its monitors start
// with the pools' first connections, and Factory.Close joins them. The
// factory's classifier learns the package's errors (failover.Rule). It
// works alongside WithBlueGreen. A pool on a name of your own for an RDS
// endpoint (a CNAME) is routed as one on that endpoint when
// failover.Config.Aliases names it.
func WithFailover(c failover.Config) Option {
	return func(cfg *config) {
		if err := failovermon.Validate(c); err != nil {
			cfg.fail(&ConfigError{Field: "WithFailover", Why: "invalid failover.Config", Err: configErr(err)})
			return
		}
		c.Aliases = maps.Clone(c.Aliases) // the caller's map may change later
		cfg.failover = &c
	}
}

// Outage configures what the factory's pools do while their database is
// down, given to [WithOutage]. The zero value is the default: on, HoldFor
// 30 s.
//
// While a pool's database is down (the pool connected once, then a dial
// or handshake fails, or its token cannot be fetched, and a check
// confirms it; or only a read-only server answers a pool meant for
// writes), one prober per pool checks it with
// backoff and is the only one to connect; a request that needs a new
// connection waits for it to come back, within its own deadline and
// HoldFor, and fails with a [*DatabaseDownError] when one ends first. No
// request retries on its own meanwhile, and waiting spends no retry
// budget. "holdfast: database down" (WARN, once) and "holdfast: database
// back" (INFO, with the downtime) are logged, and holdfast.database.down
// is 1 meanwhile; package readiness reads the state. A database that
// moved to another address (a DNS-only failover) is followed at once, and
// a pool meant for writes leaves a primary that was demoted. See the
// repository's guide (docs/guide.md, "When the database is down") for the
// states, the prober's pace and the costs.
type Outage struct {
	// HoldFor bounds how long a request that needs a new connection waits
	// for its database to come back (its own deadline ends the wait when
	// sooner). 0 means 30 s: a restart (seconds) and a Cloud SQL or
	// Patroni failover (tens of seconds) fit in it, and so does the
	// deadline of most requests (an HTTP request is seldom given more
	// than 30 s), which then decides alone; a request without a deadline
	// (a job, a migration) waits 30 s at most, then fails instead of
	// hanging; an RDS Multi-AZ instance's failover (60 to 120 s) is
	// longer: its requests fail after 30 s, each. Negative: no wait, a
	// request that needs a new connection while the database is down
	// fails at once (nothing is dialed for it either).
	HoldFor time.Duration
	// Off turns the outage layer off: the pools behave as before it (each
	// connect retries on its own under the retry policy and the budget;
	// a demoted primary's connections stay).
	Off bool
}

// defaultHoldFor is Outage.HoldFor's default.
const defaultHoldFor = 30 * time.Second

// WithOutage configures what the factory's pools do while their database
// is down (see [Outage]; default: on, HoldFor 30 s). Outage{Off: true}
// turns it off.
func WithOutage(o Outage) Option {
	return func(c *config) { c.outage = o }
}

// engineOutage is the engine's configuration of o: nil when off.
func engineOutage(o Outage, sv *ServerlessV2Config) *conn.Outage {
	if o.Off {
		return nil
	}
	if o.HoldFor == 0 {
		o.HoldFor = defaultHoldFor
	}
	return &conn.Outage{HoldFor: o.HoldFor, Wake: engineWake(sv)}
}

// A PoolOption configures one pool in [Factory.Configure],
// [Factory.NewPool] or [Factory.NewReadWrite].
type PoolOption func(*poolOptions)

type poolOptions struct {
	name     string
	instance *failover.InstanceMode // PoolInstanceMode; nil: failover.Config.InstancePools
	err      error
}

// PoolName names one pool in log lines (holdfast.pool), metrics
// (db.client.connection.pool.name) and readiness checks (their
// componentId). Default: "host:port/database" in log lines and metrics,
// which readiness never serves. Give each pool of a service its own name,
// such as "orders" and "orders-replica": the name is a label of every
// holdfast metric, so keep it one per pool, never per connection or
// request. A name already used by another pool of the factory gets a
// suffix ("orders-2").
func PoolName(name string) PoolOption {
	return func(o *poolOptions) {
		if name == "" {
			o.err = &ConfigError{Field: "PoolName", Why: "empty name"}
			return
		}
		o.name = name
	}
}

// PoolInstanceMode chooses, for one pool on an instance endpoint, what
// failover.Config.InstancePools chooses for the factory's: failover.Pinned
// keeps it on its instance, failover.FollowWriter routes it to the writer
// of the moment (strict-writer). It has no effect without WithFailover or
// on a pool on another kind of endpoint. An invalid mode is a
// *ConfigError.
func PoolInstanceMode(mode failover.InstanceMode) PoolOption {
	return func(o *poolOptions) {
		if err := failovermon.ValidateMode(mode, "PoolInstanceMode"); err != nil {
			o.err = configErr(err)
			return
		}
		o.instance = &mode
	}
}

// poolOptionsOf applies opts.
func poolOptionsOf(opts []PoolOption) (poolOptions, error) {
	var po poolOptions
	for _, o := range opts {
		if o != nil {
			o(&po)
		}
	}
	return po, po.err
}
