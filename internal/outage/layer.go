package outage

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/internal/compose"
	"github.com/holdfast-db/holdfast/internal/pace"
)

// Role is what a pool is meant for, which decides what the layer checks
// of its servers.
type Role int32

// The roles.
const (
	// RoleLearn: the first connection decides (a read-only server makes
	// the pool a reader, any other a writer).
	RoleLearn Role = iota
	// RoleWriter: new connections to a read-only server are refused, a
	// 25006 from one retires its connections.
	RoleWriter
	// RoleReader: no role check (target_session_attrs=prefer-standby, a
	// reader pool of failover routing, a pool that learned it).
	RoleReader
	// RoleStandby (target_session_attrs=standby): a pooled connection
	// whose server left hot standby is retired.
	RoleStandby
	// RoleReadOnly (target_session_attrs=read-only): a pooled connection
	// whose server is neither in hot standby nor read-only by default is
	// retired.
	RoleReadOnly
)

// RoleOf is the role that cc's target_session_attrs asks for (pgconn
// turns it into ValidateConnect): RoleWriter for read-write and primary,
// RoleReader for prefer-standby, RoleStandby and RoleReadOnly; RoleLearn
// for any (none) or a ValidateConnect of the user's.
func RoleOf(cc *pgconn.Config) Role {
	if cc.ValidateConnect == nil {
		return RoleLearn
	}
	fn := reflect.ValueOf(cc.ValidateConnect).Pointer()
	is := func(f pgconn.ValidateConnectFunc) bool { return reflect.ValueOf(f).Pointer() == fn }
	switch {
	case is(pgconn.ValidateConnectTargetSessionAttrsReadWrite), is(pgconn.ValidateConnectTargetSessionAttrsPrimary):
		return RoleWriter
	case is(pgconn.ValidateConnectTargetSessionAttrsPreferStandby):
		return RoleReader
	case is(pgconn.ValidateConnectTargetSessionAttrsStandby):
		return RoleStandby
	case is(pgconn.ValidateConnectTargetSessionAttrsReadOnly):
		return RoleReadOnly
	}
	return RoleLearn
}

// Config is what a pool's Layer is built from; the engine fills it.
type Config struct {
	// HoldFor bounds each wait for a database that is down (positive);
	// negative: no wait, a connect fails at once while it is down.
	HoldFor time.Duration
	// WakeFor, when positive, makes a connect into a cold pool (armed,
	// holding no established connection: Cold) wake the database first:
	// the layer is waking, the prober makes the one dial in flight, with
	// WakeFor as its bound (not ProbeTimeout), and retries a database
	// still down (refused, 57P03) until WakeFor has passed since the
	// wake began; every connect waits for it within WakeFor and its
	// context. Then the database is down as after a failed check. 0: off.
	WakeFor time.Duration
	// Cold reports whether the pool holds no established connection (a
	// pool of a database that may have paused). Needed with WakeFor.
	Cold func() bool
	// Host is the pool's host (a name, an address or a Unix socket
	// directory): what the prober resolves.
	Host string
	// Role is what the pool is meant for.
	Role Role
	// ReaderWhile, when set, makes the pool a reader's (RoleReader: no
	// role checked) while it reports true, whatever Role says or the
	// first connection taught: a pool that failover routing keeps on its
	// instance (failover.Pinned) while the cluster publishes a topology,
	// where the instance turning reader is the topology's to tell. It is
	// asked at each role check (a new connection, a 25006, a check of the
	// prober's, an Acquire while PrepareConn is armed), never on the
	// Acquire of a pool with nothing to check; it must be cheap (an
	// atomic load).
	ReaderWhile func() bool
	// Lookup resolves a host for the prober, afresh each time.
	Lookup func(ctx context.Context, host string) ([]string, error)
	// Probe connects once to the pool's target through its own dial,
	// resolving hosts with lookup: the connection (closed by the caller),
	// the addresses it dialed, or the failure.
	Probe func(ctx context.Context, lookup pgconn.LookupFunc) (pc *pgconn.PgConn, dialed []string, err error)
	// ProbeTimeout bounds one check.
	ProbeTimeout time.Duration
	// Pace is the prober's pace; nil: pace.Engine(), which follows the
	// demand (the Acquires that find no connection while the database
	// is not up, the connects that wait).
	Pace *pace.Config
	// Lead makes, while the database is down, a connect of the pool that
	// waits the prober's check when one waits at a step of its pace: it
	// dials for real (the one connect of the step), and when it connects
	// the database is back and its connection is the pool's at once, with
	// no handshake of the prober's before it (see the package doc). Off:
	// the prober makes every check itself.
	Lead bool
	// Classify is the factory's classifier.
	Classify func(error) classify.Verdict
	// DownError makes the face's error of a wait that ended while the
	// database was down (holdfast's *DatabaseDownError).
	DownError func(Down) error
	// Report records the outages (the gauge and the log lines); on the
	// prober's goroutine.
	Report Reporter
	// Comp is the pool's composition: its pool, and the events to the
	// other layers.
	Comp *compose.Composition
}

