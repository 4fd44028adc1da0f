package lb

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Action is a control request's verb.
type Action string

// Actions.
const (
	ActionEnable        Action = "enable"         // set Enabled
	ActionDisable       Action = "disable"        // set Disabled
	ActionForcedOffline Action = "forced-offline" // set ForcedOffline, do not wait
	ActionDrain         Action = "drain"          // set ForcedOffline and wait for zero connections
)

// State returns the admin state the action sets, and false for an unknown
// action.
func (a Action) State() (AdminState, bool) {
	switch a {
	case ActionEnable:
		return Enabled, true
	case ActionDisable:
		return Disabled, true
	case ActionForcedOffline, ActionDrain:
		return ForcedOffline, true
	}
	return StateUnknown, false
}

// DefaultConcurrency is how many members a [Controller] drives at once by
// default.
const DefaultConcurrency = 8

// cleanupTimeout bounds logout, unlock, restore and the final audit write,
// which run even when the request's context has ended.
const cleanupTimeout = 30 * time.Second

// ErrSkipped is the error recorded for members a group request did not
// start because another member had already failed.
var ErrSkipped = errors.New("lb: skipped: another member of the group failed first")

// ControllerConfig configures [NewController].
type ControllerConfig struct {
	// Balancers by name; each must be safe for concurrent use. Required.
	Balancers map[string]Balancer
	// Groups of targets by name; every target names one of Balancers.
	// Required.
	Groups map[string][]Target
	// Permissions says who may control which group. Required (the zero
	// value permits nothing).
	Permissions Permissions
	// Locker provides group locks. Required.
	Locker Locker
	// Audit stores every control request; nil keeps only the log lines.
	Audit AuditLog
	// Logger receives one structured line when a request starts and one
	// with its result. Default slog.Default().
	Logger *slog.Logger
	// Drain bounds drains; zero fields mean the defaults.
	Drain DrainConfig
	// Concurrency is how many members are driven at once (>= 0; 0 means
	// DefaultConcurrency).
	Concurrency int
	// Host is recorded in the audit trail. Default os.Hostname().
	Host string
	// Notifier, if not nil, is told when a drain starts and ends
	// (drained, timed out, failed), when members are enabled, disabled or
	// forced offline, and when a request is refused because the group is
	// locked. It must not block (see [Notifier]).
	Notifier Notifier
	// Metrics, if not nil, records requests, drain durations, timeouts,
	// lock waits, failed API calls and members by phase (see [MeterName]).
	Metrics *Metrics
	// Origin is recorded in every audit entry beside the request's
	// asserted Operator (its Via comes from [Request].OperatorVia): the
	// OS user and CI identity of this process. Default
	// ProcessOrigin(os.Getenv), looked up once by NewController.
	Origin Origin
	// TransportNotes maps a balancer's name to what is unsafe about
	// reaching it (see [BalancerConfig.TransportWarning]); every request
	// reaching it records the note in its audit entry ([Entry].Notes)
	// and logs its lines as warnings.
	TransportNotes map[string]string
}

// Controller runs control requests on groups of members: it checks
// permissions, takes the group's lock (and its members' locks: see
// [Locker]), logs in, reads every member, changes them (draining, for
// ActionDrain) with bounded concurrency, logs out, releases the lock and
// records the request and its result. Create one with [NewController];
// it is safe for concurrent use.
type Controller struct {
	cfg     ControllerConfig
	members map[string][]LockMember // by group: what its lock covers
}

