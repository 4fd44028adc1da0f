package outage

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/internal/compose"
	"github.com/holdfast-db/holdfast/internal/pace"
)

// closeProbes bounds the close of a check's connection.
const closeProbes = time.Second

// startLocked starts the prober. l.mu is held.
func (l *Layer) startLocked() {
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel, l.probing = cancel, true
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer cancel()
		l.run(ctx)
	}()
}

// result is one check's outcome.
type result struct {
	addr     string   // the address that answered
	resolved []string // what the host resolved to for it (nil: not resolved: a socket, a failed lookup)
	dialed   []string // the addresses it dialed
	err      error    // nil: it connected (to a writable server, for a pool meant for writes)
}

// run is the prober: a check at once, then one per step of the pace,
// until one connects or ctx ends. While the database is down and a
// connect of the pool waits, the step is its (Config.Lead: byLead);
// else the prober connects itself.
func (l *Layer) run(ctx context.Context) {
	own := false // the last step's connect ended with no verdict: the next check is the prober's
	p := pace.Pacer{Config: pace.Engine()}
	if l.cfg.Pace != nil {
		p.Config = *l.cfg.Pace
	}
	asked, _ := l.asked()
	p.Start(l.clock(), asked)
	for {
		r, led, t := result{}, false, (*ticket)(nil)
		if !own {
			r, led, t = l.byLead(ctx)
		}
		if !led {
			r = l.check(ctx, pace.Fast)
		}
		if ctx.Err() != nil {
			t.settle()
			return
		}
		own = errors.Is(r.err, errLeadEnded)
		done := l.settle(r)
		t.settle() // the check's connect goes on: "back" is published and told
		if done {
			return
		}
		if !l.sleep(ctx, &p) {
			return
		}
	}
}

// errLeadFailed is a check made by a connect of the pool (Config.Lead)
// whose attempt failed, which its connector retries: no verdict, the
// cause the prober knows stays.
var errLeadFailed = errors.New("holdfast: the check's connect failed")

// errLeadEnded is a check made by a connect of the pool that ended with
// no sign of the database being down (a server that answered with a
// refusal), or that did not end within its bound: no verdict; the next
// check is the prober's own.
var errLeadEnded = errors.New("holdfast: the check's connect ended without a verdict")

// leadSlack is how long a check made by a connect of the pool may last
// beyond ProbeTimeout (its password, its admission) before the prober
// makes the next step's check itself.
const leadSlack = time.Second

// ticket is a step of the prober's pace taken by a connect of the pool
// that waits while the database is down (Config.Lead): its connect is
// the step's check. Its hooks (wait, route, Failed, Validate, Closed) end
// it; end gives its result once.
type ticket struct {
	c         compose.Conn  // the connect that took it: set before the ticket is published (Layer.lead)
	heldSince time.Time     // when c began to wait: its HoldFor counts from then
	done      chan result   // its result, once (buffered)
	settled   chan struct{} // closed when the prober settled its result (run): "back" published and reported
	ended     atomic.Bool
	reached   atomic.Bool // its connect's dial reached a server (Dialed)

	mu     sync.Mutex
	dialed []string // the addresses its connect dialed
	signal bool     // its dial or handshake failed with a sign of the database down: its retry tells
}

// settle tells t's connect that the prober settled its result (nil t:
// no step was taken).
func (t *ticket) settle() {
	if t != nil {
		close(t.settled)
	}
}

// settledWithin waits, at most d and while ctx lasts, for the prober to
// settle t's result: a check's connect that succeeded goes on once the
// database is "back" and its log line written, as a prober's check would
// have it.
func (t *ticket) settledWithin(ctx context.Context, d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-t.settled:
	case <-ctx.Done():
	case <-timer.C:
	}
}

// end gives t's result to the prober, the first time.
func (t *ticket) end(r result) {
	if t.ended.CompareAndSwap(false, true) {
		t.done <- r
	}
}

func (t *ticket) dialing(addr string) {
	t.mu.Lock()
	t.dialed, t.signal = append(t.dialed, addr), false
	t.mu.Unlock()
}

// sign notes a sign of the database down from addr: the check's when it
// is the address of its current dial.
func (t *ticket) sign(addr string) {
	t.mu.Lock()
	if n := len(t.dialed); n > 0 && t.dialed[n-1] == addr {
		t.signal = true
	}
	t.mu.Unlock()
}

func (t *ticket) signed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.signal
}

func (t *ticket) reachedServer() bool { return t.reached.Load() }

func (t *ticket) dialedAddrs() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.dialed)
}

