package readiness

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/internal/compose"
	"github.com/holdfast-db/holdfast/internal/obs"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Defaults of [Config].
const (
	DefaultCheckInterval    = time.Second
	DefaultCheckTimeout     = time.Second
	DefaultProbeTimeout     = 800 * time.Millisecond
	DefaultFailureThreshold = 3
	DefaultDrainInterval    = time.Second
	DefaultDrainTimeout     = 2 * time.Minute
)

// Config configures a [Checker]. The zero value is valid and means the
// defaults; negative durations and thresholds are rejected by [New].
type Config struct {
	// Factory makes the first connection in [Checker.Start] (under its
	// startup retry policy) and classifies failures. Nil means a Factory
	// built by holdfast.New() with no options. It need not be the factory
	// that configured the pool, though it usually is.
	Factory *holdfast.Factory

	// CheckInterval is how long a database check result is reused: probes
	// arriving within it are answered from the cache, so that a fleet of
	// probers cannot stampede the database. Default 1s.
	CheckInterval time.Duration
	// CheckTimeout bounds one database check: acquire a connection from
	// the pool and run one query on it. Default 1s.
	CheckTimeout time.Duration
	// ProbeTimeout is the longest a probe waits for a running check before
	// it answers from the last known result: a probe never blocks longer.
	// Keep it below the prober's timeout (Kubernetes' timeoutSeconds,
	// default 1s). Default 800ms.
	ProbeTimeout time.Duration
	// FailureThreshold is the number of consecutive failed checks after
	// which readiness fails (503). Fewer failures answer 200 with status
	// "warn"; the first success recovers. Default 3.
	FailureThreshold int

	// DrainInterval is the time between two polls of a drain. Default 1s.
	DrainInterval time.Duration
	// DrainTimeout bounds a drain unless [WithDrainTimeout] overrides it.
	// Default 2m.
	DrainTimeout time.Duration
	// RefuseWhileDraining makes [Checker.Middleware] answer new requests
	// with 503 and "Connection: close" while the service is not Enabled.
	// Default false: requests that still arrive are served, and counted.
	RefuseWhileDraining bool

	// Logger receives startup results, readiness transitions and every
	// drain and enable with its owner. Default: discard.
	Logger *slog.Logger
}