// NewController validates cfg and returns a Controller.
func NewController(cfg ControllerConfig) (*Controller, error) {
	switch {
	case len(cfg.Balancers) == 0:
		return nil, &ConfigError{Pkg: "lb", Field: "Balancers", Why: "at least one is required"}
	case len(cfg.Groups) == 0:
		return nil, &ConfigError{Pkg: "lb", Field: "Groups", Why: "at least one is required"}
	case cfg.Locker == nil:
		return nil, &ConfigError{Pkg: "lb", Field: "Locker", Why: "must not be nil: a group is locked before any change"}
	case cfg.Concurrency < 0:
		return nil, &ConfigError{Pkg: "lb", Field: "Concurrency", Why: "must not be negative"}
	}
	for name, b := range cfg.Balancers {
		if b == nil {
			return nil, &ConfigError{Pkg: "lb", Field: "Balancers." + name, Why: "must not be nil"}
		}
	}
	for _, g := range slices.Sorted(maps.Keys(cfg.Groups)) {
		if len(cfg.Groups[g]) == 0 {
			return nil, &ConfigError{Pkg: "lb", Field: "Groups." + g, Why: "has no members"}
		}
		for i, t := range cfg.Groups[g] {
			if _, ok := cfg.Balancers[t.Balancer]; !ok {
				return nil, &ConfigError{Pkg: "lb", Field: "Groups." + g + "." + strconv.Itoa(i), Why: "unknown balancer " + strconv.Quote(t.Balancer)}
			}
			if err := t.Member.Validate(); err != nil {
				return nil, prefix("Groups."+g+"."+strconv.Itoa(i), err)
			}
		}
	}
	if err := cfg.Drain.Validate(); err != nil {
		return nil, err
	}
	cfg.Drain = cfg.Drain.withDefaults()
	cfg.Concurrency = cmp.Or(cfg.Concurrency, DefaultConcurrency)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	if cfg.Host == "" {
		cfg.Host, _ = os.Hostname()
	}
	if cfg.Origin.IsZero() {
		cfg.Origin = ProcessOrigin(nil)
	}
	cfg.Origin.Via = ""
	members := lockMembers(cfg.Balancers, cfg.Groups)
	bs := make(map[string]Balancer, len(cfg.Balancers))
	for n, b := range cfg.Balancers {
		bs[n] = instrument(b, cfg.Metrics)
	}
	cfg.Balancers = bs
	cfg.Metrics.knowGroups(cfg.Groups)
	return &Controller{cfg: cfg, members: members}, nil
}

// lockMembers returns, by group, the members its lock covers, on their
// devices.
func lockMembers(balancers map[string]Balancer, groups map[string][]Target) map[string][]LockMember {
	devices := make(map[string]string, len(balancers))
	for n, b := range balancers {
		devices[n] = "balancer " + n
		if d, ok := b.(DeviceIdentifier); ok {
			if id := d.DeviceID(); id != "" {
				devices[n] = id
			}
		}
	}
	out := make(map[string][]LockMember, len(groups))
	for g, ts := range groups {
		ms := make([]LockMember, len(ts))
		for i, t := range ts {
			m := t.Member
			if balancers[t.Balancer].Vendor() == VendorF5 || m.Protocol == "tcp" {
				m.Protocol = "" // F5 has no port protocol; "tcp" is A10's default
			}
			ms[i] = LockMember{Device: devices[t.Balancer], Member: m, Name: t.String()}
		}
		out[g] = ms
	}
	return out
}