// ErrDown is matched (errors.Is) by the error Config.DownError makes (the
// face's holdfast.ErrDatabaseDown).
var ErrDown = errors.New("holdfast: database down")

// Down is a wait that ended while the database was down, for
// Config.DownError.
type Down struct {
	Since  time.Time     // when the database was found down (first sign)
	Waited time.Duration // how long this wait lasted
	Cause  error         // the prober's last failed check
	Err    error         // what ended the wait: the context's error; nil when HoldFor did
	Bound  time.Duration // HoldFor (negative: no wait); WakeFor while waking
	Waking bool          // the database was waking (WakeFor), not found down
}

// Reporter records a pool's outages.
type Reporter interface {
	// Down: the database is down; cause is the failed check (v its
	// verdict, addr the address it tried).
	Down(cause error, v classify.Verdict, addr string)
	// Back: it answers again at addr after downtime; moved are the
	// addresses it left.
	Back(downtime time.Duration, addr string, moved []string)
	// Woke: a wake (Config.WakeFor) that took took, a second or more,
	// ended: the database answers at addr.
	Woke(took time.Duration, addr string)
}

// State is a pool's outage state, for readiness.
type State struct {
	Down bool // the database is down: new connections wait
	// Waking: a connect into a cold pool wakes the database (WakeFor);
	// new connections wait for it. Since is when the wake began.
	Waking bool
	Since  time.Time // when it was found down (its first sign); zero while up
	Cause  error     // the prober's last failed check, while down
	Back   time.Time // when it last came back; zero if it never went down
}

type phase int8

const (
	up phase = iota
	suspect
	down
	waking // a connect into a cold pool wakes the database (WakeFor)
)

// snapshot is the layer's state, immutable: replaced, never changed; its
// changed channel is closed when it is.
type snapshot struct {
	phase   phase
	since   time.Time // suspect, down: the first sign
	backAt  time.Time
	moves   map[string]string // an address left behind → the one that answered instead
	movesTo time.Time         // until when the moves apply
	changed chan struct{}
}

// movesFor is how long a dial to an address the name left goes to the
// address that answered instead: a client-side DNS cache's TTL (RDS
// publishes 5 s; a JVM's default is 30 s) with room to spare.
const movesFor = time.Minute

// Layer is one pool's outage layer. Build it with New; Close ends it with
// its pool. Its hooks (Layer) are safe for concurrent use.
type Layer struct {
	cfg  Config
	comp *compose.Composition

	snap    atomic.Pointer[snapshot]
	armed   atomic.Bool  // a connection of the pool completed: outages are watched from now on
	role    atomic.Int32 // Role
	waiting atomic.Int32 // waits under way (the prober's pace)
	kick    chan struct{}

	// The demand while the database is not up, for the prober's pace
	// (pace.Asked): Acquires that found no idle connection then, those
	// of them still under way, and connects that began waiting.
	acquires  atomic.Uint64
	acquiring atomic.Int32
	waits     atomic.Uint64
	born      time.Time // the origin of the clock of the prober's pace.Pacer (monotonic)

	offer chan *ticket           // a step of the prober's given to a waiting connect (Config.Lead); unbuffered
	lead  atomic.Pointer[ticket] // the last step taken: its connect is the check

	cause     atomic.Pointer[error]         // the prober's last failed check (down)
	suspicion atomic.Pointer[roleSuspicion] // a 25006 from a server that reports no role
	arm       func(on bool)                 // the switch of the lazy PrepareConn
	acqArm    func(on bool)                 // the switch of the Acquire hooks (on while not up, or an Acquire counted is under way)

	mu       sync.Mutex
	failed   []string // addresses that failed since the first sign (at most maxFailed)
	probing  bool     // the prober runs
	cancel   context.CancelFunc
	closed   bool
	standBy  []func() bool // compose.Precedence: the layers that outrank this one route the pool
	lastRole time.Time     // the last role suspicion (at most one a second)
	wg       sync.WaitGroup

	// The pool's connections from their dial to the end of their
	// handshake, once the layer is armed: a dial that the network leaves
	// pending is a sign (slowDial), and a move cuts those to the address
	// left.
	dialing   map[compose.Conn]*dialing
	slow      *time.Timer // checkSlow, while dialing has entries
	slowArmed bool
}

// dialing is a connection being made.
type dialing struct {
	addr      string
	at        time.Time
	connected bool // its dial completed: its handshake runs
	reported  bool // its dial was slow, and said so
}

// slowDial is how long a dial may stay pending before it is a sign: a
// SYN unanswered that long was lost, and is resent (Linux's first
// retransmission is at 1 s); an address whose packets are dropped (a
// Multi-AZ instance's failed primary) answers never.
const slowDial = time.Second

// maxFailed bounds the addresses an outage remembers.
const maxFailed = 16

