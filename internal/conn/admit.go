package conn

import (
	"context"
	"math"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast/internal/admit"
	"github.com/holdfast-db/holdfast/internal/obs"
	"github.com/holdfast-db/holdfast/retry"
)

// This file is the admission limit of new connections: per pool, at most
// Limit.InFlight connects in flight and, optionally, at most PerSecond
// new connects per second (a token bucket).
//
// Where it sits. A connect is admitted at its first dial (the connector's
// DialFunc, connect.go) and holds its slot until it ends: through every
// retry round and backoff of the connection, which each dial again, so
// that a pool refused with 53300 keeps at most InFlight connects retrying
// instead of MaxConns — but not while the outage layer holds it (the
// target is down, or suspect: hold, state.go), when nothing dials: it
// gives its slot back for the wait and takes one again before its next
// dial (readmit), so that the connects queued behind it are admitted and
// held in turn before they dial (admitDial asks the layers after a queued
// wait), within the hold's bounds (HoldFor, their context) instead of
// failing at the admission wait's (MaxElapsed).
// The slot is given back when the handshake completes
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

// Limit is the admission limit of a pool's new connections (the face's
// ConnectLimit, checked there): at most InFlight connects in flight (0:
// DefaultInFlight of the pool's MaxConns; negative: no limit), at most
// PerSecond new connects per second (0: no rate), Burst at once (0: 1).
type Limit struct {
	InFlight  int
	PerSecond float64
	Burst     int
}

// DefaultInFlight is the InFlight of a pool of maxConns connections when
// Limit.InFlight is 0: max(2, maxConns/4). A quarter of the pool refills
// an empty pool in four connect latencies (about 200 ms at 50 ms per
// connect: TCP, TLS, SCRAM) while a wave of reconnects is a quarter of
// what pgxpool alone would send; at least two, so that a connect stuck on
// a hung server (until its AttemptTimeout) does not stop every other.
func DefaultInFlight(maxConns int32) int {
	return max(2, int(maxConns)/4)
}

// limiter returns the admission limiter of a pool built from cfg, or nil
// when the limit is off.
func (l Limit) limiter(cfg *pgxpool.Config) *admit.Limiter {
	n := l.InFlight
	switch {
	case n == 0:
		n = DefaultInFlight(cfg.MaxConns)
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
	queued, err := c.admit(ctx)
	if err != nil {
		c.refused, c.stop = true, err
		return c.stopped()
	}
	if queued {
		// The target may have gone down while it queued (behind connects
		// the outage hold keeps waiting): the layers hold it as they hold
		// a new connection before its dial, its slot given back meanwhile,
		// so that one connect per check dials while it is down (the
		// prober's, or a held connect's that takes its step).
		waited, err := c.hold(ctx)
		if err != nil {
			c.refused, c.stop = true, err
			return c.stopped()
		}
		if waited {
			c.afresh(ctx)
		}
	}
	return nil
}

// admit takes the pool's admission slot for c's connect at its first dial:
// at once when one is free, else after a bounded wait, which is counted
// (queued). ctx is pgconn's connect context: it carries the caller's
// values (and deadline, from Factory.Acquire) and ends with the connect,
// which gives the slot back if nothing else did (releaseAdmission). c.mu
// is held.
func (c *connState) admit(ctx context.Context) (queued bool, err error) {
	l := c.p.adm
	if l == nil {
		return false, nil
	}
	if !l.TryAcquire() {
		queued = true
		if err := c.queue(ctx, l); err != nil {
			return true, err
		}
	}
	c.admitted.Store(true)
	if !c.predialing { // predial's context ends with it: the backstop waits for pgconn's (dialEntry)
		c.admitStop = context.AfterFunc(ctx, c.releaseAdmission)
	}
	return queued, nil
}

// readmit takes an admission slot again for a connection that gave its
// own back while a layer held it (hold), before its next dial: at once
// when one is free, else after a wait bounded as the first one (queue),
// from now: the held connection starts afresh. Its backstop is registered
// again on ctx, the dial's. c.mu is held.
func (c *connState) readmit(ctx context.Context) error {
	if stop := c.admitStop; stop != nil {
		c.admitStop = nil
		stop()
	}
	_, err := c.admit(ctx)
	return err
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
		return &queuedError{waited: waited, inFlight: l.InFlight(), err: err}
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
		c.p.adm.Release()
	}
}