// Request is one control request.
type Request struct {
	// Operator is who asks; checked against the permissions and recorded
	// as the lock owner. Required. It is the caller's assertion: the
	// Controller cannot check it, and records beside it the process's
	// [ControllerConfig].Origin and OperatorVia.
	Operator string
	// OperatorVia says how Operator was established, for the audit
	// ([Origin].Via): "-operator", "$USER", "header X-Forwarded-User from
	// trusted proxy 10.0.0.5:41234", ...
	OperatorVia string
	// Action is what to do. Required.
	Action Action
	// Group is the group to act on. Required.
	Group string
	// Nodes restricts the request to these nodes of the group; empty
	// means every member.
	Nodes []string
	// RestoreOnFailure (drains only) puts every member the request changed
	// back to its state before the request when the drain fails, so that
	// an aborted deploy leaves the group as it was. By default members are
	// left forced offline, for the operator to inspect.
	RestoreOnFailure bool
	// Progress, if not nil, is called after every poll of a drain, never
	// concurrently with itself.
	Progress func(Progress)
	// Lease, if not nil, is the group's lock, already held by the caller
	// for Operator (from [Locker.Lock]): the request runs under it instead
	// of taking the lock, and leaves it held, so that several requests
	// (a deploy's drain and its enable) run under one lock. A lease for
	// another group or owner is a [*ConfigError], and so is a lease of a
	// [*PGStore] taken without the group's members: take it with
	// [Controller.Acquire], which locks them.
	Lease Lease
	// LockWait is how long to wait for a group locked by someone else to
	// be free, trying again with a backoff from 250 ms to 5 s; 0 refuses
	// at once ([*LockedError]). The wait is bounded by ctx too.
	LockWait time.Duration
	// OnLockWait, if not nil, is called with the refusal each time the
	// lock is found taken while Do is still willing to wait.
	OnLockWait func(*LockedError)
	// OnStart, if not nil, is called once the request holds the lock and
	// its audit entry (Result "running", with its ID) is written, before
	// any call to a balancer. It is not called for a refused request. It
	// runs on Do's goroutine and should return quickly.
	OnStart func(Entry)
}

// Progress reports a group drain after one poll of one member.
type Progress struct {
	Group     string
	Target    Target
	Poll      Poll
	Remaining int   // members not yet drained
	InUse     int64 // current connections of those members, by their last readings
	Total     int   // members in the request
}

// MemberOutcome is what a request did to one member.
type MemberOutcome struct {
	Target  Target
	Result  DrainResult // Before/After states and connections; drain polls
	Changed bool        // a state change was sent
	Err     error       // nil on success; ErrSkipped for members not started
}

// Outcome is a request's result. Entry is what the audit trail holds.
type Outcome struct {
	Entry   Entry
	Members []MemberOutcome
}

// Do runs req. In order, and stopping at the first failure:
//
//  1. the operator's permission for the group ([*NotPermittedError]),
//  2. the group's members ([*ConfigError] for an unknown group or node),
//  3. the group's lock ([*LockedError] naming the holder),
//  4. the audit entry with Result "running",
//  5. login to each balancer concerned,
//  6. every member's state and connections, read before any change (a
//     drain refuses members whose connections cannot be counted),
//  7. the change, Concurrency members at a time; once a member fails, the
//     members not yet started are skipped. For ActionDrain each member is
//     forced offline and polled until it has no connection left, within
//     the drain timeout ([*NotDrainedError] otherwise).
//
// Then, whatever happened: restore on failure if asked, logout, unlock,
// and the final audit entry and log line. Steps 1-3 make no call to any
// balancer. Do always returns an Outcome; the error is nil only when every
// member reached the wanted state (and, for a drain, zero connections).
func (c *Controller) Do(ctx context.Context, req Request) (*Outcome, error) {
	out, _, err := c.do(ctx, req, false)
	c.notify(out, err)
	return out, err
}

// Acquire runs steps 1-3 of [Controller.Do] for req (its permission,
// members and lock, with req.LockWait) and returns the group's lease
// without doing anything under it: a caller that runs several requests
// under one lock (a deploy: silence, drain, the deploy itself, enable)
// passes it as their Request.Lease and releases it at the end. A refusal
// is audited, logged and notified like Do's, and returned with its
// Outcome and a nil lease.
func (c *Controller) Acquire(ctx context.Context, req Request) (Lease, *Outcome, error) {
	if req.Lease != nil {
		return nil, nil, &ConfigError{Pkg: "lb", Field: "Acquire", Why: "the request already holds a lease"}
	}
	out, lease, err := c.do(ctx, req, true)
	if lease == nil {
		c.notify(out, err)
		return nil, out, err
	}
	return lease, nil, nil
}