// New returns the outage layer of a pool.
func New(cfg Config) *Layer {
	l := &Layer{cfg: cfg, comp: cfg.Comp, born: time.Now(), kick: make(chan struct{}, 1), offer: make(chan *ticket), dialing: map[compose.Conn]*dialing{}}
	l.role.Store(int32(cfg.Role))
	l.snap.Store(&snapshot{changed: make(chan struct{})})
	return l
}

// Layer returns the layer's part of the pool's hooks.
func (l *Layer) Layer() compose.Layer {
	return compose.Layer{
		BeforeConnect:  l.beforeConnect,
		Hold:           l.hold,
		Route:          l.route,
		Dialed:         l.dialed,
		Closed:         l.sockClosed,
		Ended:          l.ended,
		Validate:       l.validate,
		PgError:        l.pgError,
		Failed:         l.onFailed,
		PrepareConn:    l.prepareConn,
		Arm:            l.setArm,
		AcquireStart:   l.acquireStart,
		AcquireEnd:     l.acquireEnd,
		ArmAcquire:     l.setAcquireArm,
		StandDownWhile: l.standDownWhile,
	}
}

// State returns the pool's outage state.
func (l *Layer) State() State {
	s := l.snap.Load()
	switch s.phase {
	case down:
		return State{Down: true, Since: s.since, Cause: l.lastCause(), Back: s.backAt}
	case waking:
		return State{Waking: true, Since: s.since, Cause: l.lastCause(), Back: s.backAt}
	}
	return State{Back: s.backAt}
}

// Sleeps reports whether the pool's database may pause when the pool is
// idle (WakeFor) and the pool has connected: a check through the pool
// (readiness's) would keep it awake, and its state is the layer's.
func (l *Layer) Sleeps() bool { return l.cfg.WakeFor > 0 && l.armed.Load() }

// lastCause is the prober's last failed check.
func (l *Layer) lastCause() error {
	if p := l.cause.Load(); p != nil {
		return *p
	}
	return nil
}

// Changed returns a channel closed at the state's next change (a
// suspicion, down, back, Close).
func (l *Layer) Changed() <-chan struct{} { return l.snap.Load().changed }

// Role returns what the pool is meant for (RoleLearn until its first
// connection when its connection string does not say).
func (l *Layer) Role() Role { return Role(l.role.Load()) }

// roleNow is the role the layer checks now: RoleReader while
// Config.ReaderWhile reports true, else the pool's.
func (l *Layer) roleNow() Role {
	r := Role(l.role.Load())
	if r != RoleLearn && r != RoleReader && l.cfg.ReaderWhile != nil && l.cfg.ReaderWhile() {
		return RoleReader
	}
	return r
}

// Close ends the layer with its pool: the prober stops and is joined, and
// nothing waits any longer (the pool goes on as a plain pool). Idempotent.
func (l *Layer) Close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		l.wg.Wait()
		return
	}
	l.closed = true
	if l.cancel != nil {
		l.cancel()
	}
	if l.slow != nil {
		l.slow.Stop()
	}
	clear(l.dialing)
	if l.snap.Load().phase != up { // release the waiters; while up nothing waits (and the channel stays
		// unclosed: a pool built in a testing/synctest bubble, as pgx's own tests do, may be closed outside it)
		l.publish(func(n *snapshot) { n.phase, n.since = up, time.Time{} })
	}
	l.mu.Unlock()
	l.wg.Wait()
}

// publish replaces the snapshot by a copy that change changed, and wakes
// the waiters of the old one. l.mu is held.
func (l *Layer) publish(change func(*snapshot)) {
	old := l.snap.Load()
	n := *old
	n.changed = make(chan struct{})
	change(&n)
	l.snap.Store(&n)
	close(old.changed)
	l.armAcquires()
}

// setAcquireArm keeps the switch of the Acquire hooks (at Install).
func (l *Layer) setAcquireArm(set func(on bool)) {
	l.acqArm = set
	l.armAcquires()
}

// armAcquires turns the Acquire hooks on while the database is not up or
// an Acquire they counted is under way, and off when neither.
func (l *Layer) armAcquires() { compose.SetSwitch(l.acqArm, l.countsAcquires) }

// countsAcquires reports whether the Acquire hooks have anything to
// count: the database is not up, or an Acquire they counted is under way.
func (l *Layer) countsAcquires() bool { return l.snap.Load().phase != up || l.acquiring.Load() > 0 }

// standDownWhile learns the Routing of a layer that outranks this one.
func (l *Layer) standDownWhile(routing func() bool) {
	l.mu.Lock()
	l.standBy = append(l.standBy, routing)
	l.mu.Unlock()
}

// standingDown reports whether a layer that outranks this one routes the
// pool now: its signs are not this layer's to act on.
func (l *Layer) standingDown() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.standingDownLocked()
}

func (l *Layer) standingDownLocked() bool {
	for _, r := range l.standBy {
		if r() {
			return true
		}
	}
	return false
}

