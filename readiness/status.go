package readiness

import (
	"fmt"
	"time"

	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/failover"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/internal/drain"
	"github.com/holdfast-db/holdfast/internal/enum"
	"github.com/holdfast-db/holdfast/internal/outage"
	"github.com/jackc/pgx/v5/pgxpool"
)

// State is the drain state of a service, as in the L4 procedure. The zero
// value is Enabled.
type State int

const (
	// Enabled: in service. Readiness reflects the startup gate and the
	// database check.
	Enabled State = iota
	// Disabling: a drain was asked for. Readiness answers 503 "draining"
	// and the drain waits for the traffic to go. A drain that timed out
	// leaves the service Disabling.
	Disabling
	// Disabled: a drain proved the traffic gone (no acquired connection,
	// no in-flight request). Readiness still answers 503 "draining".
	Disabled
)

var stateNames = [...]string{Enabled: "Enabled", Disabling: "Disabling", Disabled: "Disabled"}

// String returns "Enabled", "Disabling", "Disabled" or "State(N)".
func (s State) String() string { return enum.Name("State", s, stateNames[:]) }

// Health is the overall status, as in the application/health+json draft.
type Health string

// The values of Health. Pass and Warn answer 200, Fail answers 503.
const (
	Pass Health = "pass"
	Warn Health = "warn"
	Fail Health = "fail"
)

// The reasons of a Status that is not Pass (see [Status].Reason).
const (
	reasonClosed        = "closed"
	reasonDraining      = "draining"
	reasonStarting      = "starting"
	reasonStartupFailed = "startup-failed"
	reasonDatabase      = "database"
	reasonSaturated     = "pool-saturated"
	reasonFailover      = "failover"
	reasonDown          = "database-down"
	reasonTokenDown     = "token-source-down"
	reasonWaking        = "waking"
	reasonOutOfHome     = "writer-out-of-home"
)

// InUse is what a drain waits for.
type InUse struct {
	AcquiredConns int64 // connections acquired from the targets' pools (pgxpool.Stat.AcquiredConns), summed
	InFlight      int64 // requests counted by Middleware and Begin
}

// String lists what is in use, for example
// "1 acquired connection, 2 in-flight requests", or "nothing in use".
func (u InUse) String() string { return u.usage().String() }

func (u InUse) usage() drain.Usage {
	return drain.Usage{{What: "acquired connection", N: u.AcquiredConns}, {What: "in-flight request", N: u.InFlight}}
}

func inUseOf(u drain.Usage) InUse {
	var r InUse
	for _, c := range u {
		switch c.What {
		case "acquired connection":
			r.AcquiredConns = c.N
		case "in-flight request":
			r.InFlight = c.N
		}
	}
	return r
}

