package holdfast

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/internal/admit"
	"github.com/holdfast-db/holdfast/internal/obs"
	"github.com/holdfast-db/holdfast/retry"
	"github.com/jackc/pgx/v5/pgxpool"
)

// This file is the admission limit of new connections: per pool, at most
// ConnectLimit.InFlight connects in flight and, optionally, at most
// PerSecond new connects per second (a token bucket).
//
// Where it sits. A connect is admitted at its first dial (the connector's
// DialFunc, connect.go) and holds its slot until it ends: through every
// retry round and backoff of the connection, which each dial again, so
// that a pool refused with 53300 keeps at most InFlight connects retrying
// instead of MaxConns; the slot is given back when the handshake completes
// or the connection's retries end, and, whatever else ends pgx's connect,
// when pgconn's connect context is done (pgxpool always sets a
// ConnectTimeout, so that context ends with the connect). The password or
// token of the connection is fetched before it (BeforeConnect), and a
// connect held by blue/green or failover routing in BeforeConnect holds
// no slot. The connections of the blue/green and failover monitors, and
// cancel requests, are not the pool's connects: they are never queued.
//
// Its cost when a slot is free: one compare-and-swap to take it, an atomic
// add and load to give it back (no lock, no allocation in the limiter),
// plus the connect's backstop registration on pgconn's context.

// ConnectLimit is the admission limit of a pool's new connections, given
// to [WithConnectLimit]; every pool of the factory gets a limiter of its
// own. The zero value is the default.
type ConnectLimit struct {
	// InFlight is how many connects of one pool may be in flight at once
	// (from the first dial to the end of the handshake, retries
	// included). 0: the default, max(2, MaxConns/4) of the pool's config;
	// negative: no limit.
	InFlight int
	// PerSecond is how many new connects one pool may start per second
	// (a token bucket); 0: no rate limit. It must not be negative.
	PerSecond float64
	// Burst is how many connects the rate lets through at once; 0: 1.
	// Only with PerSecond.
	Burst int
}

// DefaultConnectInFlight is the InFlight of a pool of maxConns
// connections when ConnectLimit.InFlight is 0: max(2, maxConns/4). A
// quarter of the pool refills an empty pool in four connect latencies
// (about 200 ms at 50 ms per connect: TCP, TLS, SCRAM) while a wave of
// reconnects is a quarter of what pgxpool alone would send; at least two,
// so that a connect stuck on a hung server (until its AttemptTimeout) does
// not stop every other.
func DefaultConnectInFlight(maxConns int32) int {
	return max(2, int(maxConns)/4)
}

// WithConnectLimit sets the admission limit of new connections of the
// factory's pools (see [ConnectLimit]; the default is ConnectLimit{}:
// max(2, MaxConns/4) connects in flight per pool, no rate). A connect that
// finds no slot waits, bounded by the earliest of the caller's deadline
// (Factory.Acquire passes it: retry.WithCallerDeadline), the retry
// policy's MaxElapsed (else its AttemptTimeout) and pgx's ConnectTimeout;
// one that waited is counted (holdfast.connect.queued) and its wait
// recorded on its connect span. One whose wait ended unadmitted fails
// with a [*QueuedError]. ConnectLimit{InFlight: -1} turns the limit off.
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

// limiter returns the admission limiter of a pool built from cfg, or nil
// when the limit is off.
func (l ConnectLimit) limiter(cfg *pgxpool.Config) *admit.Limiter {
	n := l.InFlight
	switch {
	case n == 0:
		n = DefaultConnectInFlight(cfg.MaxConns)
	case n < 0:
		if l.PerSecond == 0 {
			return nil
		}
		n = math.MaxInt32 // a rate only
	}
	if l.PerSecond == 0 && cfg.MaxConns > 0 && n >= int(cfg.MaxConns) {
		return nil // pgxpool never has more connects than MaxConns
	}
	return admit.New(n, l.PerSecond, l.Burst)
}

// ErrQueued is matched by every [*QueuedError].
var ErrQueued = errors.New("holdfast: connect not admitted")

// ErrQueueTimeout is the Err of a [*QueuedError] whose wait reached its
// bound (the caller's deadline, the policy's) before a slot was free.
var ErrQueueTimeout = admit.ErrTimeout

// ReasonQueued is the classify reason of a *QueuedError.
const ReasonQueued = "connect-queued"