// beforeConnect holds a new connection while the database is suspect or
// down, before its password is fetched or anything is dialed.
func (l *Layer) beforeConnect(ctx context.Context, c compose.Conn, cc *pgx.ConnConfig, next compose.ConnectFunc) error {
	if l.cfg.WakeFor > 0 && l.snap.Load().phase == up && l.armed.Load() && l.cfg.Cold() {
		l.wake()
	}
	if _, err := l.wait(ctx, c); err != nil {
		return err
	}
	if err := next(ctx, c, cc); err != nil {
		l.endLead(c, result{err: errLeadEnded}) // nothing dialed: no verdict
		return err
	}
	return nil
}

// endLead ends the step of the prober's that c took, if it did, with r.
func (l *Layer) endLead(c compose.Conn, r result) {
	if t := l.lead.Load(); t != nil && t.c == c {
		r.dialed = t.dialedAddrs()
		t.end(r)
	}
}

// wake starts a wake: the database may have paused while the pool held
// no connection (WakeFor). Nothing when a prober runs already.
func (l *Layer) wake() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.snap.Load().phase != up || l.probing {
		return
	}
	l.publish(func(n *snapshot) { n.phase, n.since = waking, time.Now() })
	l.startLocked()
}

// hold is the connector's question before a retry (compose.Layer.Hold).
func (l *Layer) hold(ctx context.Context, c compose.Conn) (bool, error) { return l.wait(ctx, c) }

// wait waits while the database is suspect (for the prober's verdict) or
// down (for "back"), at most HoldFor and while ctx lasts; while it wakes,
// for the wake, at most WakeFor. waited reports that it was down: the
// connect starts afresh. With Config.Lead, a wait of c while down may
// take a step of the prober's instead (waited, no error): c's connect is
// then the check, and a wait of c after its attempt failed ends the step
// and waits on, its HoldFor counted from its first wait. It returns the
// face's error when it ends while down. One atomic load when up.
func (l *Layer) wait(ctx context.Context, c compose.Conn) (waited bool, err error) {
	s := l.snap.Load()
	if s.phase == up {
		// Up: only the prober's settle (or Close) publishes it, so no
		// step is waited for now, whatever c took before.
		return false, nil
	}
	start := time.Now()
	spent := false // c takes no step: its attempt after one reached a server (pgx's rounds are few)
	again := false // c waits again after its step: no new demand (the pace would follow its own checks)
	if t := l.lead.Load(); t != nil && c != nil && t.c == c {
		// c's connect was the check, and its attempt failed (the
		// connector asks before a retry): the step ends, no verdict.
		t.end(result{err: errLeadFailed, dialed: t.dialedAddrs()})
		start, waited, spent, again = t.heldSince, true, t.reachedServer(), true
	}
	bound := l.cfg.HoldFor
	if s.phase == waking {
		bound = l.cfg.WakeFor
	}
	if bound < 0 {
		if s.phase == down {
			return true, l.downError(s, 0, nil)
		}
		return false, nil
	}
	compose.HoldWaits(ctx) // the connector's retry: its admission slot is free while it waits
	l.waiting.Add(1)
	defer l.waiting.Add(-1)
	if !again {
		l.waits.Add(1)
	}
	l.kickProber()
	t := time.NewTimer(bound - time.Since(start))
	defer t.Stop()
	var offers chan *ticket // nil: no step is taken
	if l.cfg.Lead && c != nil && !spent {
		// A connect whose attempt reached a server and failed there (a
		// handshake refused, a read-only server) used one of the retry
		// rounds in its pgx config, which are few: it waits for "back".
		offers = l.offer
	}
	for {
		off := offers
		switch s.phase {
		case up:
			return waited, nil
		case down:
			waited = true
		case waking:
			waited, off = true, nil
		default:
			off = nil
		}
		select {
		case <-s.changed:
			s = l.snap.Load()
		case tk := <-off:
			// A step of the prober's: c's connect is the check.
			tk.c, tk.heldSince = c, start
			l.lead.Store(tk)
			return true, nil
		case <-ctx.Done():
			if s.phase == down || s.phase == waking {
				return true, l.downError(s, time.Since(start), ctx.Err())
			}
			return waited, ctx.Err()
		case <-t.C:
			return true, l.downError(s, time.Since(start), nil)
		}
	}
}

// kickProber asks a sleeping prober's pace again: a request began
// waiting (a prober paced for nobody, or for less demand, speeds up).
func (l *Layer) kickProber() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// acquiringKey marks the context of an Acquire counted as demand.
type acquiringKey struct{}

// acquireStart counts, while the database is not up, an Acquire that
// finds no idle connection as a connect asked for (the prober's pace
// follows the demand: pace.Asked), and as waiting until it ends: a
// request pgxpool queues behind the connects held asks for nothing new
// and is seen only here. It runs only while the hooks are on (not up, or
// an Acquire counted under way).
func (l *Layer) acquireStart(ctx context.Context, pool *pgxpool.Pool) context.Context {
	if l.snap.Load().phase == up {
		return ctx
	}
	if pool != nil && pool.Stat().IdleConns() > 0 {
		return ctx // served by a connection the pool has (a token source down)
	}
	l.acquires.Add(1)
	l.acquiring.Add(1)
	l.kickProber()
	return context.WithValue(ctx, acquiringKey{}, l)
}

