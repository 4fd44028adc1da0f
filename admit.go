package holdfast

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/internal/admit"
	"github.com/holdfast-db/holdfast/internal/conn"
)

// This file is the face of the admission limit of new connections
// (internal/conn admits them): ConnectLimit, its option and its error.

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
func DefaultConnectInFlight(maxConns int32) int { return conn.DefaultInFlight(maxConns) }

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