// validate checks c and returns it with defaults filled in.
func (c Config) validate() (Config, error) {
	durations := []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"CheckInterval", &c.CheckInterval, DefaultCheckInterval},
		{"CheckTimeout", &c.CheckTimeout, DefaultCheckTimeout},
		{"ProbeTimeout", &c.ProbeTimeout, DefaultProbeTimeout},
		{"DrainInterval", &c.DrainInterval, DefaultDrainInterval},
		{"DrainTimeout", &c.DrainTimeout, DefaultDrainTimeout},
	}
	for _, d := range durations {
		if *d.v < 0 {
			return c, &ConfigError{Pkg: "readiness", Field: "Config." + d.name, Why: "must not be negative (got " + d.v.String() + ")"}
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if c.FailureThreshold < 0 {
		return c, &ConfigError{Pkg: "readiness", Field: "Config.FailureThreshold", Why: "must not be negative"}
	}
	if c.FailureThreshold == 0 {
		c.FailureThreshold = DefaultFailureThreshold
	}
	if c.DrainInterval > c.DrainTimeout {
		return c, &ConfigError{Pkg: "readiness", Field: "Config.DrainInterval", Why: "must not exceed DrainTimeout (" + c.DrainInterval.String() + " > " + c.DrainTimeout.String() + ")"}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Factory == nil {
		f, err := holdfast.New()
		if err != nil {
			return c, err
		}
		c.Factory = f
	}
	return c, nil
}

// gate is the state of the startup gate.
type gate int

const (
	gateIdle    gate = iota // Start not called, no check succeeded yet
	gateRunning             // Start is running
	gateFailed              // Start failed; checks may still open the gate
	gateOpen                // the first connection succeeded
)

// Checker reports the readiness of a service that uses a pgxpool.Pool, and
// drains it. Create one with [New]; call [Checker.Start] to open the startup
// gate, mount [Checker.ReadyHandler], [Checker.LiveHandler] and
// [Checker.DrainHandler], wrap the service's handlers with
// [Checker.Middleware], and call [Checker.Close] (or let [Checker.Serve] do
// it) when done.
//
// A Checker is safe for concurrent use. It owns at most one goroutine at a
// time, the running database check, which Close stops and joins. It does not
// own the pool: Close leaves it open ([Checker.Serve] closes it).
type Checker struct {
	pool *pgxpool.Pool
	cfg  Config
	log  *slog.Logger
	now  func() time.Time // the clock of the cache and the timestamps; tests replace it

	ctx    context.Context // ends at Close; bounds every check
	cancel context.CancelFunc
	wg     sync.WaitGroup // running check and Drain calls

	inflight atomic.Int64
	state    atomic.Int32 // drain.state, for Middleware's lock-free read
	startMu  sync.Mutex   // serialises Start

	mu       sync.Mutex
	closed   bool
	gate     gate
	started  time.Time        // when the gate opened, or Start last failed
	startV   classify.Verdict // cause of the last failed Start
	startErr error
	db       dbState
	call     *checkCall // the running check, shared by every waiting probe
	drain    drainState

	pollHook func(InUse) // tests: called after every drain poll

	tel        *obs.Readiness    // metrics and span events; nil records nothing
	factory    *holdfast.Factory // the pool's factory: its blue/green router, if any
	lastHealth Health            // last health and reason recorded, guarded by mu
	lastReason string
}

// dbState is the cached result of the database checks.
type dbState struct {
	checked     time.Time // when the last check ended (or the gate opened)
	lastSuccess time.Time
	latency     time.Duration // of the last successful check
	failures    int           // consecutive
	verdict     classify.Verdict
	err         error
	checks      int64
}

type checkCall struct{ done chan struct{} }

// New returns a Checker for pool, or a [*ConfigError] when pool is nil or
// cfg has a nonsense field. The Checker starts not ready ("starting").
func New(pool *pgxpool.Pool, cfg Config) (*Checker, error) {
	if pool == nil {
		return nil, &ConfigError{Pkg: "readiness", Field: "pool", Why: "must not be nil"}
	}
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Checker{pool: pool, cfg: cfg, log: cfg.Logger, now: time.Now, ctx: ctx, cancel: cancel,
		tel: readinessTelemetry(cfg.Factory), factory: cfg.Factory}
	c.drain.since = c.now()
	return c, nil
}

// Start opens the startup gate: it makes the pool's first connection with
// the factory's bounded startup retry (holdfast.Factory.Start) and records
// the outcome. It returns nil, a *holdfast.StartupError whose Verdict
// classifies the cause, or [ErrClosed].
//
// Until the gate opens, readiness fails with reason "starting" (while Start
// runs, or before it is called), or "startup-failed" with the classified
// cause. A failed Start does not end anything: later probes keep checking
// the database (at most once per CheckInterval), and the first successful
// check opens the gate, so a service whose database was down at boot
// becomes ready when it comes back, without a restart and without going
// Ready while it is dead. Start is optional: without it, the first
// successful check opens the gate.
//
// Start returns at once if the gate is open. Concurrent calls run one after
// the other. ctx bounds the whole startup. If a check that was running when
// Start began succeeds meanwhile, the gate is open and Start returns nil.
func (c *Checker) Start(ctx context.Context) error {
	c.startMu.Lock()
	defer c.startMu.Unlock()
	c.mu.Lock()
	switch {
	case c.closed:
		c.mu.Unlock()
		return ErrClosed
	case c.gate == gateOpen:
		c.mu.Unlock()
		return nil
	}
	c.gate = gateRunning
	c.mu.Unlock()

	err := c.cfg.Factory.Start(ctx, c.pool)

	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gate == gateOpen {
		return nil // a check that was already running when Start began opened it
	}
	if err == nil {
		c.openLocked(now)
		c.log.LogAttrs(ctx, slog.LevelInfo, "readiness: startup: first connection made")
		return nil
	}
	v := c.cfg.Factory.Classify(err)
	var se *holdfast.StartupError
	if errors.As(err, &se) {
		v = se.Verdict
	}
	c.gate, c.started, c.startV, c.startErr = gateFailed, now, v, err
	c.log.LogAttrs(ctx, slog.LevelError, "readiness: startup: first connection failed; not ready until the database answers",
		slog.String("error.class", v.Class.String()),
		slog.String("error.reason", v.Reason),
		slog.String("error", err.Error()))
	return err
}

// openLocked opens the gate: the first connection has been made.
func (c *Checker) openLocked(now time.Time) {
	c.gate, c.started = gateOpen, now
	c.startV, c.startErr = classify.Verdict{}, nil
	c.db.checked, c.db.lastSuccess, c.db.failures, c.db.err = now, now, 0, nil
}

// Check returns the readiness status, first refreshing the database check
// when its cached result is older than CheckInterval. Concurrent callers
// share one running check; each waits for it at most ProbeTimeout (or until
// ctx ends), then answers from the last known result. No check runs while
// Start runs, while the service is not Enabled, or after Close.
func (c *Checker) Check(ctx context.Context) Status {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.ProbeTimeout)
	defer cancel()
	c.mu.Lock()
	call := c.refreshLocked(c.now())
	c.mu.Unlock()
	if call != nil {
		select {
		case <-call.done:
		case <-ctx.Done():
		}
	}
	return c.Status()
}

// refreshLocked starts a check if one is due and returns the running check,
// or nil when the cached result stands.
func (c *Checker) refreshLocked(now time.Time) *checkCall {
	if c.call != nil {
		return c.call
	}
	if c.closed || c.gate == gateRunning || c.drain.state != Enabled {
		return nil
	}
	if !c.db.checked.IsZero() && now.Sub(c.db.checked) < c.cfg.CheckInterval {
		return nil
	}
	call := &checkCall{done: make(chan struct{})}
	c.call = call
	c.wg.Add(1)
	go c.runCheck(call)
	return call
}

// runCheck runs one database check and records it. It is the Checker's only
// goroutine; Close cancels its context and joins it.
func (c *Checker) runCheck(call *checkCall) {
	defer c.wg.Done()
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.CheckTimeout)
	t0 := time.Now()
	err := c.check(ctx)
	latency := time.Since(t0)
	cancel()

	now := c.now()
	c.mu.Lock()
	c.recordLocked(now, latency, err)
	c.call = nil
	c.mu.Unlock()
	close(call.done)
}

