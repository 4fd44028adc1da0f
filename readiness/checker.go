package readiness

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdfast-db/holdfast/internal/cfgerr"
	"github.com/holdfast-db/holdfast/internal/obs"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/classify"
)

// Config configures a [Checker]. The zero value is valid and means the
// defaults; [New] rejects negative durations and thresholds, and a
// DrainInterval above DrainTimeout. The defaults:
//
//	field             default  what it bounds
//	CheckInterval     1s       how long a check's result is reused
//	CheckTimeout      1s       one check of one target
//	ProbeTimeout      800ms    a probe's wait for a running check
//	FailureThreshold  3        consecutive failed checks before 503
//	NotReadyAfter     10s      how long a pool's database may be down before 503
//	DrainInterval     1s       the time between two drain polls
//	DrainTimeout      2m       a drain (WithDrainTimeout overrides it)
//	Factory           holdfast.New() with no options
//	Logger            discard
//	Authorize         nil: the admin handlers answer local callers only
type Config struct {
	// Factory makes the first connection in [Checker.Start] (under its
	// startup retry policy) and classifies failures, for every target
	// whose own Target.Factory is nil. Nil means a Factory built by
	// holdfast.New() with no options. It should be the factory that
	// configured the pool: Factory.Start refuses a pool another factory
	// configured.
	Factory *holdfast.Factory

	// CheckInterval is how long a database check result is reused: probes
	// arriving within it are answered from the cache, so that a fleet of
	// probers cannot stampede the database. Default 1s. The targets of a
	// Checker are checked together, concurrently.
	CheckInterval time.Duration
	// CheckTimeout bounds one database check of one target: acquire a
	// connection from the pool and run one query on it. Default 1s.
	CheckTimeout time.Duration
	// ProbeTimeout is the longest a probe waits for a running check before
	// it answers from the last known result: a probe never blocks longer.
	// Keep it below the prober's timeout (Kubernetes' timeoutSeconds,
	// default 1s). Default 800ms.
	ProbeTimeout time.Duration
	// FailureThreshold is the number of consecutive failed checks of a
	// required target after which readiness fails (503). Fewer failures
	// answer 200 with status "warn"; the first success recovers. Default 3.
	FailureThreshold int
	// NotReadyAfter is how long a required target's database may be down
	// before readiness fails (503, reason "database-down"): its pool's
	// outage layer (holdfast.WithOutage, on by default) found it down and
	// holds the requests that need a new connection. Until then readiness
	// answers 200 with status "warn": a restart of a few seconds, during
	// which the held requests go through, does not take the service out of
	// its load balancer; a longer outage does, within NotReadyAfter and the
	// orchestrator's own period. It is ready again as soon as the database
	// is back, without waiting for a check. The pool's state decides, not
	// the count of failed checks. Default 10s.
	NotReadyAfter time.Duration

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
	// drain and enable with its owner, naming each target with its
	// address (server.address, server.port, db.namespace). Error texts
	// pass through the redactor of the factory that configured the pool,
	// and the pool config's own password is removed from them. Default:
	// discard.
	Logger *slog.Logger

	// Authorize admits the callers of [Checker.DrainHandler] and
	// [Checker.AdminHandler], and names the owner of a drain or an enable:
	// nil error admits the request, and owner (checked as Drain checks
	// it) is then the drain's owner whatever the request says; any error
	// refuses it with 403 (its text is logged, never served). It decides
	// every request, local ones too; a panic refuses the request (and is
	// logged by its type). It runs on the request's goroutine, before the
	// handler does anything but refuse a cross-origin browser POST or
	// DELETE: check a token (Config's authorize example), a client
	// certificate (r.TLS) or a header a trusted proxy sets.
	//
	// Nil (the default) admits local callers only: a Unix socket, or
	// loopback at both ends, naming a loopback host, through no proxy
	// (DrainHandler documents the rule); the owner is then the one the
	// caller names. To admit every caller of a private admin network on
	// purpose, return the owner the caller names with a nil error.
	Authorize func(r *http.Request) (owner string, err error)
}