// acquireEnd ends the wait of an Acquire acquireStart counted; the last
// to end once the database is up turns the hooks off.
func (l *Layer) acquireEnd(ctx context.Context) {
	if l.acquiring.Load() == 0 {
		return
	}
	if v, _ := ctx.Value(acquiringKey{}).(*Layer); v == l {
		if l.acquiring.Add(-1) == 0 {
			l.armAcquires()
		}
	}
}

// asked is the demand the pool saw while the database was not up
// (pace.Asked), and the requests that wait: the connects held, or the
// Acquires counted that are still under way, whichever is more.
func (l *Layer) asked() (pace.Asked, int) {
	w := max(int(l.waiting.Load()), int(l.acquiring.Load()))
	return pace.Asked{Acquires: l.acquires.Load(), Waits: l.waits.Load()}, w
}

// downError is the face's error of a wait that ended while s.
func (l *Layer) downError(s *snapshot, waited time.Duration, err error) error {
	bound := l.cfg.HoldFor
	if s.phase == waking {
		bound = l.cfg.WakeFor
	}
	return l.cfg.DownError(Down{Since: s.since, Waited: waited, Cause: l.lastCause(), Err: err, Bound: bound, Waking: s.phase == waking})
}

// DownError returns the face's error of a wait that ended now with err
// (a request's own deadline), or nil when the database is not down: for
// the face's doors, whose caller's deadline ended while pgxpool waited
// for a connect held here.
func (l *Layer) DownError(err error) error {
	s := l.snap.Load()
	if s.phase != down && s.phase != waking {
		return nil
	}
	return l.downError(s, 0, err)
}

// route sends a dial to an address the database left (a stale DNS
// answer) to the address that answered instead, and follows the dial: a
// dial left pending slowDial is a sign.
func (l *Layer) route(_ context.Context, c compose.Conn, _, addr string, _ bool) (string, error) {
	if s := l.snap.Load(); s.moves != nil {
		if to, ok := s.moves[addr]; ok && time.Now().Before(s.movesTo) {
			addr = to
		}
	}
	if l.armed.Load() {
		l.track(c, addr)
	}
	if t := l.lead.Load(); t != nil && t.c == c {
		t.dialing(addr)
	}
	return addr, nil
}

// track follows c's dial to addr, which begins now.
func (l *Layer) track(c compose.Conn, addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.dialing[c] = &dialing{addr: addr, at: time.Now()}
	l.armSlowLocked(slowDial)
}

// armSlowLocked runs checkSlow in d, unless it is due already. l.mu is
// held.
func (l *Layer) armSlowLocked(d time.Duration) {
	if l.slowArmed {
		return
	}
	l.slowArmed = true
	if l.slow == nil {
		l.slow = time.AfterFunc(d, l.checkSlow)
	} else {
		l.slow.Reset(d)
	}
}

// maxTracked bounds how long a connection is followed (a connect that
// ended without a handshake leaves its entry: it goes then).
const maxTracked = time.Minute

// checkSlow makes a sign of each dial pending slowDial or longer (once
// each), on the timer's goroutine, and runs again when the next may be.
func (l *Layer) checkSlow() {
	l.mu.Lock()
	l.slowArmed = false
	now := time.Now()
	var slow []string
	next := time.Duration(-1)
	for c, d := range l.dialing {
		age := now.Sub(d.at)
		switch {
		case age > maxTracked:
			delete(l.dialing, c)
		case d.connected || d.reported:
		case age >= slowDial:
			d.reported = true
			slow = append(slow, d.addr)
		case next < 0 || slowDial-age < next:
			next = slowDial - age
		}
	}
	if next >= 0 && !l.closed {
		l.armSlowLocked(next)
	}
	l.mu.Unlock()
	for _, a := range slow {
		l.suspect(a)
	}
}

// dialed notes that c's dial reached addr; one to an address left behind
// meanwhile is cut.
func (l *Layer) dialed(c compose.Conn, addr string, _ time.Time) {
	if t := l.lead.Load(); t != nil && t.c == c {
		t.reached.Store(true)
	}
	l.mu.Lock()
	if d := l.dialing[c]; d != nil {
		d.connected, d.addr = true, addr
	}
	l.mu.Unlock()
	if s := l.snap.Load(); s.moves != nil {
		if to, ok := s.moves[addr]; ok && time.Now().Before(s.movesTo) {
			c.Abort(leftWrap(addr, to))
		}
	}
}

// sockClosed: c's socket closed. A check's connect (Config.Lead) that
// closes before its handshake completed, with no sign of the database
// being down (a refusal the server answered: too many connections, an
// authentication failure), ends its step with no verdict, and the
// prober makes the next check itself (it counts a server that answers as
// up): its connect ends without a retry, which would have told.
func (l *Layer) sockClosed(c compose.Conn) {
	l.forget(c)
	if t := l.lead.Load(); t != nil && t.c == c && !t.signed() {
		t.end(result{err: errLeadEnded, dialed: t.dialedAddrs()})
	}
}