// Status is a snapshot of a [Checker]. Times are zero when the event has not
// happened.
//
// Health and Reason are the Checker's answer: Fail for "closed" and
// "draining", else the worst of its targets' (a failing target that is not
// required counts as Warn), with the reason of the first target that has
// it. Target, BlueGreen, Failover, Startup, Database and Pool describe one
// target: the only one of a Checker of one target; of several, the target
// that decided Health and Reason (the first with the worst health), or the
// first target when every one passes. Targets describes them all.
type Status struct {
	// BlueGreen is the pool's blue/green routing status (phase, routing,
	// mapping, timeline) when the pool was configured with
	// holdfast.WithBlueGreen, else nil. A switchover under way does not
	// make the service unready: holdfast holds and reroutes its traffic.
	BlueGreen *bluegreen.Status
	// Failover is the writer-failover monitor's status with
	// holdfast.WithFailover, else nil.
	Failover *failover.Status

	Health Health // Pass, Warn or Fail
	// Reason is why Health is not Pass, "" for Pass: the first of these
	// that applies, as the probe's body says it ("reason"):
	//
	//	reason          health      when
	//	closed          fail        Checker.Close was called
	//	draining        fail        the drain state is Disabling or Disabled
	//	starting        fail        the startup gate has not opened yet
	//	startup-failed  fail        Start failed and no check has succeeded since
	//	database-down   warn, fail  the pool's database is down (holdfast.WithOutage holds the requests
	//	                            that need a new connection): warn until NotReadyAfter, fail after;
	//	                            ready again as soon as it is back
	//	token-source-down  warn     no new connection can be made: its token or certificate cannot be
	//	                            fetched (the password function, or the connector's token and Admin
	//	                            API calls fail) and holdfast.WithOutage holds the requests that need
	//	                            one; the pool's open connections still serve, so it does not fail
	//	                            (the database check does, if they end)
	//	waking          warn        the pool wakes its paused database (holdfast.WithServerlessV2): its
	//	                            requests wait for the resume, within WakeFor; database-down after it
	//	failover        warn        checks failed while the cluster fails over (holdfast.WithFailover):
	//	                            holdfast holds and reroutes the traffic, so readiness does not fail
	//	database        warn, fail  the database check failed: warn below FailureThreshold, fail at it
	//	writer-out-of-home  warn    an Aurora Global Database's writer is outside
	//	                            failover.GlobalConfig.HomeRegion (failover.Status.OutOfHome): the
	//	                            pools meant for writes follow it, are read-only or held, by OutOfHome
	//	pool-saturated  warn        every connection of the pool is acquired
	//
	// A failing target that is not required (Target.Optional) makes the
	// service answer warn with its reason.
	Reason string

	Target   string // the name of the target described by the fields below
	Startup  StartupStatus
	Database DatabaseStatus
	Pool     PoolStatus
	Drain    DrainStatus

	// Targets is the status of every target, in the order given to
	// New.
	Targets []TargetStatus
}

// TargetStatus is the status of one target of a Checker.
type TargetStatus struct {
	Name     string // Target.Name, or its default
	Kind     string // "pgxpool", or "database/sql" for a target with a DB (its check runs through database/sql)
	Optional bool   // Target.Optional: its failure only makes the Checker warn

	// Health and Reason are the target's own: Fail when its check fails,
	// also for an optional target (the Checker then answers Warn).
	// Reasons: "starting", "startup-failed", "database-down", "waking", "database",
	// "failover", "writer-out-of-home", "pool-saturated", or "" for Pass.
	Health Health
	Reason string

	Startup   StartupStatus
	Database  DatabaseStatus
	Pool      PoolStatus
	BlueGreen *bluegreen.Status
	Failover  *failover.Status
}

// Ready reports whether a probe answers 200: Health is not Fail.
func (s Status) Ready() bool { return s.Health != Fail }

// StartupStatus is the state of the startup gate.
type StartupStatus struct {
	Done    bool             // the first connection has been made: the gate is open
	Running bool             // Start is running
	At      time.Time        // when the gate opened, or when Start last failed
	Cause   classify.Verdict // why Start last failed; zero when Done
	Err     error            // the error of the last failed Start; for logs, never served
}

// DatabaseStatus is the cached result of the database checks.
type DatabaseStatus struct {
	Checked             time.Time        // when the last check ended, or the gate opened
	LastSuccess         time.Time        // the last successful check, or the opening of the gate
	Latency             time.Duration    // of the last successful check
	ConsecutiveFailures int              // failed checks since the last success
	Threshold           int              // Config.FailureThreshold
	Cause               classify.Verdict // why the last check failed, when ConsecutiveFailures > 0
	Err                 error            // the last check's error; for logs, never served
	Checks              int64            // checks run so far
	// DownSince is when the pool's outage layer (holdfast.WithOutage)
	// found its database down (the first sign); zero while it is up.
	DownSince time.Time
}

// PoolStatus is the pool's occupancy (pgxpool.Stat) when the Status was
// taken.
type PoolStatus struct {
	Acquired, Idle, Total, Max int32
}

