package lb

import (
	"cmp"
	"context"
	"errors"
	"time"

	"github.com/holdfast-db/holdfast/lb/internal/drain"
)

// Defaults of [DrainConfig]. Interval and Timeout are those of the drain
// algorithm holdfast's readiness package uses too: check every second, give
// up after two minutes.
const (
	DefaultInterval       = drain.DefaultInterval
	DefaultTimeout        = drain.DefaultTimeout
	DefaultMaxTransient   = 3
	DefaultKeepAliveEvery = 5 * time.Minute
)

// ConnsUnknown is the connection count recorded when none was read.
const ConnsUnknown int64 = -1

// DrainConfig bounds a drain. The zero value means the defaults.
type DrainConfig struct {
	// Interval is the time between two polls of a member's state and
	// connections (>= 0; 0 means DefaultInterval).
	Interval time.Duration
	// Timeout bounds the wait for zero connections, from the first poll
	// (>= 0; 0 means DefaultTimeout).
	Timeout time.Duration
	// MaxTransient is how many transient API errors in a row (busy,
	// unreachable) a drain tolerates while polling or changing state
	// before it fails; a poll that failed never counts as drained. 0 means
	// DefaultMaxTransient; < 0 tolerates none.
	MaxTransient int
	// KeepAliveEvery is how often a drain calls [Balancer.KeepAlive]
	// while it waits. 0 means DefaultKeepAliveEvery; < 0 never.
	KeepAliveEvery time.Duration
}

// Validate returns a [*ConfigError] for a negative Interval or Timeout.
func (c DrainConfig) Validate() error {
	if err := (drain.Config{Interval: c.Interval, Timeout: c.Timeout}).Validate(); err != nil {
		var ce *drain.ConfigError
		if errors.As(err, &ce) {
			return &ConfigError{Pkg: "lb", Field: "drain." + ce.Field, Why: ce.Why}
		}
		return &ConfigError{Pkg: "lb", Field: "drain", Why: err.Error()}
	}
	return nil
}

func (c DrainConfig) withDefaults() DrainConfig {
	c.Interval = cmp.Or(c.Interval, DefaultInterval)
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	c.MaxTransient = cmp.Or(c.MaxTransient, DefaultMaxTransient)
	if c.MaxTransient < 0 {
		c.MaxTransient = 0
	}
	c.KeepAliveEvery = cmp.Or(c.KeepAliveEvery, DefaultKeepAliveEvery)
	return c
}

// Poll is one reading of a member during a drain, passed to a progress
// function.
type Poll struct {
	Member  Member
	Conns   int64         // current connections; ConnsUnknown when Err is set
	Polls   int           // polls so far, this one included
	Elapsed time.Duration // since the first poll
	Timeout time.Duration // the bound
	Err     error         // a transient error this poll tolerated
}

// DrainResult describes the drain of one member, successful or not.
type DrainResult struct {
	Member      Member
	Before      State         // state before the drain
	BeforeConns int64         // connections before the drain, or ConnsUnknown
	After       State         // last state read
	FirstConns  int64         // connections at the first poll after forcing offline, or ConnsUnknown
	LastConns   int64         // connections at the last poll, or ConnsUnknown
	Polls       int           // polls made
	Elapsed     time.Duration // from the first poll to the last
	Drained     bool          // the last poll read zero connections
}

// Drain takes one member out of service with proof: it reads the member's
// state and connections (refusing, before any change, a member whose
// connections the device does not count), sets it [ForcedOffline], checks
// the read-back, then polls its state and current connections every
// cfg.Interval until they reach zero, using the same algorithm as
// holdfast's readiness package.
//
// It returns a [*NotDrainedError] when cfg.Timeout passes (or ctx ends)
// with connections left: the caller must abort the deploy. The member is
// left forced offline either way; re-enable it with [Balancer.SetState]
// after the deploy, or at once if the deploy is aborted and the member
// should serve again. A member that leaves ForcedOffline during the wait
// (someone else enabled it) ends the drain with a [*StateMismatchError].
//
// The caller logs in first and logs out after. progress, if not nil, is
// called after every poll on the calling goroutine. The result is filled
// in as far as the drain went, on error too.
func Drain(ctx context.Context, b Balancer, m Member, cfg DrainConfig, progress func(Poll)) (DrainResult, error) {
	d := drainer{b: b, m: m, label: b.Vendor() + " " + m.String(), progress: progress}
	if err := cfg.Validate(); err != nil {
		return DrainResult{Member: m, BeforeConns: ConnsUnknown, FirstConns: ConnsUnknown, LastConns: ConnsUnknown}, err
	}
	d.cfg = cfg.withDefaults()
	res, err := d.preflight(ctx, true)
	if err != nil {
		return res, err
	}
	return d.run(ctx, res)
}

// drainer drives one member.
type drainer struct {
	b        Balancer
	m        Member
	label    string // for errors: "f5-prod web/web-1:80"
	cfg      DrainConfig
	progress func(Poll)
	check    func(context.Context) error // lease check before a change, or nil
}