// do runs req; with acquireOnly it stops once the lock is held and
// returns the lease (and no outcome).
func (c *Controller) do(ctx context.Context, req Request, acquireOnly bool) (*Outcome, Lease, error) {
	start := time.Now()
	origin := c.cfg.Origin
	origin.Via = cleanValue(req.OperatorVia)
	out := &Outcome{Entry: Entry{Started: start, Operator: req.Operator, Origin: origin, Host: c.cfg.Host, Action: req.Action, Group: req.Group}}
	want, ok := req.Action.State()
	if !ok {
		return c.finished(ctx, out, ResultInvalid, &ConfigError{Pkg: "lb", Field: "action", Why: "unknown action " + strconv.Quote(string(req.Action))})
	}
	if err := c.cfg.Permissions.Check(req.Operator, req.Group); err != nil {
		return c.finished(ctx, out, ResultRefused, err)
	}
	targets, err := selectMembers(c.cfg.Groups, req.Group, req.Nodes)
	if err != nil {
		return c.finished(ctx, out, ResultInvalid, err)
	}
	if req.LockWait < 0 {
		return c.finished(ctx, out, ResultInvalid, &ConfigError{Pkg: "lb", Field: "LockWait", Why: "must not be negative"})
	}
	out.Members = make([]MemberOutcome, len(targets))
	for i, t := range targets {
		out.Entry.Nodes = append(out.Entry.Nodes, t.String())
		out.Members[i] = MemberOutcome{Target: t, Result: DrainResult{Member: t.Member, BeforeConns: ConnsUnknown, FirstConns: ConnsUnknown, LastConns: ConnsUnknown}}
	}
	for _, n := range balancerNames(targets) {
		if note := c.cfg.TransportNotes[n]; note != "" {
			out.Entry.Notes = append(out.Entry.Notes, "balancer "+n+": "+note)
		}
	}
	lease := req.Lease
	if lease != nil {
		if h := lease.Holder(); h.Group != req.Group || h.Owner != req.Operator {
			return c.finished(ctx, out, ResultInvalid, &ConfigError{Pkg: "lb", Field: "Lease", Why: "holds group " + strconv.Quote(h.Group) + " for " + strconv.Quote(h.Owner) + ", not group " + strconv.Quote(req.Group) + " for " + strconv.Quote(req.Operator)})
		}
		if cl, ok := lease.(interface{ covers([]LockMember) bool }); ok && !cl.covers(c.members[req.Group]) {
			return c.finished(ctx, out, ResultInvalid, &ConfigError{Pkg: "lb", Field: "Lease", Why: "does not lock the members of group " + strconv.Quote(req.Group) + ": take it with Controller.Acquire"})
		}
	} else {
		lease, err = c.lock(ctx, req)
		if err != nil {
			if errors.Is(err, ErrLocked) {
				return c.finished(ctx, out, ResultLocked, err)
			}
			return c.finished(ctx, out, resultOf(ctx, err), err)
		}
		if acquireOnly {
			return nil, lease, nil
		}
	}
	result, err := c.locked(ctx, req, want, lease, out)
	if req.Lease == nil {
		cctx, cancel := cleanupContext(ctx)
		defer cancel()
		if rerr := lease.Release(cctx); rerr != nil {
			err = errors.Join(err, rerr)
			if result == ResultOK {
				result = ResultFailed
			}
		}
	}
	return c.finished(ctx, out, result, err)
}

// finished is finish for do.
func (c *Controller) finished(ctx context.Context, out *Outcome, result Result, err error) (*Outcome, Lease, error) {
	out, err = c.finish(ctx, out, result, err)
	return out, nil, err
}

// Lock backoff while waiting for a group (Request.LockWait).
const (
	lockRetryFirst = 250 * time.Millisecond
	lockRetryMax   = 5 * time.Second
)