// DrainStatus is the drain state and its lock.
type DrainStatus struct {
	State    State
	Owner    string        // who holds the drain; "" when Enabled
	Since    time.Time     // when State was entered
	LockedAt time.Time     // when Owner took the drain
	InFlight int64         // requests in flight now
	InUse    InUse         // what the last drain poll found
	ByTarget []TargetInUse // what the last drain poll found, per target
	Polled   time.Time     // when the last drain poll ran
}

// String returns the status with its detail, as [Checker.AdminHandler]'s
// "output" says it, for example "ok",
// "not ready: draining (Disabling by \"deploy-42\")" or
// "not ready: startup-failed (transient/conn-refused)". It names the drain's
// owner and, with several targets, the target: the probe
// ([Checker.ReadyHandler]) answers without the detail.
func (s Status) String() string {
	if s.Health == Pass {
		return "ok"
	}
	text := "not ready: " + s.Reason
	if s.Health == Warn {
		text = "ok (warn): " + s.Reason
	}
	if d := s.detail(); d != "" {
		text += " (" + d + ")"
	}
	return text
}

// probeText is the probe's plain-text answer: the status and its reason,
// without the detail.
func (s Status) probeText() string {
	switch s.Health {
	case Pass:
		return "ok"
	case Warn:
		return "ok (warn): " + s.Reason
	}
	return "not ready: " + s.Reason
}

func (s Status) detail() string {
	d := s.targetDetail()
	if len(s.Targets) > 1 && s.Reason != reasonDraining && s.Reason != reasonClosed {
		if d == "" {
			return s.Target
		}
		return s.Target + ": " + d
	}
	return d
}

// targetDetail is the detail of the reason, from the fields of the target
// that decided it.
func (s Status) targetDetail() string {
	switch s.Reason {
	case reasonDraining:
		return fmt.Sprintf("%s by %q", s.Drain.State, s.Drain.Owner)
	case reasonStartupFailed:
		return s.Startup.Cause.String()
	case reasonDatabase:
		n := s.Database.ConsecutiveFailures
		noun := "consecutive failures"
		if n == 1 {
			noun = "consecutive failure"
		}
		return fmt.Sprintf("%s, %d %s", s.Database.Cause, n, noun)
	case reasonSaturated:
		return fmt.Sprintf("%d of %d connections acquired", s.Pool.Acquired, s.Pool.Max)
	case reasonDown:
		return "since " + s.Database.DownSince.UTC().Format(time.RFC3339)
	}
	return ""
}

