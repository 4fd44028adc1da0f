// Package admit is the admission limit of new connections: a counting
// semaphore of connects in flight ([Limiter]) and an optional token bucket
// of connects per second ([Bucket]). holdfast gives each pool one Limiter
// (admit.go in the root package); the storm simulation steps the same
// Bucket on its virtual clock.
//
// When nothing waits, taking a slot costs one compare-and-swap and giving
// it back one atomic add and one atomic load: no lock, no allocation. A
// connect that finds no slot waits on the slow path, under a mutex, in
// FIFO order, until a slot is given back, its context ends or its
// deadline passes. Nothing here starts a goroutine.
package admit

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdfast-db/holdfast/internal/pause"
)

// ErrTimeout is what [Limiter.Acquire] returns when its deadline passed
// before a slot (or a token of the rate) was free.
var ErrTimeout = errors.New("admit: no connect slot within the wait bound")

// Limiter admits at most n holders at once, and, with a [Bucket], at most
// its rate. The zero Limiter is not usable: build it with [New]. A nil
// *Limiter admits everything at no cost.
type Limiter struct {
	n      int64
	avail  atomic.Int64 // free slots: n - holders
	nwait  atomic.Int64 // waiters registered on the slow path
	bucket *Bucket      // nil: no rate

	mu      sync.Mutex
	waiters []*waiter // FIFO; guarded by mu
}

type waiter struct {
	ready chan struct{} // closed when a release woke this waiter
	woken bool          // guarded by Limiter.mu
}

// New returns a Limiter of inFlight slots (at least 1) and, when
// perSecond > 0, a rate of perSecond with bursts of burst (at least 1).
func New(inFlight int, perSecond float64, burst int) *Limiter {
	l := &Limiter{n: int64(max(inFlight, 1))}
	l.avail.Store(l.n)
	if perSecond > 0 {
		l.bucket = NewBucket(perSecond, burst)
	}
	return l
}

// InFlight returns the number of slots.
func (l *Limiter) InFlight() int {
	if l == nil {
		return 0
	}
	return int(l.n)
}

// Holders returns the slots taken now (for tests and metrics).
func (l *Limiter) Holders() int {
	if l == nil {
		return 0
	}
	return int(l.n - l.avail.Load())
}

// TryAcquire takes a slot if one is free and no rate token must be waited
// for: the fast path. One compare-and-swap (and, with a rate, one on the
// bucket). A nil Limiter always admits.
func (l *Limiter) TryAcquire() bool {
	if l == nil {
		return true
	}
	if !l.trySlot() {
		return false
	}
	if l.bucket != nil && !l.bucket.tryTake(nanotime()) {
		l.Release()
		return false
	}
	return true
}

func (l *Limiter) trySlot() bool {
	for {
		a := l.avail.Load()
		if a <= 0 {
			return false
		}
		if l.avail.CompareAndSwap(a, a-1) {
			return true
		}
	}
}

// Acquire takes a slot, waiting until one is free, ctx ends, or deadline
// passes (zero: no deadline but ctx's). With a rate it then takes a token,
// waiting for it under the same bounds; a token that would come after the
// deadline is not taken. It returns nil, ctx.Err() or [ErrTimeout]. On an
// error no slot is held.
func (l *Limiter) Acquire(ctx context.Context, deadline time.Time) error {
	if l == nil {
		return nil
	}
	if err := l.acquireSlot(ctx, deadline); err != nil {
		return err
	}
	if l.bucket == nil {
		return nil
	}
	if err := l.bucket.Wait(ctx, deadline); err != nil {
		l.Release()
		return err
	}
	return nil
}

func (l *Limiter) acquireSlot(ctx context.Context, deadline time.Time) error {
	if l.trySlot() {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	var timeout <-chan time.Time
	if !deadline.IsZero() {
		d := time.Until(deadline)
		if d <= 0 {
			return ErrTimeout
		}
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	for {
		w := l.enqueue()
		if w == nil {
			return nil // a slot came free while registering
		}
		select {
		case <-w.ready:
			if l.trySlot() {
				return nil
			}
			// Another connect took the slot on its fast path: wait again.
		case <-ctx.Done():
			l.leave(w)
			return ctx.Err()
		case <-timeout:
			l.leave(w)
			return ErrTimeout
		}
	}
}

// enqueue registers a waiter, or returns nil when a slot could be taken
// after registering (a release that ran before it saw no waiter).
func (l *Limiter) enqueue() *waiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.nwait.Add(1)
	if l.trySlot() {
		l.nwait.Add(-1)
		return nil
	}
	w := &waiter{ready: make(chan struct{})}
	l.waiters = append(l.waiters, w)
	return w
}

// leave removes w, which gave up. If a release already woke it, the
// wake-up passes to the next waiter, so that a free slot is not left
// unclaimed.
func (l *Limiter) leave(w *waiter) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if w.woken {
		if l.avail.Load() > 0 {
			l.wakeLocked()
		}
		return
	}
	for i, x := range l.waiters {
		if x == w {
			l.waiters = append(l.waiters[:i], l.waiters[i+1:]...)
			l.nwait.Add(-1)
			return
		}
	}
}

