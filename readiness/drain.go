package readiness

import (
	"context"
	"errors"
	"log/slog"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/holdfast-db/holdfast/internal/drain"
)

// drainState is the drain state machine and its lock.
type drainState struct {
	state     State
	owner     string    // the lock holder; "" when Enabled
	since     time.Time // when state was entered
	lockSince time.Time
	inUse     InUse         // last poll
	byTarget  []TargetInUse // last poll, per target
	polled    time.Time
	// epoch ends (with ErrEnabled or ErrClosed as its cause) when the
	// drains started since the service left Enabled must stop waiting.
	epoch       context.Context
	cancelEpoch context.CancelCauseFunc
}

// DrainResult describes a successful drain.
type DrainResult struct {
	Owner   string
	Elapsed time.Duration // from the start of the drain to the poll that read zero
	Polls   int
}

// A DrainOption changes one call of [Checker.Drain].
type DrainOption func(*drainOptions)

type drainOptions struct {
	timeout  time.Duration
	takeOver bool
	err      error
}

// WithDrainTimeout bounds this drain by d instead of Config.DrainTimeout.
// d must be positive.
func WithDrainTimeout(d time.Duration) DrainOption {
	return func(o *drainOptions) {
		if d <= 0 {
			o.err = &ConfigError{Pkg: "readiness", Field: "WithDrainTimeout", Why: "must be positive (got " + d.String() + ")"}
			return
		}
		o.timeout = d
	}
}

// TakeOver makes this drain take the lock even when another owner holds it
// (the take-over is logged). [Checker.Serve] uses it on SIGTERM: the
// process is going away whoever holds the drain.
func TakeOver() DrainOption {
	return func(o *drainOptions) { o.takeOver = true }
}

// maxOwner bounds the length of an owner string.
const maxOwner = 128

// checkOwner rejects an empty, overlong or unprintable owner.
func checkOwner(owner string) error {
	switch {
	case owner == "":
		return &ConfigError{Pkg: "readiness", Field: "owner", Why: "must not be empty: say who asks for the drain"}
	case len(owner) > maxOwner:
		return &ConfigError{Pkg: "readiness", Field: "owner", Why: "longer than 128 bytes"}
	case !utf8.ValidString(owner):
		return &ConfigError{Pkg: "readiness", Field: "owner", Why: "not valid UTF-8"}
	}
	for _, r := range owner {
		if !unicode.IsPrint(r) {
			return &ConfigError{Pkg: "readiness", Field: "owner", Why: "contains an unprintable character"}
		}
	}
	return nil
}

// Drain takes the service out of service and waits until its traffic is
// gone, with proof:
//
//  1. It takes the drain lock for owner (who asks: a person, a CI job,
//     "shutdown") and switches the state to Disabling: readiness answers
//     503 "draining" at once, so that orchestrators and load balancers stop
//     sending new work, and no database check runs meanwhile. With
//     Config.RefuseWhileDraining, [Checker.Middleware] refuses new requests.
//  2. It polls, at once and then every Config.DrainInterval, the
//     connections acquired from every target's pool (for a *sql.DB, the
//     pool under it: a Rows, Tx or *sql.Conn the application holds) and
//     the in-flight requests counted by [Checker.Middleware] and
//     [Checker.Begin], until both are zero.
//  3. Then the state becomes Disabled and Drain returns the [DrainResult].
//
// When the bound (Config.DrainTimeout, or [WithDrainTimeout]) passes first,
// after one last poll at that moment, or ctx ends, Drain returns a
// [*DrainTimeoutError] naming what was still in use, and the service stays
// Disabling: nothing proves the traffic gone, so the deploy should be
// aborted. [Checker.Enable] and [Checker.Close] interrupt a waiting drain.
//
// The lock is held from the first Drain until Enable. While another owner
// holds it, Drain returns a [*LockedError] naming the holder, unless
// [TakeOver] is given. The same owner may drain again at any time (again
// after a timeout, or concurrently); each call waits on its own. Drain
// returns a [*ConfigError] for an empty, overlong (over 128 bytes) or
// unprintable owner, and [ErrClosed] after Close.
func (c *Checker) Drain(ctx context.Context, owner string, opts ...DrainOption) (DrainResult, error) {
	if err := checkOwner(owner); err != nil {
		return DrainResult{}, err
	}
	o := drainOptions{timeout: c.cfg.DrainTimeout}
	for _, opt := range opts {
		if opt == nil {
			return DrainResult{}, &ConfigError{Pkg: "readiness", Field: "DrainOption", Why: "an option is nil"}
		}
		opt(&o)
	}
	if o.err != nil {
		return DrainResult{}, o.err
	}

	now := c.now()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return DrainResult{}, ErrClosed
	}
	d := &c.drain
	if d.owner != "" && d.owner != owner && !o.takeOver {
		err := &LockedError{Holder: d.owner, Since: d.lockSince, State: d.state, Requester: owner}
		c.mu.Unlock()
		c.log.LogAttrs(ctx, slog.LevelWarn, "readiness: drain refused: held by another owner",
			slog.String("owner", owner), slog.String("holder", err.Holder), slog.String("state", err.State.String()))
		return DrainResult{}, err
	}
	if d.owner != owner {
		if d.owner != "" {
			c.log.LogAttrs(ctx, slog.LevelWarn, "readiness: drain taken over",
				slog.String("owner", owner), slog.String("previous_owner", d.owner))
		}
		d.owner, d.lockSince = owner, now
	}
	if d.state != Disabling {
		c.setStateLocked(Disabling, now)
	}
	if d.epoch == nil {
		d.epoch, d.cancelEpoch = context.WithCancelCause(context.Background())
	}
	epoch := d.epoch
	c.wg.Add(1) // Close waits for the drains it interrupts
	c.mu.Unlock()
	defer c.wg.Done()

	c.log.LogAttrs(ctx, slog.LevelInfo, "readiness: drain started: readiness answers 503",
		slog.String("owner", owner), slog.Float64("bound_s", o.timeout.Seconds()), slog.Float64("interval_s", c.cfg.DrainInterval.Seconds()))

	wctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	unhook := context.AfterFunc(epoch, func() { stop(context.Cause(epoch)) })
	defer unhook()

	res, err := drain.Wait(wctx, drain.Config{Interval: c.cfg.DrainInterval, Timeout: o.timeout}, c.poll)

	now = c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		if d.epoch == epoch && d.owner == owner {
			c.setStateLocked(Disabled, now)
		}
		c.log.LogAttrs(ctx, slog.LevelInfo, "readiness: drain complete: no acquired connection, no in-flight request",
			slog.String("owner", owner), slog.Float64("elapsed_s", res.Elapsed.Seconds()), slog.Int("polls", res.Polls))
		c.tel.Drained(ctx, res.Elapsed, "drained")
		return DrainResult{Owner: owner, Elapsed: res.Elapsed, Polls: res.Polls}, nil
	}
	var te *drain.TimeoutError
	if !errors.As(err, &te) {
		return DrainResult{}, err // not reached: the probe never fails and the config is valid
	}
	inUse, by := inUseOf(te.InUse), d.byTarget
	if te.InUse == nil { // stopped before the first poll
		inUse, by = c.inUse()
	}
	derr := &DrainTimeoutError{Owner: owner, Bound: o.timeout, Elapsed: te.Elapsed, InUse: inUse, Cause: te.Cause, State: d.state}
	if len(c.targets) > 1 {
		derr.ByTarget = by
	}
	outcome := "timeout"
	if te.Cause != nil {
		outcome = "interrupted"
	}
	c.tel.Drained(ctx, te.Elapsed, outcome)
	c.log.LogAttrs(ctx, slog.LevelError, "readiness: drain did not complete; traffic not proven gone",
		slog.String("owner", owner), slog.String("error", derr.Error()),
		slog.Int64("acquired_conns", inUse.AcquiredConns), slog.Int64("in_flight", inUse.InFlight))
	for _, t := range derr.ByTarget {
		if t.AcquiredConns > 0 {
			c.log.LogAttrs(ctx, slog.LevelError, "readiness: drain did not complete: connections still acquired from a target",
				c.targetNamed(t.Name).logAttrs(slog.String("owner", owner), slog.Int64("acquired_conns", t.AcquiredConns))...)
		}
	}
	return DrainResult{}, derr
}