// The defaults of [Config], as its doc lists them.
const (
	defaultCheckInterval    = time.Second
	defaultCheckTimeout     = time.Second
	defaultProbeTimeout     = 800 * time.Millisecond
	defaultFailureThreshold = 3
	defaultNotReadyAfter    = 10 * time.Second
	defaultDrainInterval    = time.Second
	defaultDrainTimeout     = 2 * time.Minute
)

// validate checks c and returns it with defaults filled in.
func (c Config) validate() (Config, error) {
	if d := cfgerr.SetDefaults([]cfgerr.Duration{
		{Name: "Config.CheckInterval", Value: &c.CheckInterval, Default: defaultCheckInterval},
		{Name: "Config.CheckTimeout", Value: &c.CheckTimeout, Default: defaultCheckTimeout},
		{Name: "Config.ProbeTimeout", Value: &c.ProbeTimeout, Default: defaultProbeTimeout},
		{Name: "Config.NotReadyAfter", Value: &c.NotReadyAfter, Default: defaultNotReadyAfter},
		{Name: "Config.DrainInterval", Value: &c.DrainInterval, Default: defaultDrainInterval},
		{Name: "Config.DrainTimeout", Value: &c.DrainTimeout, Default: defaultDrainTimeout},
	}); d != nil {
		return c, &ConfigError{Pkg: "readiness", Field: d.Name, Why: "must not be negative (got " + d.Value.String() + ")"}
	}
	if c.FailureThreshold < 0 {
		return c, &ConfigError{Pkg: "readiness", Field: "Config.FailureThreshold", Why: "must not be negative"}
	}
	if c.FailureThreshold == 0 {
		c.FailureThreshold = defaultFailureThreshold
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

// gate is the state of a target's startup gate.
type gate int

const (
	gateIdle    gate = iota // Start not called, no check succeeded yet
	gateRunning             // Start is running
	gateFailed              // Start failed; checks may still open the gate
	gateOpen                // the first connection succeeded
)

// Checker reports the readiness of a service that uses one or more
// databases — pgxpools and *sql.DBs of package sqldb, its targets — and
// drains it. Create one with [New]; call [Checker.Start] to open the
// startup gate (or let [Checker.Serve] do it), mount
// [Checker.ReadyHandler] and [Checker.LiveHandler] on the service's port
// and [Checker.AdminHandler] and [Checker.DrainHandler] on an admin
// listener, wrap the service's handlers with [Checker.Middleware], and call
// [Checker.Close] (or let [Checker.Serve] do it) when done.
//
// A Checker is safe for concurrent use. The goroutines it owns are the
// running database check, one per target while it runs, which Close stops
// and joins. It does not own the targets: Close leaves them open
// ([Checker.Serve] closes them).
//
// # Telemetry
//
// A Checker records through the meter provider of the factory that
// configured its targets' pools (holdfast.WithMeterProvider; the
// service's own series through that of the first target of
// Config.Factory), as the OpenTelemetry Prometheus exporter names them:
//
//	instrument                            Prometheus                                  attributes
//	holdfast.readiness.ready              holdfast_readiness_ready_ratio              — (the whole service: 1 while /readyz answers 200)
//	holdfast.readiness.transitions        holdfast_readiness_transitions_total        holdfast.readiness.health, holdfast.readiness.reason
//	holdfast.readiness.drain.duration     holdfast_readiness_drain_duration_seconds   holdfast.outcome
//	holdfast.readiness.check.ready        holdfast_readiness_check_ready_ratio        per target: holdfast.readiness.check,
//	                                                                                  db.client.connection.pool.name, server.address,
//	                                                                                  server.port, db.namespace (1 unless its check fails)
//	holdfast.readiness.check.transitions  holdfast_readiness_check_transitions_total  the target's, holdfast.readiness.health and .reason
//	holdfast.readiness.check.duration     holdfast_readiness_check_duration_seconds   the target's, holdfast.outcome (success|failure)
//
// The per-target series carry the target's name, its pool's name (as the
// pool's own db.client.connection.* series do) and its configured host,
// so that a dashboard can tell which database fails: for example
// min by (db_client_connection_pool_name) (holdfast_readiness_check_ready_ratio).
// An optional target's check.ready reads 0 while it fails, though the
// service stays ready. Log lines about a target carry
// holdfast.readiness.check, holdfast.pool, server.address, server.port and
// db.namespace. A pool that no holdfast factory configured records no
// series.
type Checker struct {
	targets []*target
	cfg     Config
	log     *slog.Logger
	now     func() time.Time // the clock of the cache and the timestamps; tests replace it
	// newTimer starts Serve's shutdown delay: its channel fires once d
	// has passed, and stop releases it. Tests replace it.
	newTimer func(d time.Duration) (expired <-chan time.Time, stop func())

	ctx    context.Context // ends at Close; bounds every check
	cancel context.CancelFunc
	wg     sync.WaitGroup // running check and Drain calls

	inflight atomic.Int64
	state    atomic.Int32 // drain.state, for Middleware's lock-free read
	startMu  sync.Mutex   // serialises Start

	mu     sync.Mutex
	closed bool
	call   *checkCall // the running check, shared by every waiting probe
	drain  drainState

	pollHook func(InUse) // tests: called after every drain poll
	refused  refusals    // the log lines of refused admin requests

	tel        *obs.Readiness // metrics and span events; nil records nothing
	lastHealth Health         // last health and reason recorded, guarded by mu
	lastReason string
}

// dbState is the cached result of one target's database checks.
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

// New returns a Checker over targets: one pgxpool for most services
// (New(cfg, Pool(pool))), or several pgxpools ([Pool]) and *sql.DBs of
// package sqldb ([DB]), each checked on its own and named in the JSON
// body, log lines and metrics (see Target.Name). Readiness fails when a
// required target fails, and warns when a target that is not required
// (Target.Optional) fails; [Checker.Start] opens the startup gate of every
// target, and a drain waits for the connections acquired from every
// target's pool. The Checker starts not ready ("starting").
//
// Targets over one pool are one database: New(cfg, Pool(pool),
// DB(sqldb.OpenDB(pool))) is one target, checked through database/sql and
// reported once, under the pool's name (see [Target]).
//
// It returns a [*ConfigError] when no target is given, a target has
// neither Pool nor DB (Pool(nil) included), a DB's pool cannot be found
// (see Target.Pool), two targets over different pools have the same name,
// two targets over one pool disagree (their given Names, Optional,
// Factory, or two different *sql.DBs), or cfg has a nonsense field.
func New(cfg Config, targets ...Target) (*Checker, error) {
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	ts, err := newTargets(cfg, targets)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Checker{targets: ts, cfg: cfg, log: cfg.Logger, now: time.Now, newTimer: newTimer, ctx: ctx, cancel: cancel,
		tel: serviceTelemetry(ts)}
	c.drain.since = c.now()
	return c, nil
}

// newTimer is a time.Timer as Checker.newTimer gives it.
func newTimer(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTimer(d)
	return t.C, func() { t.Stop() }
}

// TargetError is the failure of one target of a Checker with several: its
// name and what failed. [Checker.Start] joins one per required target
// whose startup failed, with the error of holdfast.Factory.Start as Err
// (whose Classify says whether to retry: a Transient cause may come back,
// a Fatal one is a mistake to fix); [Checker.Serve] returns one for a
// *sql.DB whose Close failed. Unwrap returns Err.
type TargetError struct {
	Target string // the target's name
	Err    error
}

// Error reads "readiness: target \"orders\": " and the error.
func (e *TargetError) Error() string {
	return fmt.Sprintf("readiness: target %q: %v", e.Target, e.Err)
}

// Unwrap returns Err.
func (e *TargetError) Unwrap() error { return e.Err }

// Start opens the startup gate: it makes the first connection of every
// target whose gate is not open yet, concurrently, each with its factory's
// bounded startup retry (holdfast.Factory.Start; for a *sql.DB, on the
// pool under it), and records the outcomes. For a Checker of one target
// it returns nil, the error of holdfast.Factory.Start, or [ErrClosed]; of
// several, nil when every required target's gate is open, else the joined
// [*TargetError]s of the required targets that failed. The factory's
// Classify says whether a failure may pass (Transient: the database may
// come back) or is a mistake to fix (Fatal: permission, database name,
// TLS); [Status] carries that verdict as Startup.Cause. A target that is
// not required and fails to start is logged, not returned.
//
// Until a target's gate opens, its check fails with reason "starting"
// (while Start runs, or before it is called), or "startup-failed" with the
// classified cause. A failed Start does not end anything: later probes
// keep checking the database (at most once per CheckInterval), and the
// first successful check opens the gate, so a service whose database was
// down at boot becomes ready when it comes back, without a restart and
// without going Ready while it is dead. Start is optional: without it, the
// first successful check of a target opens its gate.
//
// Start returns at once if every gate is open. Concurrent calls run one
// after the other. ctx bounds the whole startup. If a check that was
// running when Start began succeeds meanwhile, that target's gate is open
// and its startup counts as a success.
func (c *Checker) Start(ctx context.Context) error {
	c.startMu.Lock()
	defer c.startMu.Unlock()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	var todo []*target
	for _, t := range c.targets {
		if t.st.gate != gateOpen {
			t.st.gate = gateRunning
			todo = append(todo, t)
		}
	}
	c.mu.Unlock()
	if len(todo) == 0 {
		return nil
	}

	errs := make([]error, len(todo))
	var wg sync.WaitGroup
	for i, t := range todo {
		wg.Go(func() { errs[i] = c.startTarget(ctx, t) })
	}
	wg.Wait()

	if len(c.targets) == 1 {
		return errs[0]
	}
	var failed []error
	for i, err := range errs {
		if err != nil && !todo[i].optional {
			failed = append(failed, &TargetError{Target: todo[i].name, Err: err})
		}
	}
	return errors.Join(failed...)
}

// startTarget makes t's first connection and records the outcome.
func (c *Checker) startTarget(ctx context.Context, t *target) error {
	err := t.start(ctx)

	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.st.gate == gateOpen {
		return nil // a check that was already running when Start began opened it
	}
	if err == nil {
		c.openLocked(t, now)
		c.log.LogAttrs(ctx, slog.LevelInfo, "readiness: startup: first connection made", t.attrs...)
		return nil
	}
	v := t.factory.Classify(err)
	t.st.gate, t.st.started, t.st.startV, t.st.startErr = gateFailed, now, v, err
	level, msg := slog.LevelError, "readiness: startup: first connection failed; not ready until the database answers"
	if t.optional {
		level, msg = slog.LevelWarn, "readiness: startup: first connection failed; the target is optional: readiness warns until the database answers"
	}
	c.log.LogAttrs(ctx, level, msg, t.logAttrs(
		slog.String("error.class", v.Class.String()),
		slog.String("error.reason", v.Reason),
		slog.String("error", t.redact(err.Error())))...)
	return err
}

// openLocked opens t's gate: its first connection has been made.
func (c *Checker) openLocked(t *target, now time.Time) {
	st := &t.st
	st.gate, st.started = gateOpen, now
	st.startV, st.startErr = classify.Verdict{}, nil
	st.db.checked, st.db.lastSuccess, st.db.failures, st.db.err = now, now, 0, nil
}

// Check returns the readiness status, first refreshing the database checks
// when their cached result is older than CheckInterval. Concurrent callers
// share one running check (of every target, concurrently); each waits for
// it at most ProbeTimeout (or until ctx ends), then answers from the last
// known result, so that a fleet of probers can neither stampede the
// database nor wait on a hanging one. No check of a target runs while its
// Start runs, and none while the service is not Enabled or after Close.
//
// The check of a pgxpool acquires a connection from the pool (never one
// of its own, so that it sees pool exhaustion) and runs one query on it,
// within CheckTimeout; that of a *sql.DB runs the query through
// database/sql, as the application's code reaches the database. Once the
// gate is open, transient failures of new connections are retried by the
// pool's holdfast layers; a persistent failure shows in readiness after
// FailureThreshold consecutive failed checks.
//
// A pool of a factory WithServerlessV2 is not queried once it has
// connected: a check would keep its connection, and its instance, awake.
// Its check passes, and its database's state is its outage layer's:
// "waking" while a request wakes it, "database-down" when it is down.
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
// or nil when the cached results stand. A check is due when the result of
// a target that is not starting is older than CheckInterval; it checks
// every target that is not starting.
func (c *Checker) refreshLocked(now time.Time) *checkCall {
	if c.call != nil {
		return c.call
	}
	if c.closed || c.drain.state != Enabled {
		return nil
	}
	var due bool
	var ts []*target
	for _, t := range c.targets {
		if t.st.gate == gateRunning {
			continue
		}
		ts = append(ts, t)
		if t.st.db.checked.IsZero() || now.Sub(t.st.db.checked) >= c.cfg.CheckInterval {
			due = true
		}
	}
	if !due {
		return nil
	}
	call := &checkCall{done: make(chan struct{})}
	c.call = call
	c.wg.Add(1)
	go c.runCheck(call, ts)
	return call
}

// runCheck runs one database check of each of ts, concurrently, and records
// them. It and the goroutines it starts (and joins) are the Checker's only
// long-lived goroutines; Close cancels their context and joins them.
func (c *Checker) runCheck(call *checkCall, ts []*target) {
	defer c.wg.Done()
	type result struct {
		latency time.Duration
		err     error
	}
	res := make([]result, len(ts))
	var wg sync.WaitGroup
	for i, t := range ts {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(c.ctx, c.cfg.CheckTimeout)
			defer cancel()
			t0 := time.Now()
			err := t.check(ctx)
			res[i] = result{time.Since(t0), err}
			t.tel.Checked(c.ctx, res[i].latency, err == nil)
		})
	}
	wg.Wait()

	now := c.now()
	c.mu.Lock()
	for i, t := range ts {
		c.recordLocked(t, now, res[i].latency, res[i].err)
	}
	c.call = nil
	c.mu.Unlock()
	close(call.done)
}

