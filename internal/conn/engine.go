package conn

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/internal/compose"
	"github.com/holdfast-db/holdfast/internal/failovermon"
	"github.com/holdfast-db/holdfast/internal/obs"
	"github.com/holdfast-db/holdfast/internal/outage"
	"github.com/holdfast-db/holdfast/retry"
)

// The retry layers: where a failure happened and was retried (the values
// of the face's ConnectError.Layer and of the holdfast.layer attribute of
// metrics, span events and log lines).
const (
	LayerConnect     = "connect"     // a dial, inside pgx's DialFunc
	LayerPassword    = "password"    // a password or token fetch, inside BeforeConnect
	LayerAcquire     = "acquire"     // Factory.Acquire, around pool.Acquire
	LayerStartup     = "startup"     // NewPool's and Factory.Start's first connection
	LayerTransaction = "transaction" // the transaction runner: a re-run of a whole transaction
)

// Config is what an Engine is built from: the face's options, checked and
// defaulted by holdfast.New. The engine keeps it as it is.
type Config struct {
	Classifier *classify.Classifier
	Errors     Errors

	// Password is the per-connection password function (nil: none);
	// Credentials the credentials function (nil: none). At most one.
	Password    func(ctx context.Context, host string) (string, error)
	Credentials func(ctx context.Context, host string) (Credentials, error)

	Policy        retry.Policy // the connect layer's (each dial, each password fetch) and Acquire's
	StartupPolicy retry.Policy // a pool's first connection (Start)
	Budget        *retry.Budget
	Logger        *slog.Logger
	Telemetry     *obs.Telemetry
	// GlobalProviders: no meter or tracer provider was given (the global
	// ones): a pool configured before the application installs its SDK
	// is instrumented from its first connect after that.
	GlobalProviders bool

	Dial      pgconn.DialFunc // an integration's dial; nil: the config's or pgx's
	DialBy    string          // the integration (or option) that set Dial
	Encrypted bool            // Dial encrypts and authenticates (pgx's TLS is turned off)
	AuthRetry bool            // a 28000 gets one fresh dial (an integration's IAM login)

	Limit Limit // the admission limit of each pool's connects

	BlueGreen *bluegreen.Config // nil: off
	Failover  *failover.Config  // nil: off
	Outage    *Outage           // nil: off
}

// Engine is one factory's engine: its connector, the pools it configured
// and the failover monitors they share (one per cluster). It is safe for
// concurrent use.
type Engine struct {
	cfg     Config
	cn      *connector
	tel     *obs.Telemetry
	acquire retry.Retrier // Acquire's, layer "acquire"
	startup retry.Retrier // Start's, layer "startup"

	mu       sync.Mutex             // guards the fields below
	pools    []*Pool                // every pool config the engine configured (pool.go)
	monitors map[string]*monitorRef // with failover: one per cluster
	closed   bool
}

// monitorRef is an engine's monitor of one cluster and how many of its
// pools use it: the last to close closes it.
type monitorRef struct {
	key   string
	m     *failovermon.Monitor
	pools int
}

// New returns the engine of c.
func New(c Config) *Engine {
	e := &Engine{cfg: c, tel: c.Telemetry}
	e.cn = &connector{
		classifier: c.Classifier,
		password:   c.Password,
		errs:       c.Errors,
		budget:     c.Budget,
		logger:     c.Logger,
		tel:        c.Telemetry,
		maxDials:   c.Policy.MaxAttempts,
		perTry:     c.Policy.AttemptTimeout,
		authRetry:  c.AuthRetry,
		dialBy:     c.DialBy,
	}
	if c.Credentials != nil {
		e.cn.creds = newCredCache(e.cn, c.Credentials)
		e.cn.password = e.cn.creds.password
	}
	// A dial that connects may reach a front end whose database is down,
	// and a token may be fetched for a database that is down: the budget
	// is refilled only when a handshake completes (state.go).
	e.cn.dial = e.Retrier(c.Policy, LayerConnect)
	e.cn.dial.NoRefund = true
	e.cn.fetch = e.Retrier(c.Policy, LayerPassword)
	e.cn.fetch.NoRefund = true
	e.acquire = e.Retrier(c.Policy, LayerAcquire)
	e.startup = e.Retrier(c.StartupPolicy, LayerStartup)
	return e
}

// budgetFreeKey marks a context whose retries the retry budget neither
// charges nor refuses (WithoutBudget).
type budgetFreeKey struct{}