// checkSQL is the query of the database check: one simple-protocol round
// trip.
const checkSQL = "SELECT 1"

// check acquires a connection through the pool (never a new connection of
// its own, so it sees pool exhaustion) and runs one query on it.
func (c *Checker) check(ctx context.Context) error {
	conn, err := c.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	_, err = conn.Exec(ctx, checkSQL)
	return err
}

func (c *Checker) recordLocked(now time.Time, latency time.Duration, err error) {
	db := &c.db
	db.checks++
	db.checked = now
	if err == nil {
		if db.failures >= c.cfg.FailureThreshold {
			c.log.LogAttrs(c.ctx, slog.LevelInfo, "readiness: database check recovered",
				slog.Int("failures", db.failures))
		}
		db.failures, db.err, db.lastSuccess, db.latency = 0, nil, now, latency
		if c.gate != gateOpen {
			c.openLocked(now)
			c.log.LogAttrs(c.ctx, slog.LevelInfo, "readiness: startup: first connection made by a readiness check")
		}
		return
	}
	db.failures++
	db.err = err
	db.verdict = c.cfg.Factory.Classify(err)
	level := slog.LevelDebug
	if db.failures == c.cfg.FailureThreshold && c.gate == gateOpen {
		level = slog.LevelError // the transition to not ready
	}
	c.log.LogAttrs(c.ctx, level, "readiness: database check failed",
		slog.Int("failures", db.failures),
		slog.Int("threshold", c.cfg.FailureThreshold),
		slog.String("error.class", db.verdict.Class.String()),
		slog.String("error.reason", db.verdict.Reason),
		slog.String("error", err.Error()))
}

// Close stops the running check and waits for it, interrupts every waiting
// [Checker.Drain] (they return a [*DrainTimeoutError] whose Cause is
// [ErrClosed]) and waits for them to return, and makes readiness fail with
// reason "closed". It does not close the pool. Close is idempotent and safe
// to call concurrently; every call returns once the Checker's goroutines are
// gone.
func (c *Checker) Close() {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		if c.drain.cancelEpoch != nil {
			c.drain.cancelEpoch(ErrClosed)
		}
	}
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
}

// readinessTelemetry records through the factory's meter and tracer
// providers.
func readinessTelemetry(f *holdfast.Factory) *obs.Readiness {
	tel, err := obs.New(obs.Config{MeterProvider: f.MeterProvider(), TracerProvider: f.TracerProvider(), Classify: f.Classify})
	if err != nil {
		return nil // a provider that refuses instruments: record nothing
	}
	return tel.Readiness()
}

// blueGreen returns the pool's blue/green router, or nil: holdfast's
// (WithBlueGreen) or one of bluegreen.New, found from the pool's config.
func (c *Checker) blueGreen() *bluegreen.Router {
	if r := c.factory.BlueGreen(c.pool); r != nil {
		return r
	}
	r, _ := compose.OfPool(c.pool).BlueGreenRouter().(*bluegreen.Router)
	return r
}
