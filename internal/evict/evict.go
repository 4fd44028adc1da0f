// Package evict is the eviction layer of a pool: it presumes dead the
// pool's connections to a server that just failed one of them, or that
// another layer left behind, and has them destroyed when next acquired.
package evict

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/holdfast-db/holdfast/internal/compose"
)

// Eviction is the layer that presumes dead a pool's connections to a
// server that just failed one of them: a network failure of an
// established connection (a reset, a broken pipe, TCP_USER_TIMEOUT's
// ETIMEDOUT, the server closing), a cancel request it does not answer, a
// server another layer left (a failover's cut, a reader lagging). The
// connections made before the failure are destroyed when next acquired
// (PrepareConn), and new ones are made instead. Its zero value is ready;
// it learns everything through its layer's hooks (Layer).
type Eviction struct {
	// cur, when set, is the latest failure and the ones before it still
	// in force.
	cur atomic.Pointer[evicted]
	// quota, when set, is a reader rebalance's: how many more of the
	// pool's connections to each server to destroy when next acquired.
	quota atomic.Pointer[retiring]
}

// retiring is a rebalance's quota of connections to retire, by server
// address, until a deadline; immutable but for its counters.
type retiring struct {
	left  map[string]*atomic.Int32
	total atomic.Int32
	until time.Time
}

// retireFor bounds how long a rebalance's quota waits for its connections
// to be acquired: a connection unused that long is not worth moving.
const retireFor = 30 * time.Second

// evicted is a server that just failed one of the pool's connections;
// prev, the evictions before it still in force (at most evictDepth).
type evicted struct {
	addr string
	at   time.Time
	prev *evicted
}

// evictDepth bounds how many servers are evicted at once.
const evictDepth = 4

// evictWindow is how long after a network failure PrepareConn checks the
// pool's connections against it; then the check costs nothing again.
const evictWindow = time.Minute

// Layer returns the eviction's part of the pool's hooks: PrepareConn,
// and what it hears of the pool's connections (Failed) and of the other
// layers (Gone, Retire).
func (e *Eviction) Layer() compose.Layer {
	return compose.Layer{PrepareConn: e.prepareConn, Failed: e.failed, Gone: e.evictHost, Retire: e.retireSome}
}

// failed presumes dead the pool's connections to addr when an established
// one failed.
func (e *Eviction) failed(addr string, established bool) {
	if established {
		e.evictHost(addr)
	}
}

// evictHost presumes dead every connection to addr made before now.
func (e *Eviction) evictHost(addr string) {
	if addr == "" {
		return
	}
	now := time.Now()
	n := &evicted{addr: addr, at: now}
	tail := n
	for old, k := e.cur.Load(), 1; old != nil && k < evictDepth; old, k = old.prev, k+1 {
		if old.addr != addr && now.Sub(old.at) <= evictWindow {
			tail.prev = &evicted{addr: old.addr, at: old.at}
			tail = tail.prev
		}
	}
	e.cur.Store(n)
}

// prepareConn is the layer's PrepareConn: two atomic loads when no server
// failed in the last minute and no rebalance is under way.
func (e *Eviction) prepareConn(_ context.Context, c *pgx.Conn) (bool, error) {
	if cur := e.cur.Load(); cur != nil && e.evicts(cur, c) {
		return false, nil // pgxpool destroys it and tries another
	}
	if q := e.quota.Load(); q != nil && e.retires(q, c) {
		return false, nil // as above: its replacement is dialed where the routing says
	}
	return true, nil
}

// retireSome sets a quota: the next n[addr] connections to addr acquired
// within retireFor are destroyed (a rebalance's surplus that was in use).
// It replaces the quota before it.
func (e *Eviction) retireSome(n map[string]int) {
	q := &retiring{left: make(map[string]*atomic.Int32, len(n)), until: time.Now().Add(retireFor)}
	total := 0
	for a, k := range n {
		if k > 0 {
			c := new(atomic.Int32)
			c.Store(int32(k))
			q.left[a] = c
			total += k
		}
	}
	if total == 0 {
		e.quota.Store(nil)
		return
	}
	q.total.Store(int32(total))
	e.quota.Store(q)
}

// retires reports whether c is one of q's quota, and counts it.
func (e *Eviction) retires(q *retiring, c *pgx.Conn) bool {
	if time.Now().After(q.until) {
		e.quota.CompareAndSwap(q, nil)
		return false
	}
	h := compose.ConnOf(c)
	if h == nil {
		return false
	}
	left := q.left[h.Server()]
	if left == nil {
		return false
	}
	for v := left.Load(); v > 0; v = left.Load() {
		if left.CompareAndSwap(v, v-1) {
			if q.total.Add(-1) == 0 {
				e.quota.CompareAndSwap(q, nil)
			}
			return true
		}
	}
	return false
}

// evicts reports whether c was made before one of cur's failures, to its
// server.
func (e *Eviction) evicts(cur *evicted, c *pgx.Conn) bool {
	if time.Since(cur.at) > evictWindow {
		e.cur.CompareAndSwap(cur, nil)
		return false
	}
	h := compose.ConnOf(c)
	if h == nil {
		return false
	}
	addr, made := h.Server(), h.MadeAt()
	for ; cur != nil; cur = cur.prev {
		if addr == cur.addr && made.Before(cur.at) {
			return true
		}
	}
	return false
}