// WithoutBudget returns ctx marked so that every retry loop of the engine
// run in it (the connect layer's dials, lookups and password fetches,
// Acquire's) is neither charged to the factory's retry budget nor refused
// by it: for a loop that its own policy bounds, as the outage prober's
// backoff bounds its probes. Startup needs no mark: Start's context is
// marked as the startup stage (obs.BeginStartup), which pgxpool carries
// into the connect it makes, and budgetFree reads that too.
func WithoutBudget(ctx context.Context) context.Context {
	return context.WithValue(ctx, budgetFreeKey{}, true)
}

// budgetFree reports whether the retries of ctx are exempt from the retry
// budget: marked by WithoutBudget, or a pool's startup (NewPool,
// Factory.Start, sqldb.Open: the startup policy bounds it, and under
// retry.DemandBudget a budget it drew on would refuse its second connect,
// each connect's failed dials having taken a token each). The budget is
// the request-scope bound of a factory's pools; a startup that fails
// before its database is up leaves it full.
func budgetFree(ctx context.Context) bool {
	if v, _ := ctx.Value(budgetFreeKey{}).(bool); v {
		return true
	}
	return obs.StageOf(ctx, LayerConnect) == obs.StageStartup
}

// Retrier returns a retrier of p for layer, with the engine's classifier
// and budget, that reports each retry (one WARN line, holdfast.retries, a
// span event). The engine's loops (connector.retryFrom, connState.retry)
// leave the budget out in a context that budgetFree reports.
func (e *Engine) Retrier(p retry.Policy, layer string) retry.Retrier {
	return retry.Retrier{
		Policy:   p,
		Classify: e.cfg.Classifier.Classify,
		Budget:   e.cfg.Budget,
		OnRetry: func(ctx context.Context, ev retry.Event) {
			e.tel.Retried(ctx, layer, ev)
		},
	}
}

// CredentialsCalls returns how many times the engine called its
// credentials function.
func (e *Engine) CredentialsCalls() int64 {
	if e.cn.creds == nil {
		return 0
	}
	return e.cn.creds.calls.Load()
}

// Configure binds cfg to the engine's layers under the name name (made
// unique among the engine's pools), instance being the pool's failover
// instance mode (nil: Config.Failover's). It returns a *ConfigError-like
// error of the face (cfgerr) for a config already configured and after
// Close.
func (e *Engine) Configure(cfg *pgxpool.Config, name string, instance *failover.InstanceMode) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return e.configError("Factory", "closed", nil)
	}
	if p := e.configOf(cfg); p != nil {
		return e.configError("pgxpool.Config", "already configured by this factory: configure a config once", nil)
	}
	p, err := e.bind(cfg, e.uniqueName(obs.PoolName(cfg.ConnConfig, name)), instance)
	if err != nil {
		return err
	}
	p.named = name != ""
	e.pools = append(e.pools, p)
	return nil
}

// configOf returns this engine's binding of cfg, or nil.
func (e *Engine) configOf(cfg *pgxpool.Config) *Pool {
	if p := compose.OwnerOf[Pool](cfg); p != nil && p.e == e {
		return p
	}
	return nil
}

// ConfigOf returns this engine's binding of cfg, or nil.
func (e *Engine) ConfigOf(cfg *pgxpool.Config) *Pool {
	if e == nil || cfg == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.configOf(cfg)
}

// PoolOf returns this engine's binding of pool, or nil: found from the
// pool's config, whatever built the pool (NewPool, or Configure and
// pgxpool.NewWithConfig); the binding learns its pool here if it did not
// know it yet. It copies the pool's config: not for a hot path.
func (e *Engine) PoolOf(pool *pgxpool.Pool) *Pool {
	if e == nil {
		return nil
	}
	if p := OfPool(pool); p != nil && p.e == e {
		return p
	}
	return nil
}

// OfPool returns the binding of pool by whichever engine configured it,
// or nil (for packages that have a pool, not its factory: readiness,
// sqldb). The binding learns its pool here if it did not know it yet.
func OfPool(pool *pgxpool.Pool) *Pool {
	if pool == nil {
		return nil
	}
	p := compose.OwnerOf[Pool](pool.Config())
	if p != nil {
		p.comp.Attach(pool)
	}
	return p
}

// OfConfig returns the binding of cfg by whichever engine configured it,
// or nil.
func OfConfig(cfg *pgxpool.Config) *Pool { return compose.OwnerOf[Pool](cfg) }