// lock takes the group's lock, waiting up to req.LockWait for it.
func (c *Controller) lock(ctx context.Context, req Request) (Lease, error) {
	start := time.Now()
	delay := lockRetryFirst
	for {
		lease, err := c.cfg.Locker.Lock(ctx, req.Group, req.Operator, c.members[req.Group]...)
		if err == nil {
			c.cfg.Metrics.lockWaited(ctx, req.Group, "acquired", time.Since(start))
			return lease, nil
		}
		le, isLocked := errors.AsType[*LockedError](err)
		left := req.LockWait - time.Since(start)
		if !isLocked || left <= 0 {
			result := "failed"
			if isLocked {
				result = "refused"
			}
			c.cfg.Metrics.lockWaited(ctx, req.Group, result, time.Since(start))
			return nil, err
		}
		if req.OnLockWait != nil {
			req.OnLockWait(le)
		}
		t := time.NewTimer(min(delay, left))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			c.cfg.Metrics.lockWaited(ctx, req.Group, "refused", time.Since(start))
			return nil, err // still the refusal: the wait was cut short
		}
		delay = min(2*delay, lockRetryMax)
	}
}

// notify tells the Notifier what a request came to.
func (c *Controller) notify(out *Outcome, err error) {
	if c.cfg.Notifier == nil || out == nil {
		return
	}
	e := c.event(out)
	switch out.Entry.Result {
	case ResultLocked:
		e.Kind = EventLockRefused
		if le, ok := errors.AsType[*LockedError](err); ok {
			h := le.Holder
			e.Holder = &h
		}
	case ResultOK:
		switch out.Entry.Action {
		case ActionDrain:
			e.Kind = EventDrained
		case ActionEnable:
			e.Kind = EventEnabled
		case ActionDisable:
			e.Kind = EventDisabled
		case ActionForcedOffline:
			e.Kind = EventForcedOffline
		}
	case ResultNotDrained:
		e.Kind = EventTimedOut
		for _, m := range out.Members {
			if _, ok := errors.AsType[*NotDrainedError](m.Err); ok {
				e.Busy = append(e.Busy, BusyMember{Member: m.Target.String(), Conns: m.Result.LastConns})
			}
		}
		e.Error = out.Entry.Error
	case ResultFailed, ResultCanceled:
		e.Kind = EventFailed
		e.Error = out.Entry.Error
	}
	if e.Kind != "" {
		c.cfg.Notifier.Notify(e)
	}
}

func (c *Controller) event(out *Outcome) Event {
	en := &out.Entry
	return Event{
		Time: time.Now(), Group: en.Group, Operator: en.Operator, Host: en.Host, Action: en.Action,
		AuditID: en.ID, Members: append([]string(nil), en.Nodes...), Duration: en.Duration,
	}
}

// locked runs steps 4-7 under the lease.
func (c *Controller) locked(ctx context.Context, req Request, want AdminState, lease Lease, out *Outcome) (Result, error) {
	out.Entry.Result = ResultRunning
	out.Entry.Members = records(out.Members)
	if c.cfg.Audit != nil {
		if err := c.cfg.Audit.Record(ctx, &out.Entry); err != nil {
			return ResultFailed, err // no audit, no control
		}
	}
	logEntry(ctx, c.cfg.Logger, &out.Entry)
	if req.OnStart != nil {
		req.OnStart(out.Entry)
	}
	if req.Action == ActionDrain && c.cfg.Notifier != nil {
		e := c.event(out)
		e.Kind = EventDrainStarted
		c.cfg.Notifier.Notify(e)
	}
	names := c.balancersOf(out.Members)
	var loggedIn []string
	defer func() {
		cctx, cancel := cleanupContext(ctx)
		defer cancel()
		for _, n := range loggedIn {
			if err := c.cfg.Balancers[n].Logout(cctx); err != nil {
				c.cfg.Logger.WarnContext(cctx, "lb logout failed", slog.String("balancer", n), slog.String("error", err.Error()))
			}
		}
	}()
	for _, n := range names {
		if err := c.cfg.Balancers[n].Login(ctx); err != nil {
			return resultOf(ctx, err), err
		}
		loggedIn = append(loggedIn, n)
	}

	drainers := make([]*drainer, len(out.Members))
	for i, m := range out.Members {
		drainers[i] = &drainer{b: c.cfg.Balancers[m.Target.Balancer], m: m.Target.Member, label: m.Target.String(), cfg: c.cfg.Drain, check: lease.Check}
	}
	// Read everything before changing anything.
	c.each(len(drainers), nil, func(i int) {
		res, err := drainers[i].preflight(ctx, req.Action == ActionDrain)
		out.Members[i].Result, out.Members[i].Err = res, err
	})
	if err := joinErrs(out.Members); err != nil {
		return resultOf(ctx, err), err
	}

	prog := newProgress(req, out.Members)
	var failed atomic.Bool
	c.each(len(drainers), func(int) bool { return !failed.Load() }, func(i int) {
		d, m := drainers[i], &out.Members[i]
		m.Changed = true
		var err error
		if req.Action == ActionDrain {
			d.progress = func(p Poll) { prog.report(i, p) }
			m.Result, err = d.run(ctx, m.Result)
			prog.done(i, err == nil)
		} else {
			var st State
			st, err = d.set(ctx, want)
			if st.Admin != StateUnknown {
				m.Result.After = st
			}
			if err == nil {
				if n, cerr := d.b.Connections(ctx, d.m); cerr == nil {
					m.Result.LastConns = n
				}
			}
		}
		if err != nil {
			m.Err = err
			failed.Store(true)
		}
	})
	for i := range out.Members {
		if !out.Members[i].Changed && out.Members[i].Err == nil {
			out.Members[i].Err = ErrSkipped
		}
	}
	err := joinErrs(out.Members)
	if err != nil && req.Action == ActionDrain && req.RestoreOnFailure {
		c.restore(ctx, drainers, out.Members)
	}
	if err != nil {
		return resultOf(ctx, err), err
	}
	return ResultOK, nil
}

