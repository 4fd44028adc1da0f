package holdfast

import (
	"context"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/internal/failovermon"
	"github.com/holdfast-db/holdfast/retry"
)

// An Option configures a Factory. Options are checked by New.
type Option func(*config)

// config holds every setting; defaults lives in one place, below.
type config struct {
	password    func(ctx context.Context, host string) (string, error)
	credentials func(ctx context.Context, host string) (Credentials, error) // WithCredentialsFunc (credentials.go)
	passwordBy  string                                                      // the option that set password or credentials
	rules       []classify.Rule
	policy      retry.Policy
	policySet   bool // WithRetryPolicy was given
	startup     retry.Policy
	startupSet  bool // WithStartupPolicy was given
	txPolicy    retry.Policy
	txPolicySet bool // WithTxPolicy was given

	dial          pgconn.DialFunc // Integration.Dial
	dialBy        string
	dialEncrypted bool
	authRetry     bool // Integration.RetryAuthFailure
	poolName      string
	noOpDuration  bool // WithOperationDuration(false)

	integrationRules   []classify.Rule
	typeRules          []classify.TypeRule
	integrationPolicy  *retry.Policy
	integrationStartup *retry.Policy

	budget        *retry.Budget
	budgetSet     bool
	logger        *slog.Logger
	blueGreen     *bluegreen.Config
	failover      *failover.Config
	connectLimit  ConnectLimit // WithConnectLimit (admit.go)
	invalidOption error

	meterProvider  metric.MeterProvider // WithMeterProvider (telemetry.go); nil: global
	tracerProvider trace.TracerProvider // WithTracerProvider (telemetry.go); nil: global
}

// defaults returns the configuration New starts from.
func defaults() config {
	return config{
		policy:   retry.Default(),
		startup:  DefaultStartupPolicy(),
		txPolicy: DefaultTxPolicy(),
		logger:   slog.New(slog.DiscardHandler),
	}
}

// DefaultStartupPolicy is the policy NewPool uses for the first connection
// unless WithStartupPolicy says otherwise: 5 attempts, 200ms doubling to at
// most 2s with 20% jitter, 30s overall. It is more patient than the
// request-scope default because nothing is waiting on a user request yet,
// and still bounded, so that a dead database fails startup instead of
// looping.
func DefaultStartupPolicy() retry.Policy {
	return retry.Policy{
		MaxAttempts:     5,
		InitialInterval: 200 * time.Millisecond,
		Multiplier:      2,
		Jitter:          0.2,
		MaxInterval:     2 * time.Second,
		MaxElapsed:      30 * time.Second,
	}
}

var (
	processBudgetOnce sync.Once
	processBudget     *retry.Budget
)

// ProcessBudget returns one retry budget for the whole process, built on
// first use from retry.DefaultBudget, for a process that wants a shared
// cap: pass it to WithRetryBudget in every factory. By default each Factory
// has its own budget (see WithRetryBudget).
func ProcessBudget() *retry.Budget {
	processBudgetOnce.Do(func() {
		processBudget, _ = retry.NewBudget(retry.DefaultBudget()) // the default config is valid
	})
	return processBudget
}

// WithPasswordFunc makes every new connection fetch a fresh password or IAM
// token from fn (an RDS IAM auth token, a Cloud SQL IAM login token, a
// secret that rotates). fn is called from pgxpool's BeforeConnect, on the
// goroutine building the connection, with a context that carries the
// Acquire caller's values but not its cancellation; it must honour ctx.
// Transient failures of fn (a token endpoint returning 503) are retried
// under the retry policy; fatal ones fail the connect at once; each call is
// bounded by the policy's AttemptTimeout; a panic is recovered into a
// Fatal *PanicError. When fn is set, a connection refused with SQLSTATE
// 28000 (an expired or rejected token) gets one more attempt with a freshly
// fetched token, on every path of the pool; a 28P01, after which pgx
// tries nothing more within the connect, gets it from Factory.Acquire and
// Factory.Start. The value returned by fn is never logged, and is removed
// from the errors holdfast returns.
//
// fn is not told which server the connection reaches; a token that is
// signed for a host name (an RDS IAM token) should come from
// WithHostPasswordFunc instead.
func WithPasswordFunc(fn func(ctx context.Context) (string, error)) Option {
	if fn == nil {
		return func(c *config) { c.fail(&ConfigError{Field: "WithPasswordFunc", Why: "the function is nil"}) }
	}
	return withPassword("WithPasswordFunc", func(ctx context.Context, _ string) (string, error) { return fn(ctx) })
}

// WithHostPasswordFunc is WithPasswordFunc for a token issued for a host
// name, such as an RDS IAM token (rdsiam.With uses it): fn is also told
// host, the name of the server the connection reaches, to issue the token
// for. host is the connection's host (the pool config's Host, or the
// fallback host pgx dials), except when blue/green routing (WithBlueGreen)
// sends the connection to a server that answers to another name: then it
// is that name (bluegreen.AuthHosts). During a switchover's POST phase a
// blue name leads to green, which answers to its green name until green
// takes the blue names; host is then the green name, or the blue name once
// the metadata shows the rename, and the one retry with a fresh token
// after a 28000 is issued for the other of the two names, as the AWS JDBC
// wrapper does. The blue/green monitors' connections get a token for
// their own server's name: the green monitor's for the green name.
func WithHostPasswordFunc(fn func(ctx context.Context, host string) (string, error)) Option {
	if fn == nil {
		return func(c *config) { c.fail(&ConfigError{Field: "WithHostPasswordFunc", Why: "the function is nil"}) }
	}
	return withPassword("WithHostPasswordFunc", fn)
}

