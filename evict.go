package holdfast

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/holdfast-db/holdfast/internal/compose"
	"github.com/jackc/pgx/v5"
)

// eviction is the layer that presumes dead a pool's connections to a
// server that just failed one of them: a network failure of an
// established connection (a reset, a broken pipe, TCP_USER_TIMEOUT's
// ETIMEDOUT, the server closing), a cancel request it does not answer, a
// failover's cut. The connections made before the failure are destroyed
// when next acquired (PrepareConn), and new ones are made instead. It is a
// connObserver of the connector.
type eviction struct {
	noObserver
	// cur, when set, is the latest failure and the ones before it still
	// in force.
	cur atomic.Pointer[evicted]
}

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

// layer returns the eviction's part of the pool's hooks.
func (e *eviction) layer() compose.Layer {
	return compose.Layer{PrepareConn: e.prepareConn}
}

// failed presumes dead the pool's connections to addr when an established
// one failed.
func (e *eviction) failed(addr string, established bool) {
	if established {
		e.evictHost(addr)
	}
}

// evictHost presumes dead every connection to addr made before now.
func (e *eviction) evictHost(addr string) {
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

// prepareConn is the layer's PrepareConn: one atomic load when no server
// failed in the last minute.
func (e *eviction) prepareConn(_ context.Context, c *pgx.Conn) (bool, error) {
	if cur := e.cur.Load(); cur != nil && e.evicts(cur, c) {
		return false, nil // pgxpool destroys it and tries another
	}
	return true, nil
}

// evicts reports whether c was made before one of cur's failures, to its
// server.
func (e *eviction) evicts(cur *evicted, c *pgx.Conn) bool {
	if time.Since(cur.at) > evictWindow {
		e.cur.CompareAndSwap(cur, nil)
		return false
	}
	s := stateOf(c)
	for ; s != nil && cur != nil; cur = cur.prev {
		if s.addr == cur.addr && s.madeAt.Before(cur.at) {
			return true
		}
	}
	return false
}