// byLead gives the step to a connect of the pool that waits, while the
// database is down (Config.Lead), and waits for its result within
// ProbeTimeout and leadSlack, resolving the host again every pace as a
// check does. led is false when no connect took it, or when the name led
// elsewhere meanwhile: the prober checks itself.
func (l *Layer) byLead(ctx context.Context) (r result, led bool, taken *ticket) {
	if !l.cfg.Lead || l.snap.Load().phase != down || l.waiting.Load() == 0 {
		return result{}, false, nil
	}
	resolved := l.resolve(ctx)
	t := &ticket{done: make(chan result, 1), settled: make(chan struct{})}
	select {
	case l.offer <- t:
	default:
		return result{}, false, nil // none waits at the offer now
	}
	bound := time.NewTimer(l.cfg.ProbeTimeout + leadSlack)
	defer bound.Stop()
	var tick <-chan time.Time
	if resolved != nil {
		tk := time.NewTicker(pace.Fast)
		defer tk.Stop()
		tick = tk.C
	}
	for {
		select {
		case r := <-t.done:
			r.resolved = resolved
			return r, true, t
		case <-ctx.Done():
			t.end(result{})
			return result{}, true, t
		case <-bound.C:
			t.end(result{})
			return result{err: errLeadEnded, dialed: t.dialedAddrs()}, true, t
		case <-tick:
			if now := l.resolve(ctx); len(now) > 0 && !sameSet(now, resolved) {
				t.end(result{}) // its connect goes on, and waits again if it fails
				return result{}, false, t
			}
		}
	}
}

// clock is the time on the prober's pace.Pacer's clock.
func (l *Layer) clock() time.Duration { return time.Since(l.born) }

// paceNow is what the pace depends on now: the demand, the requests that
// wait; the database is down (not suspect nor waking).
func (l *Layer) paceNow() (asked pace.Asked, waiting int, isDown bool) {
	asked, waiting = l.asked()
	return asked, waiting, l.snap.Load().phase == down
}

// sleep waits for the next check: p's pace, with jitter (internal/pace;
// see the package doc). A request that starts waiting asks the pace again
// (l.kick): the sleep ends sooner when it is now shorter (a prober paced
// for nobody), with the jitter drawn for the sleep. It reports false when
// ctx ended.
func (l *Layer) sleep(ctx context.Context, p *pace.Pacer) bool {
	began := time.Now()
	u := rand.Float64()
	asked, waiting, isDown := l.paceNow()
	d := p.Jittered(p.Next(l.clock(), asked, waiting, isDown), u)
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return true
		case <-ctx.Done():
			return false
		case <-l.kick:
			asked, waiting, isDown := l.paceNow()
			if nd := p.Jittered(p.Again(l.clock(), asked, waiting, isDown), u); nd < d {
				d = nd
				t.Reset(time.Until(began.Add(d)))
			}
		}
	}
}

// check makes one check: it resolves the host, connects, and, while a
// connect hangs, resolves the host again every pace and starts over at
// once when it leads elsewhere. It joins the goroutine each connect runs
// on.
func (l *Layer) check(ctx context.Context, every time.Duration) result {
	resolved := l.resolve(ctx)
	var left []string // addresses the host left while a connect to them hung
	for {
		pctx, cancel := context.WithTimeout(ctx, l.probeTimeout())
		done := make(chan result, 1)
		go func(resolved []string) { done <- l.connect(pctx, resolved) }(resolved)
		r, moved := l.watchCheck(ctx, done, every, resolved)
		cancel()
		if moved == nil {
			r.dialed = append(r.dialed, left...)
			return r
		}
		<-done // the connect to the old address ends at once (canceled)
		for _, a := range resolved {
			if !slices.Contains(moved, a) {
				left = append(left, a)
			}
		}
		resolved = moved
	}
}

// probeTimeout bounds a check: ProbeTimeout; while the database wakes,
// what is left of WakeFor (the one dial may wait for the resume).
func (l *Layer) probeTimeout() time.Duration {
	if s := l.snap.Load(); s.phase == waking {
		return max(time.Until(s.since.Add(l.cfg.WakeFor)), l.cfg.ProbeTimeout)
	}
	return l.cfg.ProbeTimeout
}