// QueuedError is a connect that the pool's admission limit did not admit
// before its wait ended: Err is [ErrQueueTimeout] when the wait reached
// its bound (the caller's deadline, the retry policy's MaxElapsed or
// AttemptTimeout, pgx's ConnectTimeout), else the connect context's error.
// Nothing was dialed. It is Transient (reason "connect-queued"): the pool
// was busy connecting, not refused, and a later connect may be admitted;
// but it already waited its bound, so Factory.Acquire returns it as it is
// instead of waiting again (errors.Is(err, ErrQueued)).
type QueuedError struct {
	Waited   time.Duration // how long the connect waited
	InFlight int           // the pool's limit of connects in flight
	Err      error
}

func (e *QueuedError) Error() string {
	return fmt.Sprintf("holdfast: connect not admitted after waiting %v (%d connects of the pool in flight): %v",
		e.Waited.Round(time.Millisecond), e.InFlight, e.Err)
}

// Unwrap returns Err.
func (e *QueuedError) Unwrap() error { return e.Err }

// Is matches ErrQueued.
func (e *QueuedError) Is(target error) bool { return target == ErrQueued }

// queuedRule classifies a *QueuedError as Transient "connect-queued",
// before the built-in rules would call its context error Fatal or unknown.
func queuedRule(err error) (classify.Verdict, bool) {
	var qe *QueuedError
	if errors.As(err, &qe) {
		return classify.Verdict{Class: classify.Transient, Reason: ReasonQueued}, true
	}
	return classify.Verdict{}, false
}

// admitDial admits the connect at its first dial (d, the dial's index,
// 0); after a refusal, every later entry returns the refusal undialed.
// c.mu is held.
func (c *connState) admitDial(ctx context.Context, d int) error {
	switch {
	case c.refused:
		return c.stopped()
	case d > 0:
		return nil
	}
	if err := c.admit(ctx); err != nil {
		c.refused, c.stop = true, err
		return c.stopped()
	}
	return nil
}

// admit takes the pool's admission slot for c's connect at its first dial:
// at once when one is free, else after a bounded wait, which is counted.
// ctx is pgconn's connect context: it carries the caller's values (and
// deadline, from Factory.Acquire) and ends with the connect, which gives
// the slot back if nothing else did (releaseAdmission). c.mu is held.
func (c *connState) admit(ctx context.Context) error {
	l := c.b.adm
	if l == nil {
		return nil
	}
	if !l.TryAcquire() {
		if err := c.queue(ctx, l); err != nil {
			return err
		}
	}
	c.admitted.Store(true)
	c.admitStop = context.AfterFunc(ctx, c.releaseAdmission)
	return nil
}

// endAdmission gives the slot back when the connect's end is known (the
// handshake completed, the retries ended), and unregisters the backstop.
// On the connect's goroutine.
func (c *connState) endAdmission() {
	if stop := c.admitStop; stop != nil {
		c.admitStop = nil
		stop()
	}
	c.releaseAdmission()
}

// queue waits for an admission slot. Off the fast path.
func (c *connState) queue(ctx context.Context, l *admit.Limiter) error {
	start := time.Now()
	deadline := start.Add(c.queueBound())
	if dl, ok := retry.CallerDeadline(ctx); ok && dl.Before(deadline) {
		deadline = dl
	}
	err := l.Acquire(ctx, deadline)
	waited := time.Since(start)
	tctx := obs.WithTarget(ctx, c.target)
	c.cn.tel.ConnectQueued(tctx, waited, l.InFlight(), err)
	if err != nil {
		return &QueuedError{Waited: waited, InFlight: l.InFlight(), Err: err}
	}
	return nil
}

// defaultQueueBound bounds an admission wait when the retry policy has
// neither MaxElapsed nor AttemptTimeout.
const defaultQueueBound = 10 * time.Second

// queueBound is how long a connect may wait for admission: the retry
// policy's MaxElapsed, else its AttemptTimeout, else defaultQueueBound (a
// caller's deadline and pgx's ConnectTimeout may end it sooner).
func (c *connState) queueBound() time.Duration {
	p := c.cn.dial.Policy
	switch {
	case p.MaxElapsed > 0:
		return p.MaxElapsed
	case p.AttemptTimeout > 0:
		return p.AttemptTimeout
	}
	return defaultQueueBound
}

// releaseAdmission gives c's admission slot back, once: from endAdmission,
// or from the backstop that admit registers on pgconn's connect context.
func (c *connState) releaseAdmission() {
	if c.admitted.CompareAndSwap(true, false) {
		c.b.adm.Release()
	}
}