// Release gives a slot back and wakes the first waiter, if any. Release
// must be called once per successful TryAcquire or Acquire.
func (l *Limiter) Release() {
	if l == nil {
		return
	}
	l.avail.Add(1)
	if l.nwait.Load() == 0 {
		return
	}
	l.mu.Lock()
	l.wakeLocked()
	l.mu.Unlock()
}

// wakeLocked wakes the first waiter. l.mu is held.
func (l *Limiter) wakeLocked() {
	if len(l.waiters) == 0 {
		return
	}
	w := l.waiters[0]
	l.waiters[0] = nil
	l.waiters = l.waiters[1:]
	l.nwait.Add(-1)
	w.woken = true
	close(w.ready)
}

// Bucket is a token bucket of rate tokens per second and bursts of burst,
// kept as one atomic value (GCRA: the theoretical arrival time of the
// next token), on a clock of nanoseconds the caller gives: the real
// monotonic clock in holdfast, a virtual one in the storm simulation.
type Bucket struct {
	interval int64        // nanoseconds per token
	tol      int64        // (burst-1) × interval: how far ahead of now tokens may be taken
	tat      atomic.Int64 // the theoretical arrival time of the next token
}

// NewBucket returns a full bucket of perSecond tokens per second (> 0)
// and bursts of burst (at least 1).
func NewBucket(perSecond float64, burst int) *Bucket {
	iv := max(int64(float64(time.Second)/perSecond), 1)
	return &Bucket{interval: iv, tol: int64(max(burst, 1)-1) * iv}
}

// Reserve takes a token at now when it comes by limit (a time on the same
// clock; 0: no limit), and returns how long after now it may be used. It
// reports false, taking nothing, when the token would come after limit.
func (b *Bucket) Reserve(now, limit int64) (wait time.Duration, ok bool) {
	return b.ReserveJittered(now, limit, 0.5)
}

// ReserveJittered is Reserve with the token's interval jittered: the next
// token comes (0.5+u) intervals after this one, u in [0, 1), so the rate
// is the same on average. The pods of a fleet drain their buckets
// together (an outage breaks every connection at once); with a fixed
// interval their tokens would then come back together, every interval,
// for ever: a wave of reconnects each interval. The jitter spreads them
// within a few tokens.
func (b *Bucket) ReserveJittered(now, limit int64, u float64) (wait time.Duration, ok bool) {
	step := b.interval/2 + int64(u*float64(b.interval))
	for {
		old := b.tat.Load()
		base := max(old, now)
		at := base - b.tol // when the reserved token may be used
		if limit != 0 && at > limit {
			return 0, false
		}
		if b.tat.CompareAndSwap(old, base+step) {
			return time.Duration(max(at-now, 0)), true
		}
	}
}

// tryTake takes a token usable at now, if there is one (the jitter of
// the fast path is fixed: no random draw).
func (b *Bucket) tryTake(now int64) bool {
	_, ok := b.ReserveJittered(now, now, fastJitter(now))
	return ok
}

// fastJitter is a cheap u in [0, 1) from the clock's low bits.
func fastJitter(now int64) float64 { return float64(uint64(now)*0x9e3779b97f4a7c15>>11) / (1 << 53) }

// Unreserve gives back a token that Reserve took and that was not used
// (its wait was cut short).
func (b *Bucket) Unreserve() { b.tat.Add(-b.interval) }

// Wait takes a token, waiting until it comes; it gives up at once, taking
// nothing, when the token would come after deadline, and gives the token
// back when ctx ends first.
func (b *Bucket) Wait(ctx context.Context, deadline time.Time) error {
	now := nanotime()
	var limit int64
	if !deadline.IsZero() {
		limit = now + int64(time.Until(deadline))
		if limit <= now {
			limit = now // only a token available now
		}
	}
	wait, ok := b.ReserveJittered(now, limit, rand.Float64())
	if !ok {
		return ErrTimeout
	}
	if !pause.For(ctx, wait, nil) {
		b.Unreserve()
		return ctx.Err()
	}
	return nil
}

// epoch is the origin of nanotime.
var epoch = time.Now()

// nanotime reads the monotonic clock, in nanoseconds since epoch (never 0).
func nanotime() int64 { return int64(time.Since(epoch)) + 1 }