// ended: c's connect ended. A check's connect (Config.Lead) that ended
// with an error, no retry following (a failure its connector does not
// retry, its attempts or its bounds spent), ends its step with no
// verdict, and the prober makes the next check itself.
func (l *Layer) ended(c compose.Conn, err error) {
	if err != nil {
		l.endLead(c, result{err: errLeadEnded})
	}
}

// forget stops following c (its handshake ended, or its socket closed).
func (l *Layer) forget(c compose.Conn) {
	l.mu.Lock()
	delete(l.dialing, c)
	l.mu.Unlock()
}

// LeftError is the error of a connection to an address the database
// left, which the layer cut: a connection being made (its connect goes
// on, to the address that answers), or one in use when the database's
// name moved away from its address (what it had in flight fails at once:
// a transaction open on it did not commit; a COMMIT in flight has its
// outcome unknown, *OutcomeUnknownError in holdfast). Transient
// (classify.ReasonDatabaseDown: the database is gone from that address).
type LeftError struct {
	addr, to string
	err      error
}

func (e *LeftError) Error() string {
	msg := "holdfast: connection to " + e.addr + " cut: the database left it"
	if e.to != "" {
		msg += " (it answers at " + e.to + ")"
	}
	if e.err == nil { // no I/O error surfaced it (a handshake refused, a cancel request not dialed)
		return msg
	}
	return msg + ": " + e.err.Error()
}

func (e *LeftError) Unwrap() error { return e.err }

// leftWrap is the abortion of a connection to addr, left for to.
func leftWrap(addr, to string) func(error) error {
	return func(cause error) error { return &LeftError{addr: addr, to: to, err: cause} }
}

// onFailed is a sign: a dial or handshake that failed, or an established
// connection that broke or that its server ended.
func (l *Layer) onFailed(addr string, established bool) {
	if t := l.lead.Load(); t != nil && !established {
		t.sign(addr) // the check's connect, when it dials addr: its retry tells the rest
	}
	l.suspect(addr)
}

// CredentialsFailed is a sign: a connect of the pool could not get its
// password, token or certificate (the password function, or an
// integration's dialer, failed with a retryable error: the token source,
// an IAM token API or the vendor's Admin API, is down). The prober checks
// at once; no address is suspected, so the pool's connections stay.
func (l *Layer) CredentialsFailed() { l.suspect("") }

// CredentialsError is a check's failure to get the password, token or
// certificate of its connection (the engine's probe wraps it): the token
// source's, not the database's. A retryable one finds the pool down as an
// unreachable database does, since no new connection can be made; the
// pool's connections, which need no new token, stay and serve. A fatal
// one (a refused IAM role) ends a suspicion, and the pool's own connects
// surface it.
type CredentialsError struct{ Err error }

func (e *CredentialsError) Error() string { return e.Err.Error() }
func (e *CredentialsError) Unwrap() error { return e.Err }

// TokenSource reports whether cause, a check's (State.Cause, a
// Reporter's), is the token source's: a CredentialsError.
func TokenSource(cause error) bool {
	var ce *CredentialsError
	return errors.As(cause, &ce)
}

// suspect starts the prober on a sign of the database being down (addr:
// the address that failed, "" when unknown), once the pool connected and
// unless a layer that outranks this one routes it.
func (l *Layer) suspect(addr string) {
	if !l.armed.Load() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.standingDownLocked() {
		return
	}
	l.noteFailedLocked(addr)
	if l.snap.Load().phase != up || l.probing {
		return
	}
	l.publish(func(n *snapshot) { n.phase, n.since = suspect, time.Now() })
	l.startLocked()
}

// noteFailedLocked remembers addr as failed in this outage. l.mu is held.
func (l *Layer) noteFailedLocked(addr string) {
	if addr == "" || slices.Contains(l.failed, addr) || len(l.failed) >= maxFailed {
		return
	}
	l.failed = append(l.failed, addr)
}

// validate checks a new connection's server: for a pool meant for
// writes, a read-only one is refused (and is a sign); the pool's first
// connection decides what a pool whose connection string does not say is
// meant for. A connection that passes arms the layer.
func (l *Layer) validate(ctx context.Context, c compose.Conn, host string, pc *pgconn.PgConn) (err error) {
	l.forget(c) // made: no longer followed
	if t := l.lead.Load(); t != nil && t.c == c {
		defer func() { // the check's connect: its verdict
			t.end(result{addr: pc.Conn().RemoteAddr().String(), dialed: t.dialedAddrs(), err: err})
			if err == nil {
				// Its connection is the pool's once the prober has
				// published "back" and written its line: whoever sees
				// the request succeed sees the line (bounded: a prober
				// closing meanwhile does not settle).
				t.settledWithin(ctx, leadSlack)
			}
		}()
	}
	switch l.roleNow() {
	case RoleLearn:
		ro, _, err := readOnly(ctx, pc, l.askRole())
		if err != nil {
			return err
		}
		learnt := RoleWriter
		if ro {
			learnt = RoleReader
		}
		l.role.CompareAndSwap(int32(RoleLearn), int32(learnt))
	case RoleWriter:
		ro, why, err := readOnly(ctx, pc, l.askRole())
		if err != nil {
			return err
		}
		if ro {
			addr := c.Server()
			l.suspect(addr)
			return &NotWritableError{Host: host, Addr: addr, Why: why}
		}
	}
	l.armed.Store(true)
	return nil
}