// watchCheck waits for a connect's result, resolving the host again every
// pace: it returns the new answer (moved) when the host leads elsewhere
// (the connect then goes on, canceled by the caller).
func (l *Layer) watchCheck(ctx context.Context, done <-chan result, every time.Duration, resolved []string) (result, []string) {
	if resolved == nil {
		select {
		case r := <-done:
			return r, nil
		case <-ctx.Done():
			return <-done, nil
		}
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case r := <-done:
			return r, nil
		case <-ctx.Done():
			return <-done, nil
		case <-t.C:
			if now := l.resolve(ctx); len(now) > 0 && !sameSet(now, resolved) {
				return result{}, now
			}
		}
	}
}

// resolve resolves the pool's host afresh; nil for a Unix socket or when
// the lookup fails (the connect then resolves it itself).
func (l *Layer) resolve(ctx context.Context) []string {
	if l.cfg.Host == "" || l.cfg.Host[0] == '/' || l.cfg.Lookup == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	addrs, err := l.cfg.Lookup(ctx, l.cfg.Host)
	if err != nil {
		return nil
	}
	return addrs
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// connect makes one check's connect, the host resolved to resolved
// (nil: resolved as the connect goes), and reads the server's role for a
// pool meant for writes. It closes the connection.
func (l *Layer) connect(ctx context.Context, resolved []string) result {
	lookup := func(ctx context.Context, host string) ([]string, error) {
		if host == l.cfg.Host && resolved != nil {
			return resolved, nil
		}
		return l.cfg.Lookup(ctx, host)
	}
	pc, dialed, err := l.cfg.Probe(ctx, lookup)
	r := result{resolved: resolved, dialed: dialed, err: err}
	if err != nil {
		return r
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), closeProbes)
		_ = pc.Close(cctx)
		cancel()
	}()
	r.addr = pc.Conn().RemoteAddr().String()
	if l.roleNow() == RoleWriter {
		ro, why, err := readOnly(ctx, pc, true)
		switch {
		case err != nil:
			r.err = err
		case ro:
			r.err = &NotWritableError{Host: l.cfg.Host, Addr: r.addr, Why: why}
		}
	}
	return r
}

// settle acts on a check: it reports true when the prober is done (the
// database is up, or back). A check that the server answered without
// letting it in (too many connections, an authentication failure) counts
// as up: the database accepts connections, and the pool's own connects
// surface the error. One that could not get its token or certificate
// with a retryable error (CredentialsError: the token source is down)
// finds it down, as no connection can be made; a fatal failure ends a
// suspicion, and changes nothing while down.
func (l *Layer) settle(r result) bool {
	var isDown bool
	var v classify.Verdict
	if r.err != nil {
		isDown, v = l.downKind(r.err)
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return true
	}
	for _, a := range r.dialed {
		if r.err != nil || a != r.addr {
			l.noteFailedLocked(a)
		}
	}
	s := l.snap.Load()
	switch {
	case isDown && s.phase == waking && time.Since(s.since) < l.cfg.WakeFor:
		cause := shortCause(r.err)
		l.cause.Store(&cause)
		l.mu.Unlock()
		return false // still waking (a 57P03, a refusal): check again
	case isDown && (s.phase == suspect || s.phase == waking):
		cause := shortCause(r.err)
		l.cause.Store(&cause)
		l.publish(func(n *snapshot) { n.phase = down })
		failed := slices.Clone(l.failed)
		l.mu.Unlock()
		l.cfg.Report.Down(cause, v, lastOf(r.dialed))
		l.retire(failed, "")
		return false
	case isDown:
		cause := shortCause(r.err)
		l.cause.Store(&cause)
		l.mu.Unlock()
		return false
	case r.err != nil && s.phase == down && !answered(r.err):
		l.mu.Unlock()
		return false // no verdict: check again
	}
	// Up, or back.
	moved := l.leftLocked(r)
	l.failed, l.probing = nil, false
	wasDown := s.phase == down
	now := time.Now()
	l.publish(func(n *snapshot) {
		n.phase = up
		if wasDown {
			n.backAt = now
		}
		if len(moved) > 0 {
			n.moves = map[string]string{}
			for _, a := range moved {
				n.moves[a] = r.addr
			}
			n.movesTo = now.Add(movesFor)
		}
	})
	l.mu.Unlock()
	if l.suspicion.Swap(nil) != nil {
		l.rearm() // the verdict: the suspicion is over
	}
	l.retire(moved, r.addr)
	switch {
	case wasDown:
		l.cfg.Report.Back(now.Sub(s.since), r.addr, moved)
	case s.phase == waking && now.Sub(s.since) >= wokeAfter:
		// The instance was most likely paused: the requests held
		// meanwhile waited this long, which the person on call wants to
		// read next to them. A quicker wake (a pool gone idle, the
		// instance awake) says nothing.
		l.cfg.Report.Woke(now.Sub(s.since), r.addr)
	}
	return true
}