// restore puts changed members back to their state before the request.
func (c *Controller) restore(ctx context.Context, drainers []*drainer, ms []MemberOutcome) {
	cctx, cancel := cleanupContext(ctx)
	defer cancel()
	c.each(len(ms), nil, func(i int) {
		m := &ms[i]
		before := m.Result.Before.Admin
		if !m.Changed || before == StateUnknown || before == m.Result.After.Admin {
			return
		}
		st, err := drainers[i].set(cctx, before)
		if st.Admin != StateUnknown {
			m.Result.After = st
		}
		if err != nil {
			m.Err = errors.Join(m.Err, err)
		}
	})
}

// balancersOf returns the sorted names of the balancers concerned.
func (c *Controller) balancersOf(ms []MemberOutcome) []string {
	targets := make([]Target, len(ms))
	for i, m := range ms {
		targets[i] = m.Target
	}
	return balancerNames(targets)
}

// balancerNames returns the sorted names of the targets' balancers.
func balancerNames(targets []Target) []string {
	set := map[string]bool{}
	for _, t := range targets {
		set[t.Balancer] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// each runs f(i) for i in [0, n), Concurrency at a time, and waits for all.
// When start is not nil and returns false for an index, f is not called
// for it.
func (c *Controller) each(n int, start func(int) bool, f func(int)) {
	eachN(n, c.cfg.Concurrency, start, f)
}

// eachN runs f(i) for i in [0, n), concurrency at a time, and waits for
// all. When start is not nil and returns false for an index, f is not
// called for it.
func eachN(n, concurrency int, start func(int) bool, f func(int)) {
	sem := make(chan struct{}, max(concurrency, 1))
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		if start != nil && !start(i) {
			<-sem
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			f(i)
		}()
	}
	wg.Wait()
}

// finish records the entry, writes the log line and returns.
func (c *Controller) finish(ctx context.Context, out *Outcome, result Result, err error) (*Outcome, error) {
	out.Entry.Result = result
	out.Entry.Duration = time.Since(out.Entry.Started)
	if err != nil {
		out.Entry.Error = err.Error()
	}
	out.Entry.Members = records(out.Members)
	cctx, cancel := cleanupContext(ctx)
	defer cancel()
	if c.cfg.Audit != nil {
		if aerr := c.cfg.Audit.Record(cctx, &out.Entry); aerr != nil {
			c.cfg.Logger.ErrorContext(cctx, "lb audit write failed", slog.Int64("audit_id", out.Entry.ID), slog.String("error", aerr.Error()))
			err = errors.Join(err, aerr)
		}
	}
	logEntry(cctx, c.cfg.Logger, &out.Entry)
	c.cfg.Metrics.request(cctx, &out.Entry)
	if c.cfg.Metrics != nil {
		var ms []MemberStatus
		for _, m := range out.Members {
			if m.Changed && m.Result.After.Admin != StateUnknown {
				ms = append(ms, MemberStatus{Target: m.Target, Phase: PhaseOf(m.Result.After.Admin, m.Result.LastConns)})
			}
		}
		c.cfg.Metrics.observePhases(out.Entry.Group, ms)
	}
	return out, err
}

func records(ms []MemberOutcome) []MemberRecord {
	r := make([]MemberRecord, len(ms))
	for i, m := range ms {
		r[i] = MemberRecord{
			Balancer: m.Target.Balancer, Member: m.Target.Member.String(),
			Before: m.Result.Before.Admin.String(), After: m.Result.After.Admin.String(),
			ConnsBefore: m.Result.BeforeConns, ConnsAfter: m.Result.LastConns, FirstConns: m.Result.FirstConns,
			Polls: m.Result.Polls, DurationMS: m.Result.Elapsed.Milliseconds(),
			Drained: m.Result.Drained, Changed: m.Changed,
		}
		if m.Err != nil {
			r[i].Error = m.Err.Error()
		}
	}
	return r
}

// joinErrs joins the members' errors, leaving ErrSkipped out.
func joinErrs(ms []MemberOutcome) error {
	var errs []error
	for _, m := range ms {
		if m.Err != nil && m.Err != ErrSkipped {
			errs = append(errs, m.Err)
		}
	}
	return errors.Join(errs...)
}

// resultOf classifies a failed request.
func resultOf(ctx context.Context, err error) Result {
	switch {
	case ctx.Err() != nil || errors.Is(err, context.Canceled):
		return ResultCanceled
	case onlyNotDrained(err):
		return ResultNotDrained
	}
	return ResultFailed
}

// onlyNotDrained reports whether every error joined in err is a
// *NotDrainedError.
func onlyNotDrained(err error) bool {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if !onlyNotDrained(e) {
				return false
			}
		}
		return true
	}
	var nd *NotDrainedError
	return errors.As(err, &nd)
}

func cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
}

// progress aggregates the polls of a group drain.
type progress struct {
	mu      sync.Mutex
	req     Request
	targets []Target
	last    []int64
	drained []bool
}

func newProgress(req Request, ms []MemberOutcome) *progress {
	p := &progress{req: req, last: make([]int64, len(ms)), drained: make([]bool, len(ms))}
	for i, m := range ms {
		p.targets = append(p.targets, m.Target)
		p.last[i] = m.Result.BeforeConns
	}
	return p
}

func (p *progress) report(i int, poll Poll) {
	if p.req.Progress == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if poll.Err == nil {
		p.last[i] = poll.Conns
		p.drained[i] = poll.Conns == 0
	}
	pr := Progress{Group: p.req.Group, Target: p.targets[i], Poll: poll, Total: len(p.targets)}
	for j := range p.last {
		if !p.drained[j] {
			pr.Remaining++
			pr.InUse += max(p.last[j], 0)
		}
	}
	p.req.Progress(pr)
}

func (p *progress) done(i int, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drained[i] = ok
}

// Phase is a member's control state as operators see it: a member is
// disabled only once its connections are gone.
type Phase string

// Phases.
const (
	PhaseEnabled   Phase = "Enabled"   // takes new connections
	PhaseDisabling Phase = "Disabling" // takes no new connections, still has some
	PhaseDisabled  Phase = "Disabled"  // takes no new connections, has none
	PhaseUnknown   Phase = "Unknown"   // state unknown, or disabled with connections not counted
)