// Close stops and joins the monitors of every pool the engine configured;
// their pools keep working with plain host names. Idempotent. After
// Close, Configure returns an error.
func (e *Engine) Close() {
	e.mu.Lock()
	pools, monitors := e.pools, e.monitors
	e.pools, e.monitors, e.closed = nil, nil, true
	e.mu.Unlock()
	for _, p := range pools {
		p.close()
	}
	for _, ref := range monitors {
		ref.m.Close()
	}
}

// Forget closes p's layers and removes it from the engine's pools; the
// last pool of a cluster closes its failover monitor.
func (e *Engine) Forget(p *Pool) {
	if p == nil {
		return
	}
	var done *failovermon.Monitor
	e.mu.Lock()
	for i, q := range e.pools {
		if q == p {
			e.pools = append(e.pools[:i:i], e.pools[i+1:]...)
			break
		}
	}
	if p.fo != nil && !p.closed.Load() {
		if ref := p.foRef; e.monitors[ref.key] == ref {
			if ref.pools--; ref.pools == 0 {
				delete(e.monitors, ref.key)
				done = ref.m
			}
		}
	}
	e.mu.Unlock()
	p.close()
	if done != nil {
		done.Close()
	}
}

// Redact wraps err so that its text carries no secret holdfast knows;
// nil stays nil.
func (e *Engine) Redact(err error) error { return e.cn.redact(err) }

// ReasonRetriedBelow marks a failure that a lower layer already retried.
const ReasonRetriedBelow = "retried-below"

// WaitedBelow reports whether err was already retried at the dial or
// password layer (it carries a *retry.Error) or already held for its
// bound (blue/green's suspension, the admission queue, the outage
// layer's hold): waiting for it again would multiply the bound.
func WaitedBelow(err error) bool {
	var below *retry.Error
	var held *bluegreen.SuspendError
	return errors.As(err, &below) || errors.As(err, &held) || errors.Is(err, ErrQueued) || errors.Is(err, outage.ErrDown)
}

// downError returns the face's error of a wait for pool's database that
// ended with err, the caller's context's error, while pgxpool waited for
// a connect that the outage layer holds: the database is down; else err.
// Off the fast path.
func (e *Engine) downError(pool *pgxpool.Pool, err error) error {
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		return err
	}
	if p := e.PoolOf(pool); p != nil && p.out != nil {
		if de := p.out.DownError(err); de != nil {
			return de
		}
	}
	return err
}

// Acquire is pool.Acquire with request-scope retry (the face's
// Factory.Acquire). A connect's failure is returned as the face's
// *ConnectError, one line (failure.go); any error carries no secret
// holdfast knows.
func (e *Engine) Acquire(ctx context.Context, pool *pgxpool.Pool) (*pgxpool.Conn, error) {
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
	c, err = e.acquireAgain(ctx, pool, e.downError(pool, err), &e.acquire, "")
	return c, e.cn.redact(err)
}

// Reacquire carries Acquire's retry to code that acquires its own way
// (package sqldb: pgx's stdlib connector calls pool.Acquire): after
// acquire failed with firstErr, it calls acquire again as Acquire retries
// pool.Acquire. It returns nil once acquire succeeds, else an error that
// carries no secret holdfast knows: a connect's failure as the face's
// *ConnectError, one line.
func (e *Engine) Reacquire(ctx context.Context, pool *pgxpool.Pool, firstErr error, acquire func(context.Context) error) error {
	if firstErr == nil {
		return nil
	}
	if dl, ok := ctx.Deadline(); ok {
		ctx = retry.WithCallerDeadline(ctx, dl) // as Acquire: for the connects acquire waits on
	}
	return e.cn.redact(e.retryAcquire(ctx, pool, e.downError(pool, firstErr), &e.acquire, "", acquire))
}

// Start makes pool's first connection under the startup policy and
// releases it to the pool (the face's Factory.Start); the layers learn
// their pool. It returns the face's ConnectError of layer "startup", one
// line, or a *ConfigError when the pool's connection was not made
// through this engine.
func (e *Engine) Start(ctx context.Context, pool *pgxpool.Pool) error {
	// The startup policy's MaxElapsed bounds the whole startup, its first
	// try (a connect under the retry policy) included.
	start := time.Now()
	ctx, cancel := Within(ctx, start, e.startup.Policy)
	defer cancel()
	ctx, traced := e.tel.BeginStartup(ctx) // holdfast.stage=startup, holdfast.startup span
	c, err := pool.Acquire(ConnectsWithin(ctx))
	if err != nil {
		c, err = e.acquireAgain(ctx, pool, err, &e.startup, LayerStartup)
	} else {
		e.tel.FirstTry(ctx, LayerStartup)
	}
	traced(err)
	if err != nil {
		return e.cn.redact(err)
	}
	s := stateOf(c.Conn())
	c.Release()
	if s == nil || s.cn != e.cn {
		return e.configError("pgxpool.Config.BeforeConnect",
			"this factory's connect layer did not run for the pool's connection: the pool was not built from a config this factory configured, or BeforeConnect was replaced after Configure (set your hooks before Configure: holdfast chains them)", nil)
	}
	s.p.comp.Attach(pool) // the layers learn their pool (sweeps of idle connections, connection counts)
	return nil
}