func (c *Checker) recordLocked(t *target, now time.Time, latency time.Duration, err error) {
	db := &t.st.db
	db.checks++
	db.checked = now
	if err == nil {
		if db.failures >= c.cfg.FailureThreshold {
			c.log.LogAttrs(c.ctx, slog.LevelInfo, "readiness: database check recovered",
				t.logAttrs(slog.Int("failures", db.failures))...)
		}
		db.failures, db.err, db.lastSuccess, db.latency = 0, nil, now, latency
		if t.st.gate != gateOpen {
			c.openLocked(t, now)
			c.log.LogAttrs(c.ctx, slog.LevelInfo, "readiness: startup: first connection made by a readiness check", t.attrs...)
		}
		return
	}
	db.failures++
	db.err = err
	db.verdict = t.factory.Classify(err)
	level := slog.LevelDebug
	if db.failures == c.cfg.FailureThreshold && t.st.gate == gateOpen {
		level = slog.LevelError // the transition to not ready
		if t.optional {
			level = slog.LevelWarn // only a warning: the target is not required
		}
	}
	c.log.LogAttrs(c.ctx, level, "readiness: database check failed", t.logAttrs(
		slog.Int("failures", db.failures),
		slog.Int("threshold", c.cfg.FailureThreshold),
		slog.Bool("required", !t.optional),
		slog.String("error.class", db.verdict.Class.String()),
		slog.String("error.reason", db.verdict.Reason),
		slog.String("error", t.redact(err.Error())))...)
}

// Close stops the running check and waits for it, interrupts every waiting
// [Checker.Drain] (they return a [*DrainTimeoutError] whose Cause is
// [ErrClosed]) and waits for them to return, and makes readiness fail with
// reason "closed". It does not close the targets. Close is idempotent and
// safe to call concurrently; every call returns once the Checker's
// goroutines are gone.
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

// redact removes from s the secrets every target knows (see
// target.redact).
func (c *Checker) redact(s string) string {
	for _, t := range c.targets {
		s = t.redact(s)
	}
	return s
}

// serviceTelemetry records the service's own series (ready, transitions,
// drain.duration) through the telemetry of the factory that configured a
// target's pool: the first target of Config.Factory (no Target.Factory of
// its own) whose pool a holdfast factory configured, else the first such
// target; nil (record nothing) when no factory configured any of them.
func serviceTelemetry(ts []*target) *obs.Readiness {
	var first *obs.Readiness
	for _, t := range ts {
		switch {
		case t.rtel == nil:
		case !t.ownFactory:
			return t.rtel
		case first == nil:
			first = t.rtel
		}
	}
	return first
}