// preflight reads the state (and connections) before any change. With
// needConns, a member whose connections cannot be counted is refused.
func (d *drainer) preflight(ctx context.Context, needConns bool) (DrainResult, error) {
	res := DrainResult{Member: d.m, BeforeConns: ConnsUnknown, FirstConns: ConnsUnknown, LastConns: ConnsUnknown}
	st, err := retryTransient(ctx, d.cfg, func() (State, error) { return d.b.State(ctx, d.m) })
	if err != nil {
		return res, err
	}
	res.Before, res.After = st, st
	n, err := retryTransient(ctx, d.cfg, func() (int64, error) { return d.b.Connections(ctx, d.m) })
	if err != nil {
		if needConns || kindOf(err) != KindStatsDisabled {
			return res, err
		}
		n = ConnsUnknown
	}
	res.BeforeConns = n
	return res, nil
}

// set changes the state and checks the read-back.
func (d *drainer) set(ctx context.Context, want AdminState) (State, error) {
	if d.check != nil {
		if err := d.check(ctx); err != nil {
			return State{}, err
		}
	}
	if _, err := retryTransient(ctx, d.cfg, func() (struct{}, error) { return struct{}{}, d.b.SetState(ctx, d.m, want) }); err != nil {
		return State{}, err
	}
	st, err := retryTransient(ctx, d.cfg, func() (State, error) { return d.b.State(ctx, d.m) })
	if err != nil {
		return State{}, err
	}
	if st.Admin != want {
		return st, &StateMismatchError{Member: d.label, Want: want, Got: st}
	}
	return st, nil
}

// run forces the member offline and waits for zero connections.
func (d *drainer) run(ctx context.Context, res DrainResult) (DrainResult, error) {
	st, err := d.set(ctx, ForcedOffline)
	if st.Admin != StateUnknown {
		res.After = st
	}
	if err != nil {
		return res, err
	}
	return d.wait(ctx, res)
}

// wait polls until zero connections through the shared drain algorithm.
func (d *drainer) wait(ctx context.Context, res DrainResult) (DrainResult, error) {
	var (
		streak    int // transient errors in a row
		start     time.Time
		lastAlive = time.Now()
	)
	probe := func(ctx context.Context) (drain.Usage, error) {
		if res.Polls == 0 {
			start = time.Now()
		}
		res.Polls++
		res.Elapsed = time.Since(start)
		n, err := d.poll(ctx, &res, &lastAlive)
		if err != nil {
			if !retryable(err) || streak >= d.cfg.MaxTransient {
				return nil, err
			}
			streak++
			d.report(Poll{Member: d.m, Conns: ConnsUnknown, Polls: res.Polls, Elapsed: res.Elapsed, Timeout: d.cfg.Timeout, Err: err})
			if res.LastConns == ConnsUnknown {
				return drain.Usage{{What: "unread member", N: 1}}, nil
			}
			return drain.Usage{{What: "current connection", N: max(res.LastConns, 1)}}, nil
		}
		streak = 0
		if res.FirstConns == ConnsUnknown {
			res.FirstConns = n
		}
		res.LastConns = n
		d.report(Poll{Member: d.m, Conns: n, Polls: res.Polls, Elapsed: res.Elapsed, Timeout: d.cfg.Timeout})
		return drain.Usage{{What: "current connection", N: n}}, nil
	}
	_, err := drain.Wait(ctx, drain.Config{Interval: d.cfg.Interval, Timeout: d.cfg.Timeout}, probe)
	if err == nil {
		res.Drained = true
		return res, nil
	}
	var te *drain.TimeoutError
	var pe *drain.ProbeError
	switch {
	case errors.As(err, &te):
		return res, &NotDrainedError{Member: d.label, Conns: res.LastConns, Polls: res.Polls, Elapsed: te.Elapsed, Timeout: te.Timeout, Cause: te.Cause, err: te}
	case errors.As(err, &pe):
		return res, pe.Err
	}
	return res, err
}

// poll reads the state (which must still be forced offline) and the
// connections, keeping the session alive when due.
func (d *drainer) poll(ctx context.Context, res *DrainResult, lastAlive *time.Time) (int64, error) {
	if d.cfg.KeepAliveEvery > 0 && time.Since(*lastAlive) >= d.cfg.KeepAliveEvery {
		if err := d.b.KeepAlive(ctx); err != nil {
			return ConnsUnknown, err
		}
		*lastAlive = time.Now()
	}
	st, err := d.b.State(ctx, d.m)
	if err != nil {
		return ConnsUnknown, err
	}
	res.After = st
	if st.Admin != ForcedOffline {
		return ConnsUnknown, &StateMismatchError{Member: d.label, Want: ForcedOffline, Got: st}
	}
	return d.b.Connections(ctx, d.m)
}

func (d *drainer) report(p Poll) {
	if d.progress != nil {
		d.progress(p)
	}
}

// retryTransient calls f until it succeeds, fails for good, or has failed
// transiently cfg.MaxTransient+1 times in a row, waiting cfg.Interval
// between calls.
func retryTransient[T any](ctx context.Context, cfg DrainConfig, f func() (T, error)) (T, error) {
	for i := 0; ; i++ {
		v, err := f()
		if err == nil || !retryable(err) || i >= cfg.MaxTransient {
			return v, err
		}
		t := time.NewTimer(cfg.Interval)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return v, err
		}
	}
}