// Status returns the current status without running a check.
func (c *Checker) Status() Status {
	stats := make([]*pgxpool.Stat, len(c.targets))
	for i, t := range c.targets {
		stats[i] = t.pool.Stat()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.statusLocked(stats)
}

// rank orders healths: the worst is the highest.
func rank(h Health) int {
	switch h {
	case Pass:
		return 0
	case Warn:
		return 1
	}
	return 2
}

func (c *Checker) statusLocked(stats []*pgxpool.Stat) Status {
	s := Status{
		Drain: DrainStatus{
			State:    c.drain.state,
			Owner:    c.drain.owner,
			Since:    c.drain.since,
			LockedAt: c.drain.lockSince,
			InFlight: c.inflight.Load(),
			InUse:    c.drain.inUse,
			ByTarget: c.drain.byTarget,
			Polled:   c.drain.polled,
		},
		Targets: make([]TargetStatus, len(c.targets)),
	}
	decider, worst := 0, -1
	for i, t := range c.targets {
		ts := c.targetStatusLocked(t, stats[i])
		s.Targets[i] = ts
		h := ts.Health
		if t.optional && h == Fail {
			h = Warn // not required: it only warns
		}
		if rank(h) > worst {
			decider, worst = i, rank(h)
			s.Health, s.Reason = h, ts.Reason
		}
	}
	d := s.Targets[decider]
	s.Target, s.Startup, s.Database, s.Pool, s.BlueGreen, s.Failover = d.Name, d.Startup, d.Database, d.Pool, d.BlueGreen, d.Failover
	switch {
	case c.closed:
		s.Health, s.Reason = Fail, reasonClosed
	case c.drain.state != Enabled:
		s.Health, s.Reason = Fail, reasonDraining
	}
	c.noteLocked(s)
	return s
}

// targetStatusLocked is t's own status; st is its pool's Stat.
func (c *Checker) targetStatusLocked(t *target, st *pgxpool.Stat) TargetStatus {
	g, db := &t.st, &t.st.db
	s := TargetStatus{
		Name:     t.name,
		Kind:     t.kind,
		Optional: t.optional,
		Startup: StartupStatus{
			Done:    g.gate == gateOpen,
			Running: g.gate == gateRunning,
			At:      g.started,
			Cause:   g.startV,
			Err:     g.startErr,
		},
		Database: DatabaseStatus{
			Checked:             db.checked,
			LastSuccess:         db.lastSuccess,
			Latency:             db.latency,
			ConsecutiveFailures: db.failures,
			Threshold:           c.cfg.FailureThreshold,
			Checks:              db.checks,
		},
		Pool: PoolStatus{Acquired: st.AcquiredConns(), Idle: st.IdleConns(), Total: st.TotalConns(), Max: st.MaxConns()},
	}
	if db.failures > 0 {
		s.Database.Cause, s.Database.Err = db.verdict, db.err
	}
	if r := t.blueGreen(); r != nil {
		bg := r.Status()
		s.BlueGreen = &bg
	}
	failingOver := false
	if m := t.factory.Failover(t.pool); m != nil {
		fo := m.Status()
		s.Failover = &fo
		failingOver = m.Active()
	}
	out := t.outage()
	if out.Down {
		s.Database.DownSince = out.Since
	}
	// Failed checks from before the database came back are over: ready
	// again at "back", not at the next check.
	stale := db.failures > 0 && !out.Back.IsZero() && !out.Back.Before(db.checked)
	s.Health, s.Reason = Fail, ""
	switch {
	case g.gate == gateFailed:
		s.Reason = reasonStartupFailed
	case g.gate != gateOpen:
		s.Reason = reasonStarting
	case out.Down && outage.TokenSource(out.Cause):
		s.Health, s.Reason = Warn, reasonTokenDown
	case out.Down && c.now().Sub(out.Since) >= c.cfg.NotReadyAfter:
		s.Reason = reasonDown
	case out.Down:
		s.Health, s.Reason = Warn, reasonDown
	case out.Waking:
		s.Health, s.Reason = Warn, reasonWaking
	case stale:
		s.Health = Pass
	case db.failures > 0 && failingOver:
		s.Health, s.Reason = Warn, reasonFailover
	case db.failures >= c.cfg.FailureThreshold:
		s.Reason = reasonDatabase
	case db.failures > 0:
		s.Health, s.Reason = Warn, reasonDatabase
	case s.Failover != nil && s.Failover.OutOfHome:
		s.Health, s.Reason = Warn, reasonOutOfHome
	case s.Pool.Max > 0 && s.Pool.Acquired >= s.Pool.Max:
		s.Health, s.Reason = Warn, reasonSaturated
	default:
		s.Health = Pass
	}
	return s
}

// noteLocked records a change of the answered health or reason in the
// factory's telemetry (holdfast.readiness.ready and .transitions), and of
// each target's own (holdfast.readiness.check.ready and .transitions).
func (c *Checker) noteLocked(s Status) {
	for i, t := range c.targets {
		ts := s.Targets[i]
		if ts.Health != t.st.lastHealth || ts.Reason != t.st.lastReason {
			t.st.lastHealth, t.st.lastReason = ts.Health, ts.Reason
			t.tel.Changed(c.ctx, string(ts.Health), ts.Reason)
		}
	}
	if c.tel == nil || (s.Health == c.lastHealth && s.Reason == c.lastReason) {
		return
	}
	c.lastHealth, c.lastReason = s.Health, s.Reason
	c.tel.Changed(c.ctx, s.Ready(), string(s.Health), s.Reason)
}