// NotWritableError is a new connection of a pool meant for writes that
// reached a read-only server: refused before any statement. The pool
// holds until a writable server answers at its name. Transient
// (classify.ReasonNotWritable).
type NotWritableError struct {
	Host string // the name asked for
	Addr string // the server reached
	Why  string // "in hot standby", "read-only"
}

func (e *NotWritableError) Error() string {
	return fmt.Sprintf("holdfast: %s led to %s, which is %s: refused, this pool is meant for writes (it waits for a writable server at %s)", e.Host, e.Addr, e.Why, e.Host)
}

// readOnly reports whether pc's server is read-only by default, and why:
// from the parameters it reports at connect (PostgreSQL 14 and later),
// else, when ask, by asking (SHOW transaction_read_only, one round trip);
// a server that does not say, unasked, counts as writable.
func readOnly(ctx context.Context, pc *pgconn.PgConn, ask bool) (bool, string, error) {
	switch hot, ro := pc.ParameterStatus("in_hot_standby"), pc.ParameterStatus("default_transaction_read_only"); {
	case hot == "on":
		return true, "in hot standby", nil
	case ro == "on":
		return true, "read-only", nil
	case hot != "" || !ask:
		return false, "", nil
	}
	return askReadOnly(ctx, pc)
}

// askRole reports whether a new connection to a server that does not
// report in_hot_standby (before PostgreSQL 14) is asked its role: only
// with cause — a write refused with 25006 lately (a suspicion), or the
// database not up — so that an ordinary connect costs no round trip more
// than pgx's own (a statement at connect is one more place to stall, and
// pgx's own pool tests, through holdfast, count on none).
func (l *Layer) askRole() bool {
	return l.suspicion.Load() != nil || l.snap.Load().phase != up
}

// askReadOnly asks pc's server whether a new transaction is read-only
// (a standby, or default_transaction_read_only), within a second.
func askReadOnly(ctx context.Context, pc *pgconn.PgConn) (bool, string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	res := pc.Exec(ctx, "SHOW transaction_read_only")
	results, err := res.ReadAll()
	if err != nil {
		return false, "", err
	}
	if len(results) == 1 && len(results[0].Rows) == 1 && len(results[0].Rows[0]) == 1 && string(results[0].Rows[0][0]) == "on" {
		return true, "read-only", nil
	}
	return false, "", nil
}

// pgError acts on a 25006 on a connection of a pool meant for writes:
// from a server in hot standby, the pool's connections to it are retired
// (this one closed: a transaction runner may run its transaction again)
// and the name is checked; from a connection that reports itself
// read-only by default (the server's default, or a session the
// application made read-only: only a fresh connection tells), the name is
// checked, and meanwhile a connection to that server that reports itself
// read-only is destroyed when next acquired; from a server that reports
// no role (before PostgreSQL 14), each connection made to it before is
// asked once when next acquired. A 25006 from a connection that says it
// is writable is a transaction the application made read-only: nothing.
func (l *Layer) pgError(pc *pgconn.PgConn, pe *pgconn.PgError) bool {
	if pe.Code != "25006" || !l.armed.Load() || l.roleNow() != RoleWriter {
		return true
	}
	h := compose.HandleOf(pc)
	if h == nil || l.standingDown() {
		return true
	}
	addr := h.Server()
	switch hot, ro := pc.ParameterStatus("in_hot_standby"), pc.ParameterStatus("default_transaction_read_only"); {
	case hot == "on":
		l.demoted(addr)
		return false
	case ro == "on":
		l.suspectRole(addr, false)
	case hot == "":
		l.suspectRole(addr, true)
	}
	return true
}

// demoted retires the pool's connections to addr, a server that turned
// read-only (busy ones destroyed when next acquired, idle ones closed by
// the prober), and checks the name.
func (l *Layer) demoted(addr string) {
	l.comp.Gone(addr)
	l.suspect(addr)
}

// roleSuspicion is a 25006 from addr, a server that says it is read-only
// by default or says nothing of its role: until the prober's verdict (for
// roleSuspicionFor at most), a connection to it that reports itself read-
// only is destroyed when next acquired, and, when ask, each connection to
// it made before at is asked once.
type roleSuspicion struct {
	addr string
	at   time.Time
	ask  bool
}

// roleSuspicionFor bounds a suspicion: a connection not acquired that
// long is checked at the next one.
const roleSuspicionFor = time.Minute

