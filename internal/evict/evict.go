// Package evict is the eviction layer of a pool: it presumes dead the
// pool's connections to a server that just failed one of them, or that
// another layer left behind, and has them destroyed when next acquired;
// it cuts at once, in use or not, the connections to a server another
// layer cut (compose.Composition.Cut: a failover's old writer, an
// address the database's name left), the one mechanism of every cut;
// and it finds an idle connection whose server closed it (or spoke
// unasked) before pgxpool hands it out.
package evict

import (
	"context"
	"sync"
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
//
// Dead idle connections. A server that shuts down (pg_ctl stop -m fast, a
// restart, a failover) sends each idle connection a FATAL 57P01 and a FIN,
// which pgx reads only with the connection's next query: that query
// would fail, and it cannot be retried (never resend what may have
// reached a server). pgxpool pings only connections idle over a second.
// So the layer asks pgxpool (ShouldPing) to ping a connection idle longer
// than PeekAfter whose socket holds bytes the server sent unasked, or its
// close: one non-blocking peek of the socket (compose.Conn.Unread), about
// a microsecond, only for a connection idle that long; an Acquire right
// after a Release costs one comparison. The ping reads the FATAL, fails
// and destroys the connection (and the connector tells every layer that
// the server failed it: Failed), pgxpool takes another; a NOTIFY or a
// parameter change costs a harmless ping.
type Eviction struct {
	// cur, when set, is the latest failure and the ones before it still
	// in force.
	cur atomic.Pointer[evicted]
	// quota, when set, is a reader rebalance's: how many more of the
	// pool's connections to each server to destroy when next acquired.
	quota atomic.Pointer[retiring]
	// arm is the switch of the lazy PrepareConn (compose.Layer.Arm): on
	// while cur or quota is set.
	arm func(on bool)

	mu   sync.Mutex
	live map[compose.Conn]struct{} // the pool's connections, from their dial on (Dialed to Closed)
	cuts []cutRecord               // the latest cuts (at most maxCutRecords), for a dial they crossed
}

// cutRecord is one cut of the pool's connections to addr.
type cutRecord struct {
	addr string
	at   time.Time
	wrap func(error) error
}

// maxCutRecords bounds the cuts a pool remembers: a dial lasts at most the
// policy's AttemptTimeout, and a failover cuts one or two addresses.
const maxCutRecords = 8

// PeekAfter is how long a connection must have been idle for its socket
// to be peeked before it is handed out (see Eviction): longer than an
// Acquire that follows a Release, shorter than the time between a
// service's requests.
const PeekAfter = 50 * time.Millisecond

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
	return compose.Layer{PrepareConn: e.prepareConn, Arm: e.setArm, Failed: e.failed, Gone: e.evictHost, Retire: e.retireSome,
		ShouldPing: e.shouldPing, IdleAfter: PeekAfter, Dialed: e.dialed, Closed: e.closed, Cut: e.cut}
}

// dialed keeps a connection of the pool from its dial to addr on, for a
// cut (compose.Composition.Cut). A cut of addr made after the dial began
// and before this reaches it here: whatever moment its handshake ends, no
// connection to a server that a cut left behind survives the cut.
func (e *Eviction) dialed(c compose.Conn, addr string, start time.Time) {
	e.mu.Lock()
	if e.live == nil {
		e.live = map[compose.Conn]struct{}{}
	}
	e.live[c] = struct{}{}
	var crossed func(error) error
	for _, cut := range e.cuts {
		if cut.addr == addr && !cut.at.Before(start) {
			crossed = cut.wrap
		}
	}
	e.mu.Unlock()
	if crossed != nil {
		c.Abort(crossed)
	}
}

// closed forgets a connection.
func (e *Eviction) closed(c compose.Conn) {
	e.mu.Lock()
	delete(e.live, c)
	e.mu.Unlock()
}

// cut cuts every connection of the pool to addr, from its dial on, in use
// or not (compose.Conn.Abort with wrap: a blocked read or write returns
// at once, nothing more is sent), and remembers the cut for a dial it
// crossed (dialed). The composition has evicted addr first and closes
// the idle ones after (compose.Composition.Cut).
func (e *Eviction) cut(addr string, wrap func(error) error) {
	e.mu.Lock()
	e.cuts = append(e.cuts, cutRecord{addr: addr, at: time.Now(), wrap: wrap})
	if len(e.cuts) > maxCutRecords {
		e.cuts = append(e.cuts[:0:0], e.cuts[len(e.cuts)-maxCutRecords:]...)
	}
	var hit []compose.Conn
	for c := range e.live {
		if c.Server() == addr {
			hit = append(hit, c)
		}
	}
	e.mu.Unlock()
	for _, c := range hit {
		c.Abort(wrap)
	}
}

// setArm keeps the switch of the lazy PrepareConn (at Install).
func (e *Eviction) setArm(set func(on bool)) {
	e.arm = set
	e.rearm()
}

// rearm turns the switch on while there is anything to check, off when
// not: off first, then on again if a change came meanwhile.
func (e *Eviction) rearm() { compose.SetSwitch(e.arm, e.hasWork) }

// hasWork reports whether PrepareConn has anything to check: a failure
// still in force (cur), or a rebalance's quota to retire (quota).
func (e *Eviction) hasWork() bool { return e.cur.Load() != nil || e.quota.Load() != nil }

// shouldPing asks pgxpool to ping a connection idle longer than
// PeekAfter whose server sent it anything or closed it (see Eviction).
func (e *Eviction) shouldPing(_ context.Context, c *pgx.Conn, _ time.Duration) bool {
	h := compose.ConnOf(c)
	return h != nil && h.Unread()
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
	e.rearm()
}

// prepareConn is the layer's PrepareConn, lazy (it runs only while the
// switch is on: a server failed in the last minute, or a rebalance is
// under way).
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
		e.rearm()
		return
	}
	q.total.Store(int32(total))
	e.quota.Store(q)
	e.rearm()
}

// retires reports whether c is one of q's quota, and counts it.
func (e *Eviction) retires(q *retiring, c *pgx.Conn) bool {
	if time.Now().After(q.until) {
		if e.quota.CompareAndSwap(q, nil) {
			e.rearm()
		}
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
			if q.total.Add(-1) == 0 && e.quota.CompareAndSwap(q, nil) {
				e.rearm()
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
		if e.cur.CompareAndSwap(cur, nil) {
			e.rearm()
		}
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