// acquireAgain retries pool.Acquire after a first failure firstErr (see
// retryAcquire).
func (e *Engine) acquireAgain(ctx context.Context, pool *pgxpool.Pool, firstErr error, r *retry.Retrier, startup string) (*pgxpool.Conn, error) {
	var c *pgxpool.Conn
	err := e.retryAcquire(ctx, pool, firstErr, r, startup, func(ctx context.Context) error {
		var err error
		c, err = pool.Acquire(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// retryAcquire retries acquire after a first failure firstErr, under r:
// one retry of a 28P01 or 28000 with a freshly fetched password or token,
// and a failure that the connect could not see why it failed. Unless at
// startup (startup is LayerStartup; "" for a request), a failure that
// WaitedBelow is not retried: a first one is returned as it is, a later
// one ends the loop. pool names the log lines. Each try's connect
// failure is read as one line (the loop logs it so), and so is the end:
// the face's *ConnectError counting every try's attempts (a door,
// failure.go), of Layer startup at startup.
func (e *Engine) retryAcquire(ctx context.Context, pool *pgxpool.Pool, firstErr error, r *retry.Retrier, startup string, acquire func(context.Context) error) error {
	patient := startup != ""
	var target *obs.Target
	if p := e.PoolOf(pool); p != nil {
		target = p.target
	}
	d := e.cn.newDoor(target, startup)
	firstErr = d.failed(firstErr)
	if !patient && WaitedBelow(firstErr) {
		return d.end(firstErr)
	}
	ctx = obs.WithTarget(ctx, target)
	// The door's MaxElapsed counts from its call (its first try's start),
	// not from the first failure; each try's connects end before it.
	ctx, cancel := Within(ctx, d.start, r.Policy)
	defer cancel()
	rr := *r
	authRetried := false
	rr.Classify = func(err error) classify.Verdict {
		if !patient && WaitedBelow(err) {
			return classify.Verdict{Class: classify.Fatal, Reason: ReasonRetriedBelow}
		}
		v := e.cfg.Classifier.Classify(err)
		if e.cn.password == nil {
			return v
		}
		return retryAuthOnce(v, err, &authRetried) // a freshly fetched token
	}
	rr.Exempt = isFreshAuth
	layer := LayerAcquire
	if patient {
		layer = LayerStartup
	}
	err := e.cn.retryFrom(ctx, &rr, layer, 0, firstErr, func(ctx context.Context) error {
		return d.failed(acquire(ConnectsWithin(ctx)))
	})
	if err != nil {
		return d.end(err)
	}
	return nil
}

// RetryFrom is r.Continue with telemetry for layer (the transaction
// runner's): the loop's attempts become span events, and its end a
// recovery, an exhaustion or a budget rejection.
func (e *Engine) RetryFrom(ctx context.Context, r *retry.Retrier, layer string, firstErr error, op func(context.Context) error) error {
	return e.cn.retryFrom(ctx, r, layer, 0, firstErr, op)
}

// MarkCommit tells c's connection, when the engine made it, that a
// transaction runner's COMMIT is what it sends next: a failure that loses
// the answer to that request leaves its outcome unknown. The mark ends
// with that request.
func MarkCommit(c *pgx.Conn) {
	if h := compose.ConnOf(c); h != nil {
		h.MarkCommit(true)
	}
}

type readYourWritesKey struct{}

// WithReadYourWrites returns ctx marked for read-your-writes (the face's
// holdfast.ReadYourWrites).
func WithReadYourWrites(ctx context.Context) context.Context {
	return context.WithValue(ctx, readYourWritesKey{}, true)
}

// ReadYourWrites reports whether ctx is marked with WithReadYourWrites.
func ReadYourWrites(ctx context.Context) bool {
	v, _ := ctx.Value(readYourWritesKey{}).(bool)
	return v
}