// suspectRole starts a suspicion on addr (at most one a second), and
// checks the name.
func (l *Layer) suspectRole(addr string, ask bool) {
	l.mu.Lock()
	now := time.Now()
	if now.Sub(l.lastRole) < time.Second {
		l.mu.Unlock()
		return
	}
	l.lastRole = now
	l.mu.Unlock()
	l.suspicion.Store(&roleSuspicion{addr: addr, at: now, ask: ask})
	l.rearm()
	l.suspect(addr)
}

// checkedKey keeps, in a connection's CustomData, the suspicion it was
// checked for.
const checkedKey = "holdfast/outage-checked"

// prepareConn retires a pooled connection whose server no longer is what
// the pool is meant for: for a pool of target_session_attrs=standby or
// read-only, from the parameters the server reported; during a role
// suspicion, by asking it, once per connection. Lazy (Arm): it runs only
// for those pools or during a suspicion.
func (l *Layer) prepareConn(ctx context.Context, c *pgx.Conn) (bool, error) {
	pc := c.PgConn()
	r := l.roleNow()
	switch r {
	case RoleStandby:
		if pc.ParameterStatus("in_hot_standby") == "off" {
			l.mismatch(c)
			return false, nil
		}
	case RoleReadOnly:
		if pc.ParameterStatus("in_hot_standby") == "off" && pc.ParameterStatus("default_transaction_read_only") == "off" {
			l.mismatch(c)
			return false, nil
		}
	}
	rs := l.suspicion.Load()
	if rs == nil {
		return true, nil
	}
	if time.Since(rs.at) > roleSuspicionFor {
		if l.suspicion.CompareAndSwap(rs, nil) {
			l.rearm()
		}
		return true, nil
	}
	if r != RoleWriter {
		return true, nil // a reader's meanwhile (Config.ReaderWhile)
	}
	h := compose.ConnOf(c)
	if h == nil || h.Server() != rs.addr {
		return true, nil
	}
	switch hot, ro := pc.ParameterStatus("in_hot_standby"), pc.ParameterStatus("default_transaction_read_only"); {
	case hot == "on":
		l.demoted(rs.addr)
		return false, nil
	case ro == "on":
		return false, nil // read-only: not for this pool's writes
	}
	if !rs.ask || !h.MadeAt().Before(rs.at) {
		return true, nil
	}
	data := pc.CustomData()
	if data[checkedKey] == rs {
		return true, nil
	}
	data[checkedKey] = rs
	ro, _, err := askReadOnly(ctx, pc)
	if err != nil {
		return false, nil // it cannot say: pgxpool destroys it and takes another
	}
	if ro {
		l.demoted(rs.addr)
		return false, nil
	}
	return true, nil
}

// mismatch retires c, whose server no longer matches the pool's
// target_session_attrs, and the pool's other connections to it.
func (l *Layer) mismatch(c *pgx.Conn) {
	if h := compose.ConnOf(c); h != nil {
		l.comp.Gone(h.Server())
	}
}

// setArm keeps the switch of the lazy PrepareConn (at Install).
func (l *Layer) setArm(set func(on bool)) {
	l.arm = set
	l.rearm()
}

// rearm turns the switch on while PrepareConn has anything to check.
func (l *Layer) rearm() { compose.SetSwitch(l.arm, l.checksOnAcquire) }

// checksOnAcquire reports whether PrepareConn has anything to check: a
// pool meant for a standby or read-only server, or a role suspicion.
func (l *Layer) checksOnAcquire() bool {
	r := Role(l.role.Load())
	return r == RoleStandby || r == RoleReadOnly || l.suspicion.Load() != nil
}

// downKind reports whether a failed check says the database is down (it
// could not be reached, or it refused because it is shutting down,
// starting or recovering, or it is read-only for a pool meant for
// writes), or no connection can be made (a retryable failure of the
// password function: CredentialsError): else the server answered (it
// accepts connections) or the check could not be made (the password
// function's fatal failure).
func (l *Layer) downKind(err error) (isDown bool, v classify.Verdict) {
	var nw *NotWritableError
	if errors.As(err, &nw) {
		return true, classify.Verdict{Class: classify.Transient, Reason: classify.ReasonNotWritable}
	}
	var ce *CredentialsError
	if errors.As(err, &ce) {
		v = l.cfg.Classify(ce.Err)
		return v.Retryable(), v
	}
	v = l.cfg.Classify(err)
	switch v.Reason {
	case classify.ReasonConnRefused, classify.ReasonConnReset, classify.ReasonBrokenPipe, classify.ReasonConnAborted,
		classify.ReasonHostUnreachable, classify.ReasonNetUnreachable, classify.ReasonSocketMissing,
		classify.ReasonEOF, classify.ReasonConnClosed, classify.ReasonTimeout,
		classify.ReasonDNSTemporary, classify.ReasonDNSNotFound, classify.ReasonDNSError,
		classify.ReasonPrefixSQLState + "57P01", classify.ReasonPrefixSQLState + "57P02", classify.ReasonPrefixSQLState + "57P03":
		return true, v
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true, classify.Verdict{Class: classify.Transient, Reason: classify.ReasonTimeout}
	}
	return false, v
}