// wokeAfter is how long a wake (Config.WakeFor) must have taken for it to
// be reported (Reporter.Woke): longer than a connect to an instance that
// is up, shorter than any resume of a paused one.
const wokeAfter = time.Second

// shortCause is err as the cause of a wait's error: one line, the last
// dial's failure of pgx's error (pgx joins one line per dial, after its
// "failed to connect to" prefix, which the wait's error says its own way);
// errors.Is and errors.As reach err whole.
func shortCause(err error) error {
	var pce *pgconn.ConnectError
	if !errors.As(err, &pce) {
		return err
	}
	leaf := pce.Unwrap()
	for leaf != nil {
		j, ok := leaf.(interface{ Unwrap() []error })
		if !ok || len(j.Unwrap()) == 0 {
			break
		}
		leaf = j.Unwrap()[len(j.Unwrap())-1]
	}
	if leaf == nil {
		return err
	}
	return &cause{err: err, text: strings.ReplaceAll(leaf.Error(), "\n", "; ")}
}

// cause is a failed check, with a shorter text.
type cause struct {
	err  error
	text string
}

func (c *cause) Error() string { return c.text }
func (c *cause) Unwrap() error { return c.err }

// lastOf is the last of addrs, "" for none.
func lastOf(addrs []string) string {
	if len(addrs) == 0 {
		return ""
	}
	return addrs[len(addrs)-1]
}

// answered reports whether err is a server's answer (it accepts
// connections, and said no for another reason).
func answered(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe)
}

// leftLocked returns the failed addresses that the database left: the
// host no longer resolves to them, and a server answered elsewhere.
// l.mu is held.
func (l *Layer) leftLocked(r result) []string {
	if r.err != nil {
		return nil
	}
	return left(l.failed, r.addr, r.resolved)
}

// left returns the addresses of failed (host:port, as dialed) that the
// name no longer resolves to (resolved: what the pool's lookup returns,
// hosts or host:port), when the server that answered (addr, its socket's
// remote address) is at an address the name resolves to. A dial function
// that does not dial the address it is given (the Cloud SQL and AlloyDB
// connectors, a tunnel) connects elsewhere than any resolved address:
// nothing is said to have moved then, since the addresses tell nothing of
// where the database is.
func left(failed []string, addr string, resolved []string) []string {
	if addr == "" || resolved == nil || !resolvesTo(resolved, addr) {
		return nil
	}
	var out []string
	for _, a := range failed {
		if !resolvesTo(resolved, a) { // addr is resolved: never left
			out = append(out, a)
		}
	}
	return out
}

// resolvesTo reports whether the dialed address a (host:port) is one of
// resolved: the same host:port, or the same host for a lookup that
// returns hosts only (pgconn dials them at the configured port).
func resolvesTo(resolved []string, a string) bool {
	host := a
	if h, _, err := net.SplitHostPort(a); err == nil {
		host = h
	}
	for _, r := range resolved {
		if r == a || r == host {
			return true
		}
	}
	return false
}

// retire leaves addrs behind (for to, "" when unknown): the pool's
// connections to them made before now are destroyed when next acquired
// (the eviction: compose.Gone), the idle ones are closed now, and those
// being made are cut (their connects go on, held or to the address that
// answers). When the database answers at to, an address its name moved
// away from, those in use are cut too, at once (compose.Cut, as a
// failover's cut): what they have in flight cannot be answered by a
// server that left (a silent one: a Multi-AZ failover's old primary), and
// fails now with a *LeftError — a transaction to run again, a COMMIT whose
// outcome is unknown — rather than at its deadline.
func (l *Layer) retire(addrs []string, to string) {
	if len(addrs) == 0 {
		return
	}
	for _, a := range addrs {
		if to != "" {
			l.comp.Cut(a, leftWrap(a, to))
		} else {
			l.comp.Gone(a)
		}
	}
	l.mu.Lock()
	var cut []compose.Conn
	var at []string
	for c, d := range l.dialing {
		if slices.Contains(addrs, d.addr) {
			cut = append(cut, c)
			at = append(at, d.addr)
		}
	}
	l.mu.Unlock()
	for i, c := range cut {
		c.Abort(leftWrap(at[i], to))
	}
	if pool := l.comp.Pool(); pool != nil {
		compose.CloseIdle(pool, func(a string) bool { return slices.Contains(addrs, a) })
	}
}