// PhaseOf derives the phase from an admin state and a connection count
// (ConnsUnknown when it could not be read).
func PhaseOf(s AdminState, conns int64) Phase {
	switch {
	case s == Enabled:
		return PhaseEnabled
	case s == StateUnknown || conns < 0:
		return PhaseUnknown
	case conns > 0:
		return PhaseDisabling
	}
	return PhaseDisabled
}

// MemberStatus is one member's status.
type MemberStatus struct {
	Target Target
	State  State
	Conns  int64 // ConnsUnknown when not read (error, or statistics disabled)
	// StatsDisabled: the device does not count the member's connections.
	StatsDisabled bool
	Phase         Phase
	Err           error
}

// GroupStatus is a group's status.
type GroupStatus struct {
	Group   string
	Holder  *Holder // nil when the group is not locked
	Members []MemberStatus
}

// Status reads the state and connections of the group's members (or of
// the named nodes) and the lock holder. It is read-only: it needs no
// permission and takes no lock, and it is not audited. It logs in to the
// balancers concerned and out again; a console that reads every few
// seconds uses a [Monitor], which keeps its sessions. It returns the
// status as far as it could read it, with an error joining the failures.
func (c *Controller) Status(ctx context.Context, group string, nodes ...string) (*GroupStatus, error) {
	targets, err := selectMembers(c.cfg.Groups, group, nodes)
	if err != nil {
		return nil, err
	}
	loggedIn := map[string]error{}
	for _, n := range balancerNames(targets) {
		loggedIn[n] = c.cfg.Balancers[n].Login(ctx)
	}
	defer func() {
		cctx, cancel := cleanupContext(ctx)
		defer cancel()
		for n, err := range loggedIn {
			if err == nil {
				_ = c.cfg.Balancers[n].Logout(cctx)
			}
		}
	}()
	return readStatus(ctx, group, targets, c.cfg.Balancers, c.cfg.Locker, c.cfg.Concurrency, loggedIn, c.cfg.Metrics)
}

// readStatus reads the lock holder and every target through balancers
// whose sessions are open, except those whose login failed (sessions[name]
// not nil), which are reported as the members' errors.
func readStatus(ctx context.Context, group string, targets []Target, balancers map[string]Balancer, locker Locker, concurrency int, sessions map[string]error, m *Metrics) (*GroupStatus, error) {
	gs := &GroupStatus{Group: group, Members: make([]MemberStatus, len(targets))}
	for i, t := range targets {
		gs.Members[i] = MemberStatus{Target: t, Conns: ConnsUnknown, Phase: PhaseUnknown}
	}
	var errs []error
	var err error
	if locker != nil {
		gs.Holder, err = locker.Holder(ctx, group)
		if err != nil {
			errs = append(errs, err)
		}
	}
	for _, n := range slices.Sorted(maps.Keys(sessions)) {
		if sessions[n] != nil {
			errs = append(errs, sessions[n])
		}
	}
	started := func(i int) bool {
		if err := sessions[targets[i].Balancer]; err != nil {
			gs.Members[i].Err = err
			return false
		}
		return true
	}
	eachN(len(targets), concurrency, started, func(i int) {
		ms := &gs.Members[i]
		b := balancers[ms.Target.Balancer]
		ms.State, ms.Err = b.State(ctx, ms.Target.Member)
		if ms.Err != nil {
			return
		}
		n, err := b.Connections(ctx, ms.Target.Member)
		switch {
		case err == nil:
			ms.Conns = n
		case kindOf(err) == KindStatsDisabled:
			ms.StatsDisabled = true
		default:
			ms.Err = err
		}
		ms.Phase = PhaseOf(ms.State.Admin, ms.Conns)
	})
	for _, ms := range gs.Members {
		if ms.Err != nil && !errors.Is(ms.Err, sessions[ms.Target.Balancer]) {
			errs = append(errs, ms.Err)
		}
	}
	m.observePhases(group, gs.Members)
	return gs, errors.Join(errs...)
}