func withPassword(by string, fn func(ctx context.Context, host string) (string, error)) Option {
	return func(c *config) {
		if c.password != nil || c.credentials != nil {
			c.fail(&ConfigError{Field: by, Why: "a password function is already set by " + c.passwordBy})
			return
		}
		c.password, c.passwordBy = fn, by
	}
}

// WithClassifier adds rules that the factory consults, in order, before the
// built-in classify rules: use it for another SDK's error types. One rule
// runs before them: a statement or COMMIT whose answer was lost is Fatal
// "outcome-unknown" whatever broke its connection (see "Transactions, and
// what was in flight" in the package doc).
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

// WithStartupPolicy sets the policy NewPool uses to make the first
// connection. Default: DefaultStartupPolicy().
func WithStartupPolicy(p retry.Policy) Option {
	return func(c *config) { c.startup, c.startupSet = p, true }
}

// WithRetryBudget sets the retry budget: a token bucket that every retry
// of the factory's pools draws on and every completed connection refills,
// so that an outage cannot turn into a retry storm (see retry.Budget).
//
// Default: a budget of the factory's own, retry.DefaultBudget() (about 20
// retries at once, then one every 5 seconds, during a sustained outage).
// It belongs to the factory, as gRPC's retry throttling belongs to a client
// connection (one target) and the AWS SDK's retry quota to a client: one
// dead database spends its factory's budget and no other's. Build one
// factory per database (per target); pass ProcessBudget() to every factory
// for one cap on the whole process, or a budget of your own to share it
// between some. nil retries without a budget (not recommended outside
// tests).
func WithRetryBudget(b *retry.Budget) Option {
	return func(c *config) { c.budget, c.budgetSet = b, true }
}

// WithLogger sets the logger. Default: discard (holdfast writes nothing
// unless given a logger). A WARN line per retried failure, with the retry
// layer ("holdfast.layer": connect, password, acquire, startup), attempt,
// delay, error.class, error.reason, the service stage ("holdfast.stage":
// startup, pool-growth, request) and the error text, from which passwords,
// tokens and connection-string secrets are removed; a WARN line when a loop
// gives up on a transient failure; an INFO "holdfast: recovered" line when
// a retried operation succeeds (attempts, took). Every line names the
// database (server.address, server.port, db.namespace, and holdfast.pool
// with WithPoolName). Lines of one kind (message, layer, stage, reason,
// database) are written at most once a second; the next one says how many
// were suppressed. A panicking password function is logged at ERROR with
// its stack.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l == nil {
			c.fail(&ConfigError{Field: "WithLogger", Why: "the logger is nil"})
			return
		}
		c.logger = l
	}
}

// WithBlueGreen enables RDS and Aurora blue/green switchover routing (see
// package bluegreen) for every pool the factory configures. The zero
// bluegreen.Config works: every zero field takes its documented default.
// When c.Logger is nil and WithLogger was given, the factory's logger is
// used (else nothing is logged).
//
// Each pool then gets two monitor goroutines, each with its own connection
// outside the pool, started when the pool first connects: call
// Factory.Close when the pools are closed to stop them
// (Factory.BlueGreen(pool).Close stops one pool's). The
// factory's classifier also learns the package's errors (bluegreen.Rule): a
// wait that reached its bound is Transient, a rejected green host name
// Fatal.
func WithBlueGreen(c bluegreen.Config) Option {
	return func(cfg *config) {
		if err := c.Validate(); err != nil {
			cfg.fail(&ConfigError{Field: "WithBlueGreen", Why: "invalid bluegreen.Config", Err: err})
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
			cfg.fail(&ConfigError{Field: "WithFailover", Why: "invalid failover.Config", Err: err})
			return
		}
		c.Aliases = maps.Clone(c.Aliases) // the caller's map may change later
		cfg.failover = &c
	}
}

// WithPoolName names the factory's pools in log lines (holdfast.pool) and
// metrics (db.client.connection.pool.name, which is otherwise
// "host:port/database"). [PoolName] names one pool and takes precedence;
// two pools of one factory never share a name (the second is "name-2").
func WithPoolName(name string) Option {
	return func(c *config) {
		if name == "" {
			c.fail(&ConfigError{Field: "WithPoolName", Why: "empty name"})
			return
		}
		c.poolName = name
	}
}

func (c *config) fail(err error) {
	if c.invalidOption == nil {
		c.invalidOption = err
	}
}

// A PoolOption configures one pool in [Factory.Configure] or
// [Factory.NewPool].
type PoolOption func(*poolOptions)

type poolOptions struct {
	name     string
	instance *failover.InstanceMode // PoolInstanceMode; nil: failover.Config.InstancePools
	err      error
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
			o.err = err
			return
		}
		o.instance = &mode
	}
}

// PoolName names one pool in log lines (holdfast.pool), metrics
// (db.client.connection.pool.name) and readiness checks, ahead of the
// factory's [WithPoolName] and of the default "host:port/database". Give
// each pool of a service its own name, such as "orders" and
// "orders-replica": the name is a label of every holdfast metric, so keep
// it one per pool, never per connection or request. A name already used
// by another pool of the factory gets a suffix ("orders-2").
func PoolName(name string) PoolOption {
	return func(o *poolOptions) {
		if name == "" {
			o.err = &ConfigError{Field: "PoolName", Why: "empty name"}
			return
		}
		o.name = name
	}
}

// PoolName returns the name pool has in telemetry, log lines and readiness
// (see [PoolName]), or "" for a pool this factory did not configure.
func (f *Factory) PoolName(pool *pgxpool.Pool) string {
	if p := f.e.PoolOf(pool); p != nil {
		return p.Name()
	}
	return ""
}