// poll is the drain probe: what is in use now.
func (c *Checker) poll(context.Context) (drain.Usage, error) {
	u, by := c.inUse()
	now := c.now()
	c.mu.Lock()
	c.drain.inUse, c.drain.byTarget, c.drain.polled = u, by, now
	hook := c.pollHook
	c.mu.Unlock()
	if hook != nil {
		hook(u)
	}
	return u.usage(), nil
}

// inUse returns what is in use now: the connections acquired from every
// target's pool, and the requests in flight; and the acquired connections
// per target.
func (c *Checker) inUse() (InUse, []TargetInUse) {
	u := InUse{InFlight: c.inflight.Load()}
	by := make([]TargetInUse, 0, len(c.targets))
	for _, t := range c.targets {
		n := int64(t.pool.Stat().AcquiredConns())
		u.AcquiredConns += n
		by = append(by, TargetInUse{Name: t.name, AcquiredConns: n})
	}
	return u, by
}

// targetNamed returns the target named name, which exists.
func (c *Checker) targetNamed(name string) *target {
	for _, t := range c.targets {
		if t.name == name {
			return t
		}
	}
	return c.targets[0] // not reached
}

// drainStateNow returns the drain state, without the lock.
func (c *Checker) drainStateNow() State { return State(c.state.Load()) }

// Enable returns the service to Enabled and releases the drain lock,
// whoever holds it: readiness follows the startup gate and the database
// check again, and any drain still waiting returns a [*DrainTimeoutError]
// whose Cause is [ErrEnabled]. It does nothing when the service is Enabled
// or the Checker is closed.
func (c *Checker) Enable() { _ = c.enable(context.Background(), "") }

// enable is Enable; a non-empty owner must hold the lock (or no one must).
func (c *Checker) enable(ctx context.Context, owner string) error {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	d := &c.drain
	if c.closed || d.state == Enabled {
		return nil
	}
	if owner != "" && d.owner != owner {
		return &LockedError{Holder: d.owner, Since: d.lockSince, State: d.state, Requester: owner}
	}
	c.log.LogAttrs(ctx, slog.LevelInfo, "readiness: enabled: back in service",
		slog.String("by", owner), slog.String("previous_owner", d.owner), slog.String("previous_state", d.state.String()))
	d.cancelEpoch(ErrEnabled)
	*d = drainState{inUse: d.inUse, byTarget: d.byTarget, polled: d.polled}
	c.setStateLocked(Enabled, now)
	return nil
}

// setStateLocked changes the drain state.
func (c *Checker) setStateLocked(s State, now time.Time) {
	c.drain.state, c.drain.since = s, now
	c.state.Store(int32(s))
}
