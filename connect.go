package holdfast

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"reflect"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/internal/obs"
	"github.com/holdfast-db/holdfast/retry"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// This file builds connections: everything one connection of a pool goes
// through, from its password to the end of its handshake, whatever path of
// the pool asked for it (pool.Query, QueryRow, Exec, Begin, SendBatch,
// CopyFrom, Ping, Acquire, sqlc code, database/sql through sqldb). The
// pool's layers (failover routing, eviction; hooks.go composes them) learn
// what happens to its connections through the connObserver interface
// below, and never reach into this file's state.
//
// How a connect is retried without wrapping the pool. pgxpool gives
// BeforeConnect a per-connection copy of the config, and pgconn's
// ConnectConfig (pgx v5.13, pinned by TestConnectOrder) works the
// config's Fallbacks like this:
//
//  1. it resolves every entry first — cc.Host, then each Fallbacks entry,
//     in order — with one LookupFunc call per entry that is not a Unix
//     socket directory, and builds one dial per address;
//  2. it then dials those in order through the config's DialFunc, one at a
//     time, each followed by its handshake; the first handshake that
//     completes ends the connect;
//  3. after a failure it goes on to the next dial, unless the failure was
//     28P01, 3D000 or 42501 (it stops), and its error joins the failure of
//     every dial, one line each: "address (host): cause".
//
// So the connector appends retry rounds to the connection's Fallbacks
// (copies of the entries there were) and gives it a DialFunc that knows,
// by counting its calls, which entry of which round it is dialing. At the
// start of each retry round it looks at why the previous round failed and
// either backs off and dials again (a transient failure of the handshake:
// 53300, 57P03, 57P01, a reset mid-handshake) or refuses without dialing
// (a fatal one). A last entry, on the connection's own host and never
// dialed, reports the retries' end when the last round's handshake
// failed, so that Factory.Acquire does not retry the connection again.
// Each attempt's own failure is one line of the error; the number of
// attempts is said once, in the line of the retry loop that gave up; the
// entries after it say only that they were not dialed.
//
// Nothing is resent: no statement has been sent on a connection that is
// still being built.

// connector builds the connections of one factory's pools: one per
// Factory, shared by its pools, immutable after New but for the budget.
type connector struct {
	classifier *classify.Classifier
	password   func(ctx context.Context, host string) (string, error)
	creds      *credCache // WithCredentialsFunc: password is creds.password
	budget     *retry.Budget
	logger     *slog.Logger
	tel        *obs.Telemetry

	dial      retry.Retrier // one dial, layer "connect"
	fetch     retry.Retrier // one password fetch, layer "password"
	maxDials  int           // the policy's MaxAttempts: one allowance per connection
	perTry    time.Duration // the policy's AttemptTimeout, for first attempts
	authRetry bool          // Integration.RetryAuthFailure
	dialBy    string        // the integration (or option) that set the factory's dial
	hinted    atomic.Bool   // hintIntegration warned
}

// connObserver is what a pool's layers learn from the connector about the
// pool's connections, and where they may steer a dial. Every method is
// called on the goroutine building the connection (closed: on pgx's, when
// the socket closes) and must not block beyond the connect's own bounds.
type connObserver interface {
	// route returns where a dial of the pool's host goes, addr by default;
	// it may hold the dial (failover: while no writer is known).
	route(ctx context.Context, c *connState, host, addr string) (string, error)
	// dialed: c's current dial reached addr, its handshake follows.
	dialed(c *connState, addr string, start time.Time)
	// validate runs when c's handshake completed (ValidateConnect): an
	// error refuses the connection, and the next round retries it.
	validate(c *connState, host string, pc *pgconn.PgConn) error
	// pgError is OnPgError: false closes the connection.
	pgError(pc *pgconn.PgConn, pe *pgconn.PgError) bool
	// failed: a dial to addr was refused (established false), or an
	// established connection to addr met a network error.
	failed(addr string, established bool)
	// closed: c's socket was closed.
	closed(c *connState)
}

// observers are a pool's connObservers, called in order.
type observers []connObserver

func (os observers) route(ctx context.Context, c *connState, host, addr string) (string, error) {
	for _, o := range os {
		var err error
		if addr, err = o.route(ctx, c, host, addr); err != nil {
			return "", err
		}
	}
	return addr, nil
}

func (os observers) dialed(c *connState, addr string, start time.Time) {
	for _, o := range os {
		o.dialed(c, addr, start)
	}
}

func (os observers) validate(c *connState, host string, pc *pgconn.PgConn) error {
	for _, o := range os {
		if err := o.validate(c, host, pc); err != nil {
			return err
		}
	}
	return nil
}

func (os observers) pgError(pc *pgconn.PgConn, pe *pgconn.PgError) bool {
	keep := true
	for _, o := range os {
		keep = o.pgError(pc, pe) && keep
	}
	return keep
}

func (os observers) failed(addr string, established bool) {
	for _, o := range os {
		o.failed(addr, established)
	}
}

func (os observers) closed(c *connState) {
	for _, o := range os {
		o.closed(c)
	}
}

// noObserver is a connObserver that observes nothing: embed it and
// override what a layer needs.
type noObserver struct{}

func (noObserver) route(_ context.Context, _ *connState, _, addr string) (string, error) {
	return addr, nil
}
func (noObserver) dialed(*connState, string, time.Time)              {}
func (noObserver) validate(*connState, string, *pgconn.PgConn) error { return nil }
func (noObserver) pgError(*pgconn.PgConn, *pgconn.PgError) bool      { return true }
func (noObserver) failed(string, bool)                               {}
func (noObserver) closed(*connState)                                 {}

// connState is one connection of a pool, from its first dial to its close:
// the attempts it took, its retry rounds, then the established connection
// (its server, whether a failover cut it). pgconn keeps it in the
// connection's CustomData under madeKey.
type connState struct {
	cn     *connector
	b      *binding // the pool's layers
	base   pgconn.DialFunc
	cc     *pgx.ConnConfig
	target *obs.Target // log lines name the pool's database

	rounds     int      // retry rounds, the first included (the policy's MaxAttempts)
	authHosts  []string // the names the password is issued for, in order, when blue/green routing named them
	entries    []string // the hosts of one round: cc.Host, then the original fallbacks
	sockets    []bool   // entries that are Unix sockets (pgconn does not look them up)
	lookup     pgconn.LookupFunc
	results    [][]string // lookup results of the first round, by entry
	lookupErrs []error    // and their failures
	calls      int        // lookup calls so far
	perRnd     int        // dials in one round, known once the first round is looked up

	connected atomic.Bool // the handshake completed: later dials are cancel requests

	// Set when the handshake completes.
	pc     atomic.Pointer[pgconn.PgConn]
	addr   string    // the server's address, as the socket reports it
	madeAt time.Time // when the connection was made

	clamp      atomic.Int64                // unix nanos: deadlines are clamped to it while the connection closes (0: not closing)
	inflight   atomic.Int32                // what the connection has in flight (outcome.go, stmtTracer)
	committing atomic.Bool                 // a transaction runner's COMMIT comes next
	aborted    atomic.Pointer[abortion]    // set when a layer cut the connection (abort)
	dialed     atomic.Pointer[string]      // the server of the current dial, from the dial on: a cut reaches a handshake too
	sock       atomic.Pointer[watchedConn] // the current dial's connection

	mu          sync.Mutex // guards the fields below (a slow write may read on pgconn's background reader)
	dials       int        // dials of this connection so far
	used        int        // failed attempts so far
	last        error      // why the last dialed attempt failed after its dial, if known
	stop        error      // once set, later dials of the retry rounds return it
	told        bool       // stop was returned once in full; later entries say they were not dialed
	authRetried bool

	firstFailure time.Time // of a handshake, for MaxElapsed across rounds
	deadlined    bool      // watch set a deadline on the socket
	timeouts     int       // attempts that timed out: each later one may take longer (attemptBound)

	// The telemetry of the connection's retries, from its first retried
	// failure to its end: recovered when its handshake completes, given
	// up when its retries end (endRetries).
	tctx context.Context
	tl   *obs.Loop

	ctx      context.Context // BeforeConnect's, naming the target: for the ERROR line of a failed connect
	reported bool            // that line was written (or the failure was retryable)

	admitted  atomic.Bool // holds a slot of the pool's admission limit (admit.go)
	admitStop func() bool // unregisters the slot's backstop; on the connect's goroutine
	refused   bool        // the connect was not admitted: no entry is dialed
}

// retry runs one retry loop of the connection (a redial, a retry round)
// under r, its attempts counted from prior, the connection's attempts
// before it: the log lines, span events and the returned *retry.Error
// count the connection's attempts, not the loop's. A loop whose dial
// succeeds is not a recovery yet: endRetries says how the connection
// ended. c.mu is held.
func (c *connState) retry(ctx context.Context, r *retry.Retrier, prior int, firstErr error, op func(context.Context) error) error {
	ctx = obs.WithTarget(ctx, c.target) // every line names the pool's database
	if c.tl == nil {
		c.tctx, c.tl = c.cn.tel.Begin(ctx, LayerConnect)
	}
	rr := *r
	onRetry := rr.OnRetry
	rr.OnRetry = func(ctx context.Context, e retry.Event) {
		e.Attempt += prior
		c.tl.Observe(e)
		if onRetry != nil {
			onRetry(ctx, e)
		}
	}
	err := rr.Continue(ctx, firstErr, op)
	var re *retry.Error
	if errors.As(err, &re) {
		re.Attempts += prior
	}
	return err
}

// endRetries records how a connection ended: err nil when its handshake
// completed (one "recovered" line if it was retried), else the error that
// ended it: one "giving up" line after transient failures, one "cannot
// connect" ERROR line for a failure no retry fixes, retried or not. Once.
func (c *connState) endRetries(err error) {
	c.endAdmission() // the connect is over: its admission slot is free
	if err != nil && !c.reported {
		c.reported = true
		attempts := c.used + 1 // a handshake's failure, not yet counted
		var re *retry.Error
		if errors.As(err, &re) {
			attempts = re.Attempts
		}
		ctx := c.ctx
		if ctx == nil {
			ctx = obs.WithTarget(context.Background(), c.target)
		}
		c.cn.tel.ConnectFailed(ctx, LayerConnect, c.cn.classifier.Classify(err), attempts, c.authRetried, err)
	}
	if c.tl == nil {
		return
	}
	tl := c.tl
	c.tl = nil
	tl.End(c.tctx, err)
}

// madeKey keeps, in pgconn's CustomData, the connState of a connection
// that the connector made.
const madeKey = "holdfast/made"

// stateOf returns the connState of c, or nil for a connection the
// connector did not make.
func stateOf(c *pgx.Conn) *connState {
	s, _ := c.PgConn().CustomData()[madeKey].(*connState)
	return s
}

// newConnectError is the *ConnectError of layer (LayerConnect or
// LayerPassword), its deprecated Stage kept equal to Layer.
func newConnectError(layer string, err error) *ConnectError {
	return &ConnectError{Layer: layer, Stage: layer, Err: err}
}

// prepare makes cc, the per-connection copy of the pool's config that
// BeforeConnect received, build its connection through c: retry rounds
// in its Fallbacks, the connection's DialFunc, LookupFunc, OnPgError,
// ValidateConnect and AfterConnect, each chained to what the pool config
// had.
func (c *connState) prepare() {
	cc := c.cc
	c.entries = append(c.entries, cc.Host)
	for _, fb := range cc.Fallbacks {
		c.entries = append(c.entries, fb.Host)
	}
	for _, h := range c.entries {
		c.sockets = append(c.sockets, isSocket(h))
	}
	c.results = make([][]string, len(c.entries))
	c.lookupErrs = make([]error, len(c.entries))
	c.lookup = cc.LookupFunc
	if c.lookup == nil {
		c.lookup = net.DefaultResolver.LookupHost
	}
	if c.rounds > 1 {
		round := make([]*pgconn.FallbackConfig, 0, len(c.entries))
		round = append(round, &pgconn.FallbackConfig{Host: cc.Host, Port: cc.Port, TLSConfig: cc.TLSConfig})
		round = append(round, cc.Fallbacks...)
		fbs := make([]*pgconn.FallbackConfig, 0, len(round)*c.rounds)
		fbs = append(fbs, cc.Fallbacks...)
		for range c.rounds - 1 {
			fbs = append(fbs, round...)
		}
		// The summary entry: the connection's own host, never dialed.
		fbs = append(fbs, &pgconn.FallbackConfig{Host: cc.Host, Port: cc.Port, TLSConfig: cc.TLSConfig})
		cc.Fallbacks = fbs
		cc.LookupFunc = c.lookupEntry
	}
	if c.rounds > 1 && c.cn.password != nil {
		// pgx connects with a copy of cc, which pgconn authenticates
		// with: a token that a retry round fetched (after 28000) reaches
		// the copy here, before the startup message.
		afterNet := cc.AfterNetConnect
		cc.AfterNetConnect = func(ctx context.Context, config *pgconn.Config, conn net.Conn) (net.Conn, error) {
			c.mu.Lock()
			config.User, config.Password = c.cc.User, c.cc.Password
			c.mu.Unlock()
			if afterNet != nil {
				return afterNet(ctx, config, conn)
			}
			return conn, nil
		}
	}
	obsv := c.b.observers
	onPgError := cc.OnPgError
	cc.OnPgError = func(pc *pgconn.PgConn, pe *pgconn.PgError) bool {
		if c.cn.creds != nil && !c.connected.Load() && (pe.Code == "28P01" || pe.Code == "28000") {
			c.mu.Lock()
			user, pw := c.cc.User, c.cc.Password
			c.mu.Unlock()
			c.cn.creds.refuse(user, pw) // the next fetch is a fresh one
		}
		if c.rounds > 1 && !c.connected.Load() {
			c.note(pe)
			if pgconnStops(pe) {
				// pgconn tries no more entries after it: the
				// connection ends here.
				c.mu.Lock()
				c.endRetries(pe)
				c.mu.Unlock()
			}
		}
		keep := obsv.pgError(pc, pe)
		if onPgError != nil {
			keep = onPgError(pc, pe) && keep
		}
		return keep
	}
	validate, host := cc.ValidateConnect, cc.Host
	cc.ValidateConnect = func(ctx context.Context, pc *pgconn.PgConn) error {
		if err := c.abortErr(nil); err != nil {
			// Cut while its handshake ran: the server was left behind;
			// the next round's dial retries it.
			c.note(err)
			return err
		}
		if err := obsv.validate(c, host, pc); err != nil {
			c.note(err) // retried by the next round's dial
			return err
		}
		if validate != nil {
			return validate(ctx, pc)
		}
		return nil
	}
	after := cc.AfterConnect
	cc.AfterConnect = func(ctx context.Context, pc *pgconn.PgConn) error {
		if c.deadlined {
			_ = pc.Conn().SetDeadline(time.Time{}) // the attempt's bound ends with it
		}
		c.addr, c.madeAt = pc.Conn().RemoteAddr().String(), time.Now()
		c.pc.Store(pc)
		c.connected.Store(true)
		pc.CustomData()[madeKey] = c // eviction reads addr and madeAt; Factory.Start checks that the connector ran
		c.cn.budget.Success()        // a connection that completed its handshake
		c.mu.Lock()
		c.endRetries(nil) // recovered, if it was retried
		c.mu.Unlock()
		if after != nil {
			return after(ctx, pc)
		}
		return nil
	}
	cc.DialFunc = c.dial
}

// pgconnStops reports whether pgconn ends a connect at pe, without trying
// the entries left (step 3 of this file's comment).
func pgconnStops(pe *pgconn.PgError) bool {
	return pe.Code == "28P01" || pe.Code == "3D000" || pe.Code == "42501"
}

// isSocket reports whether host is a Unix socket directory, which pgconn
// dials without a lookup.
func isSocket(host string) bool { return len(host) > 0 && host[0] == '/' }

// lookupEntry is the connection's LookupFunc: entries of the first round
// are resolved by the pool's own LookupFunc; the entries of retry rounds
// reuse those answers, so that a round costs no extra DNS query at
// connect time (a retry resolves its host again when it dials: retryDial).
func (c *connState) lookupEntry(ctx context.Context, host string) ([]string, error) {
	c.mu.Lock()
	i := c.nextLookupEntry()
	c.mu.Unlock()
	n := len(c.entries)
	switch {
	case i < 0 || i >= n*c.rounds:
		// The summary entry: one address of the host, never dialed;
		// nothing at all when no entry resolved (then nothing is
		// dialed either).
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.perRound() == 0 {
			return nil, c.firstLookupErr()
		}
		for _, addrs := range c.results {
			if len(addrs) > 0 {
				return addrs[:1], nil
			}
		}
		return nil, c.firstLookupErr()
	case i < n:
		addrs, err := c.lookupRetried(ctx, host)
		c.mu.Lock()
		c.results[i], c.lookupErrs[i] = addrs, err
		c.mu.Unlock()
		return addrs, err
	default:
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.results[i%n], c.lookupErrs[i%n]
	}
}

// lookupRetried resolves host, retrying a transient DNS failure (a
// timeout, a SERVFAIL) under the dial policy: a lookup is part of the
// connect, and pgx makes no dial when it fails.
func (c *connState) lookupRetried(ctx context.Context, host string) ([]string, error) {
	addrs, err := c.lookup(ctx, host)
	if err == nil {
		return addrs, nil
	}
	ctx = obs.WithTarget(ctx, c.target) // a failure path
	r := c.cn.dial
	err = c.cn.retryFrom(ctx, &r, LayerConnect, 0, err, func(ctx context.Context) error {
		var lerr error
		addrs, lerr = c.lookup(ctx, host)
		return lerr
	})
	if err != nil {
		return nil, c.cn.redact(newConnectError(LayerConnect, err))
	}
	return addrs, nil
}

// firstLookupErr is the first lookup failure of the first round. c.mu is
// held.
func (c *connState) firstLookupErr() error {
	for _, err := range c.lookupErrs {
		if err != nil {
			return err
		}
	}
	return &net.DNSError{Err: "no address", Name: c.entries[0], IsNotFound: true}
}

// nextLookupEntry maps the next LookupFunc call to its entry index (pgconn
// skips sockets). c.mu is held.
func (c *connState) nextLookupEntry() int {
	k := c.calls
	c.calls++
	n := len(c.entries)
	seen := 0
	for i := 0; i < n*c.rounds; i++ {
		if c.sockets[i%n] {
			continue
		}
		if seen == k {
			return i
		}
		seen++
	}
	return -1
}

// perRound returns the dials of one round. c.mu is held; every lookup of
// every entry is done before the first dial.
func (c *connState) perRound() int {
	if c.perRnd == 0 {
		for i, addrs := range c.results {
			if c.sockets[i] {
				c.perRnd++
			} else {
				c.perRnd += len(addrs)
			}
		}
	}
	return c.perRnd
}

// note records why the current attempt failed after its dial.
func (c *connState) note(err error) {
	c.mu.Lock()
	c.last = err
	c.mu.Unlock()
}

// dial is the connection's DialFunc; its errors carry no secret holdfast
// knows (they become part of pgx's error text).
func (c *connState) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := c.dialEntry(ctx, network, addr)
	if err != nil {
		return nil, c.cn.redact(err)
	}
	return conn, nil
}

// dialEntry dials the Fallbacks entry whose turn it is: a cancel request
// once the connection is established; else the first dial of an entry, a
// retry round after a failed one, or the end of the rounds.
func (c *connState) dialEntry(ctx context.Context, network, addr string) (net.Conn, error) {
	if c.connected.Load() {
		return c.dialCancel(ctx, network, addr)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.dials
	c.dials++
	if err := c.admitDial(ctx, d); err != nil { // the pool's admission limit (admit.go)
		return nil, err
	}
	if c.rounds > 1 {
		per := c.perRound()
		switch {
		case per == 0 || d >= per*c.rounds+1:
			// Past our entries: pgconn's own last resort (a host that
			// target_session_attrs did not prefer).
		case d == per*c.rounds:
			// The summary entry: the retry rounds are over.
			if c.stop == nil {
				c.used++ // the last round's failed handshake
				c.stop = c.exhausted()
			}
			return nil, c.stopped()
		case c.stop != nil:
			return nil, c.stopped()
		case d > 0 && d%per == 0:
			// A retry round starts: the previous round failed.
			return c.retryRound(ctx, network, addr)
		}
	}
	return c.dialAttempt(ctx, network, addr)
}

// stopped returns what a dial after the end of the retries returns: the
// error that ended them, the first time, and then an error that says the
// entry was not dialed (each is a line of pgx's error: the cause and the
// count of attempts are said once). c.mu is held.
func (c *connState) stopped() error {
	if !c.told {
		c.told = true
		c.endRetries(c.stop)
		return c.stop
	}
	return &notDialedError{end: c.stop}
}

// notDialedError is what a Fallbacks entry after the end of a connection's
// retries returns. It wraps the error that ended them.
type notDialedError struct{ end error }

func (e *notDialedError) Error() string {
	return "not dialed: the connection's attempts ended (see above)"
}

func (e *notDialedError) Unwrap() error { return e.end }

// dialAttempt dials an entry, retrying dial failures under the
// connection's allowance. c.mu is held.
func (c *connState) dialAttempt(ctx context.Context, network, addr string) (net.Conn, error) {
	if c.used >= c.cn.maxDials && c.used > 0 {
		if c.stop == nil {
			c.stop = c.exhausted()
		}
		return nil, c.stopped()
	}
	base := c.routedDial()
	start := time.Now()
	conn, err := c.cn.boundedDial(ctx, c.attemptBound(), base, network, addr)
	if err != nil {
		c.b.observers.failed(addr, false) // a refused connect may be a failover
		if timedOut(err) {
			c.timeouts++
		}
		var n int
		conn, n, err = c.redial(ctx, network, addr, err)
		if err != nil {
			c.used += n
			c.stop = err
			return nil, c.stopped()
		}
		c.used += n - 1
	}
	return c.watch(conn, start), nil
}

// redial carries on after the failed first dial of an entry, under the
// dial policy limited to the connection's remaining attempts, each within
// attemptBound. It returns the connection or a *ConnectError, and how many
// attempts were made (the failed one included). c.mu is held.
func (c *connState) redial(ctx context.Context, network, addr string, firstErr error) (net.Conn, int, error) {
	r := c.cn.dial
	r.Policy.MaxAttempts = c.cn.maxDials - c.used
	r.Policy.AttemptTimeout = 0 // each dial is bounded by attemptBound
	dial := c.retryDial()
	var conn net.Conn
	attempts := 1
	err := c.retry(ctx, &r, c.used, firstErr, func(ctx context.Context) error {
		attempts++
		nc, err := c.boundedRetry(ctx, dial, network, addr)
		conn = nc
		return err
	})
	if err != nil {
		return nil, attempts, newConnectError(LayerConnect, err)
	}
	return conn, attempts, nil
}

// routedDial returns the dial of each try: the pool's, through its
// layers' routing (failover: held while the writer is down, to the new
// writer while DNS lags), so that a retry follows a failover that happens
// while the connection is retried.
func (c *connState) routedDial() pgconn.DialFunc {
	if len(c.b.observers) == 0 {
		return c.base
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		addr, err := c.b.observers.route(ctx, c, c.cc.Host, addr)
		if err != nil {
			return nil, err
		}
		return c.base(ctx, network, addr)
	}
}

// retryDial returns the dial of a retry: routedDial, after resolving the
// connection's host again when it has a single one. pgconn resolves the
// host once per connect, and a retry that kept dialing that answer would
// follow a server that DNS has since moved away from (a writer that
// failed over and came back as a reader) for as long as the retries last.
func (c *connState) retryDial() pgconn.DialFunc {
	routed := c.routedDial()
	if len(c.entries) != 1 || c.sockets[0] {
		return routed // several hosts: pgx chooses among them
	}
	host := c.entries[0]
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		addr = c.reresolve(ctx, host, addr)
		if rr := c.b.comp.RetryRoute; rr != nil {
			// The blue/green layer routed the connection once, in
			// BeforeConnect: a retry asks it again (held through
			// IN_PROGRESS).
			var err error
			if addr, err = rr(ctx, host, addr); err != nil {
				return nil, err
			}
		}
		return routed(ctx, network, addr)
	}
}

// reresolve returns addr when host still resolves to it (or cannot be
// resolved now), else host's first address now, with addr's port unless
// the answer carries one.
func (c *connState) reresolve(ctx context.Context, host, addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	addrs, err := c.lookup(ctx, host)
	if err != nil || len(addrs) == 0 {
		return addr
	}
	first := ""
	for _, ip := range addrs {
		cand := ip
		if _, _, err := net.SplitHostPort(ip); err != nil {
			cand = net.JoinHostPort(ip, port)
		}
		if cand == addr {
			return addr
		}
		if first == "" {
			first = cand
		}
	}
	return first
}

// maxBoundGrowth bounds how many times an attempt's timeout doubles.
const maxBoundGrowth = 3

// attemptBound returns how long the next attempt of this connection may
// take (its dial, then its whole handshake): the policy's AttemptTimeout,
// doubled for each of the connection's attempts that timed out, at most
// 2^maxBoundGrowth times, and never past MaxElapsed from the first
// failure. A slow but alive server (a far region, a loaded proxy: TLS and
// SCRAM take four or five round trips) then connects on a later attempt,
// while a hung one stays bounded. 0: no bound. c.mu is held.
func (c *connState) attemptBound() time.Duration {
	d := c.cn.perTry
	if d <= 0 {
		return 0
	}
	for i := 0; i < c.timeouts && i < maxBoundGrowth; i++ {
		d *= 2
	}
	if me := c.cn.dial.Policy.MaxElapsed; me > 0 && !c.firstFailure.IsZero() {
		if left := time.Until(c.firstFailure.Add(me)); left < d {
			d = max(left, time.Millisecond)
		}
	}
	return d
}

// timedOut reports whether err is an attempt that ran out of time: a
// socket or context deadline, a dial timeout.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout())
}

// boundedRetry is one dial of a retry, within attemptBound; a timeout
// makes the next attempt's bound longer. c.mu is held.
func (c *connState) boundedRetry(ctx context.Context, dial pgconn.DialFunc, network, addr string) (net.Conn, error) {
	if d := c.attemptBound(); d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	conn, err := dial(ctx, network, addr)
	if err != nil && timedOut(err) && ctx.Err() != nil {
		c.timeouts++
	}
	return conn, err
}

// watch wraps a dialed connection for its handshake: it records the
// handshake's network errors, tells the layers which server the dial
// reached and, with an AttemptTimeout, bounds the whole attempt (TLS, the
// startup handshake, ValidateConnect) with a deadline on the socket, which
// AfterConnect clears. c.mu is held.
func (c *connState) watch(conn net.Conn, dialStart time.Time) net.Conn {
	c.last = nil
	tuneSocket(conn) // dead-connection detection (netdial.go)
	// A new dial: an abort of the previous one does not carry over.
	c.aborted.Store(nil)
	c.clamp.Store(0)
	addr := conn.RemoteAddr().String()
	c.dialed.Store(&addr)
	if d := c.attemptBound(); d > 0 {
		_ = conn.SetDeadline(time.Now().Add(d))
		c.deadlined = true
	}
	wc := &watchedConn{Conn: conn, c: c}
	c.sock.Store(wc)
	c.b.observers.dialed(c, addr, dialStart) // a cut from now on reaches it
	return wc
}

// retryRound starts a retry round after the previous round failed with
// c.last, or refuses it. c.mu is held.
func (c *connState) retryRound(ctx context.Context, network, addr string) (net.Conn, error) {
	c.used++            // the failed handshake
	prior := c.used - 1 // attempts before this loop's first, which is the failed handshake
	last := c.last
	if last == nil {
		// A failure this layer did not see (TLS verification,
		// ValidateConnect, a protocol error): never retried here. The
		// connection's error carries the real cause.
		c.stop = errRefused
		return nil, c.stopped()
	}
	if timedOut(last) {
		c.timeouts++ // the next attempt may take longer
	}
	r := c.cn.dial
	r.Policy.MaxAttempts = c.cn.maxDials - c.used + 1 // the failed handshake is attempt 1
	r.Policy.AttemptTimeout = 0                       // each dial is bounded by attemptBound
	classifier := r.Classify
	r.Classify = func(err error) classify.Verdict {
		v := classifier(err)
		if !c.freshAuth() {
			return v
		}
		return retryAuthOnce(v, err, &c.authRetried) // a fresh token or a fresh dial
	}
	// MaxElapsed bounds the connection's retries from its first failure,
	// across rounds (each loop would otherwise count from its own start).
	if c.firstFailure.IsZero() {
		c.firstFailure = time.Now()
	}
	if me := c.cn.dial.Policy.MaxElapsed; me > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, c.firstFailure.Add(me))
		defer cancel()
	}
	var conn net.Conn
	var start time.Time
	refreshed := false
	dial := c.retryDial()
	err := c.retry(ctx, &r, prior, last, func(ctx context.Context) error {
		if c.authRetried && c.cn.password != nil && !refreshed {
			cr, err := c.cn.fetchPassword(ctx, c.retryHost())
			if err != nil {
				return err
			}
			c.cc.Password, refreshed = cr.Password, true
			if cr.User != "" {
				c.cc.User = cr.User
			}
		}
		start = time.Now()
		nc, err := c.boundedRetry(ctx, dial, network, addr)
		if err != nil {
			c.used++
		}
		conn = nc
		return err
	})
	if err != nil {
		c.stop = newConnectError(LayerConnect, err)
		return nil, c.stopped()
	}
	return c.watch(conn, start), nil
}

// dialCancel dials for a cancel request on the established connection.
// When pgx sends it because it is closing the connection after a failure
// (a canceled or timed-out query), the cancel request and the drain that
// follows are bounded by closeBound instead of pgx's 15 s, during which
// the pool keeps the connection's slot; and if the server does not answer
// the cancel request in time, the layers hear of it (the pool's other
// connections to it are presumed dead too: evicted when next acquired).
func (c *connState) dialCancel(ctx context.Context, network, addr string) (net.Conn, error) {
	pc := c.pc.Load()
	if pc == nil || !pc.IsClosed() {
		return c.cn.boundedDial(ctx, c.cn.perTry, c.base, network, addr) // a cancel request of the user's
	}
	if err := c.abortErr(nil); err != nil {
		return nil, err // cut: the server was left behind, nothing to cancel there
	}
	end := time.Now().Add(closeBound)
	c.clamp.Store(end.UnixNano())
	if nc := pc.Conn(); nc != nil {
		_ = nc.SetDeadline(end) // the drain after the cancel request
	}
	dctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	conn, err := c.base(dctx, network, addr)
	if err != nil {
		c.b.observers.failed(c.addr, true)
		return nil, err
	}
	_ = conn.SetDeadline(end)
	return &cancelConn{Conn: conn, c: c}, nil
}

// cancelConn is the connection of a cancel request sent while closing: a
// server that does not answer it in time is presumed unreachable.
type cancelConn struct {
	net.Conn
	c *connState
}

func (cc *cancelConn) Read(b []byte) (int, error) {
	n, err := cc.Conn.Read(b)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		cc.c.b.observers.failed(cc.c.addr, true)
	}
	return n, err
}

// exhausted is the error of a connection whose retry rounds all failed.
// c.mu is held.
func (c *connState) exhausted() error {
	last := c.last
	if last == nil {
		last = errRefused
	}
	return newConnectError(LayerConnect, &retry.Error{Attempts: c.used, Last: last,
		Verdict: c.cn.classifier.Classify(last), Stop: retry.StopExhausted})
}

// retryHost is the name the token of the one retry after an
// authentication failure is issued for: the next of authHosts (the other
// name of a blue/green pair), else the same.
func (c *connState) retryHost() string {
	switch len(c.authHosts) {
	case 0:
		return c.cc.Host
	case 1:
		return c.authHosts[0]
	}
	return c.authHosts[1]
}

// freshAuth reports whether an authentication failure may be retried once:
// with a password function (a fresh token) or an integration whose dial
// authenticates (the Cloud SQL connector's IAM login).
func (c *connState) freshAuth() bool { return c.cn.password != nil || c.cn.authRetry }

// errRefused is what the dials of the remaining retry rounds return after
// a failure this layer does not retry. It is not a *retry.Error: nothing
// was retried, so Factory.Acquire still classifies the real cause.
var errRefused = errors.New("holdfast: not retried: the previous attempt failed with an error that is not retried while connecting")

// abortion is how a layer cut a connection: wrap turns the I/O error the
// cut caused into the layer's error (a *failover.CutError).
type abortion struct{ wrap func(cause error) error }

// abort cuts the connection, at any moment from its dial on: its socket's
// deadlines are set in the past, so a blocked read or write returns at
// once and every later one fails before sending anything, with wrap(the
// I/O error) as the cause; a handshake that completes anyway is refused
// (ValidateConnect). It reports whether this call cut it (not an earlier
// one).
func (c *connState) abort(wrap func(cause error) error) bool {
	if !c.aborted.CompareAndSwap(nil, &abortion{wrap: wrap}) {
		return false
	}
	past := time.Unix(1, 0)
	c.clamp.Store(past.UnixNano())
	if wc := c.sock.Load(); wc != nil {
		_ = wc.Conn.SetDeadline(past) // the socket itself: during the handshake too
	}
	return true
}

// abortErr returns the layer's error for cause when the connection was
// cut, else nil.
func (c *connState) abortErr(cause error) error {
	if a := c.aborted.Load(); a != nil {
		return a.wrap(cause)
	}
	return nil
}

// server returns the address of the connection's current dial ("" before
// it).
func (c *connState) server() string {
	if d := c.dialed.Load(); d != nil {
		return *d
	}
	return ""
}

// watchedConn records the first network error of a connection's handshake,
// so that the next retry round knows why it failed. After the handshake it
// tells the layers of network failures.
type watchedConn struct {
	net.Conn
	c *connState
}

func (w *watchedConn) Read(b []byte) (int, error) {
	n, err := w.Conn.Read(b)
	if err != nil {
		err = w.c.ioErr(err)
		w.c.failed(err)
		if k := w.c.inflight.Load(); mayCommit(k) && w.c.connected.Load() && (w.c.clamp.Load() == 0 || w.c.aborted.Load() != nil) {
			// A statement that could commit was sent and its answer is
			// lost (a failed write sends nothing the server runs).
			err = &OutcomeUnknownError{Statement: inflightNames[k], Err: err}
		}
	}
	return n, err
}

func (w *watchedConn) Write(b []byte) (int, error) {
	if c := w.c; c.connected.Load() && c.clamp.Load() == 0 { // not while closing
		// What the connection now has in flight, for a read that fails
		// (outcome.go). pgconn writes from the goroutine that owns the
		// connection, so its TxStatus is read safely here.
		if pc := c.pc.Load(); pc != nil {
			c.inflight.Store(requestKind(b, pc.TxStatus(), c.committing.Load(), c.inflight.Load()))
		}
	}
	n, err := w.Conn.Write(b)
	if err != nil {
		err = w.c.ioErr(err)
		w.c.failed(err)
	}
	return n, err
}

// Close tells the layers, unless a later dial of the same connection
// replaced this one.
func (w *watchedConn) Close() error {
	if w.c.sock.Load() == w {
		w.c.b.observers.closed(w.c)
	}
	return w.Conn.Close()
}

// SetDeadline, SetReadDeadline and SetWriteDeadline keep a closing
// connection's deadlines within closeBound (see dialCancel).
func (w *watchedConn) SetDeadline(t time.Time) error { return w.Conn.SetDeadline(w.c.clamped(t)) }
func (w *watchedConn) SetReadDeadline(t time.Time) error {
	return w.Conn.SetReadDeadline(w.c.clamped(t))
}
func (w *watchedConn) SetWriteDeadline(t time.Time) error {
	return w.Conn.SetWriteDeadline(w.c.clamped(t))
}

// clamped returns t, or the closing bound when the connection is closing
// and t is later (or none).
func (c *connState) clamped(t time.Time) time.Time {
	if n := c.clamp.Load(); n != 0 {
		if end := time.Unix(0, n); t.IsZero() || t.After(end) {
			return end
		}
	}
	return t
}

// ioErr returns the error of an I/O on the connection: the layer's error
// when a layer cut it (the deadline it set in the past ended the I/O),
// else err.
func (c *connState) ioErr(err error) error {
	if timedOut(err) {
		if cut := c.abortErr(err); cut != nil {
			return cut
		}
	}
	return err
}

// failed handles a network error of the connection: during the handshake
// it tells the next retry round why the attempt failed; afterwards, an
// error of the network (a reset, a broken pipe, TCP_USER_TIMEOUT's
// ETIMEDOUT, the server closing) is told to the layers (eviction presumes
// the pool's other connections to that server dead too). A deadline (the
// caller's context) is not one.
func (c *connState) failed(err error) {
	if !c.connected.Load() {
		c.noteNet(err)
		return
	}
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, net.ErrClosed) || c.clamp.Load() != 0 {
		return
	}
	c.b.observers.failed(c.addr, true)
}

// noteNet records a network error of the handshake unless a server error
// was already recorded (the server closes the socket after an
// ErrorResponse).
func (c *connState) noteNet(err error) {
	if errors.Is(err, net.ErrClosed) {
		return // pgconn closed it after a failure it reports itself
	}
	c.mu.Lock()
	if c.last == nil {
		c.last = err
	}
	c.mu.Unlock()
}

// reasonAuthFreshToken is the retry reason of an authentication failure
// retried once with a fresh token or a fresh dial.
const reasonAuthFreshToken = "auth-failed-fresh-token"

// retryAuthOnce turns v, the verdict of err, into a Transient one when err
// is the first authentication failure (28000 or 28P01) that *used has not
// yet let through: one retry with a fresh token or a fresh dial. Every
// other verdict is v.
func retryAuthOnce(v classify.Verdict, err error, used *bool) classify.Verdict {
	if v.Retryable() || *used {
		return v
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "28000" || pe.Code == "28P01") {
		*used = true
		return classify.Verdict{Class: classify.Transient, Reason: reasonAuthFreshToken}
	}
	return v
}

// boundedDial is the fast-path dial of an attempt: a plain call of base,
// bounded by d (the attempt's bound; 0: none): pgxpool gives a connection
// being built no caller cancellation, so without a bound a hung dial would
// hold a pool slot until pgx's ConnectTimeout. A failure is left to the
// caller's retry; it warns when it comes from a dialer that an
// integration of holdfast should have brought (hintIntegration).
func (cn *connector) boundedDial(ctx context.Context, d time.Duration, base pgconn.DialFunc, network, addr string) (net.Conn, error) {
	dctx := ctx
	if d > 0 && !endsWithin(ctx, d) {
		var cancel context.CancelFunc
		dctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	conn, err := base(dctx, network, addr)
	if err != nil {
		cn.hintIntegration(ctx, err)
		return nil, err
	}
	// No budget refund here: a front end (a proxy, a load balancer) may
	// accept the dial of a database that is down. The refund comes when
	// the handshake completes (AfterConnect).
	cn.tel.FirstTry(ctx, LayerConnect) // no allocation unless a span records
	return conn, nil
}

// endsWithin reports whether ctx's deadline is at most d away, so that a
// bound of d would change nothing (and need not be allocated).
func endsWithin(ctx context.Context, d time.Duration) bool {
	dl, ok := ctx.Deadline()
	return ok && time.Until(dl) <= d
}

// plainDial dials for a connection that the connector does not build
// (a blue/green monitor's): the fast path, then the dial policy's retries.
func (cn *connector) plainDial(ctx context.Context, base pgconn.DialFunc, network, addr string) (net.Conn, error) {
	conn, err := cn.boundedDial(ctx, cn.perTry, base, network, addr)
	if err == nil {
		return conn, nil
	}
	r := cn.dial
	r.Policy.MaxAttempts = cn.maxDials
	err = cn.retryFrom(ctx, &r, LayerConnect, 0, err, func(ctx context.Context) error {
		c, err := base(ctx, network, addr)
		conn = c
		return err
	})
	if err != nil {
		return nil, cn.redact(newConnectError(LayerConnect, err))
	}
	return conn, nil
}

// issuePassword sets cc's password to a fresh one from the password
// function, issued for the name the server answers to: the first of the
// routing's names (authHosts, from bluegreen.AuthHosts), else cc's host.
func (cn *connector) issuePassword(ctx context.Context, cc *pgx.ConnConfig, authHosts []string) error {
	host := cc.Host
	if len(authHosts) > 0 {
		host = authHosts[0]
	}
	cr, err := cn.fetchPassword(ctx, host)
	if err != nil {
		return err
	}
	cc.Password = cr.Password
	if cr.User != "" {
		cc.User = cr.User // WithCredentialsFunc
	}
	return nil
}

// fetchPassword fetches the password or token of a connection to host,
// under the retry policy, each call bounded by the policy's
// AttemptTimeout. The user is set only by a credentials function.
func (cn *connector) fetchPassword(ctx context.Context, host string) (Credentials, error) {
	pw, err := cn.boundedPassword(ctx, host)
	if err == nil {
		// No budget refund: a token fetched while the database is down
		// says nothing of the database. The refund comes when the
		// connection's handshake completes.
		cn.tel.FirstTry(ctx, LayerPassword)
		return pw, nil
	}
	err = cn.retryFrom(ctx, &cn.fetch, LayerPassword, 0, err, func(ctx context.Context) error {
		p, err := cn.callPassword(ctx, host)
		pw = p
		return err
	})
	if err != nil {
		return Credentials{}, newConnectError(LayerPassword, err)
	}
	return pw, nil
}

// boundedPassword is the fast-path first fetch, bounded like boundedDial.
func (cn *connector) boundedPassword(ctx context.Context, host string) (Credentials, error) {
	if cn.perTry <= 0 {
		return cn.callPassword(ctx, host)
	}
	ctx, cancel := context.WithTimeout(ctx, cn.perTry)
	defer cancel()
	return cn.callPassword(ctx, host)
}

// callPassword calls the password function, recovering a panic into a
// Fatal *PanicError (safety.go), or gets the credentials function's
// answer from the cache (credentials.go).
func (cn *connector) callPassword(ctx context.Context, host string) (cr Credentials, err error) {
	if cn.creds != nil {
		return cn.creds.get(ctx, host)
	}
	defer func() {
		if r := recover(); r != nil {
			pe := &PanicError{Value: r, Stack: debug.Stack()}
			cn.tel.Error(ctx, obs.MsgPasswordPanicked, LayerPassword, "panic",
				slog.String("panic", cn.tel.Redact(fmt.Sprint(r))), slog.String("stack", string(pe.Stack)))
			cr, err = Credentials{}, pe
		}
	}()
	pw, err := cn.password(ctx, host)
	return Credentials{Password: pw}, err
}

// retryFrom is r.Continue with telemetry: the loop's attempts become span
// events, and its end a recovery, an exhaustion or a budget rejection, each
// counting prior, the connection's attempts before this loop's first: the
// log line and the returned *retry.Error say the same number. It runs
// only after a first failure, off the fast path.
func (cn *connector) retryFrom(ctx context.Context, r *retry.Retrier, layer string, prior int, firstErr error, op func(context.Context) error) error {
	ctx, loop := cn.tel.Begin(ctx, layer)
	loop.Prior(prior)
	rr := *r
	onRetry := rr.OnRetry
	rr.OnRetry = func(ctx context.Context, e retry.Event) {
		e.Attempt += prior
		loop.Observe(e)
		if onRetry != nil {
			onRetry(ctx, e)
		}
	}
	err := rr.Continue(ctx, firstErr, op)
	var re *retry.Error
	if errors.As(err, &re) {
		re.Attempts += prior // the connection's attempts, not this loop's
	}
	loop.End(ctx, err)
	return err
}

// redact wraps err so that its text carries no secret; nil stays nil, and
// an error whose text has none is returned as it is (safety.go).
func (cn *connector) redact(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(*redactedError); ok {
		return err
	}
	s := err.Error()
	r := cn.tel.Redact(s)
	if r == s {
		return err
	}
	return &redactedError{err: err, text: r}
}

// unclassifiedDialers are the packages of dialers whose errors only an
// integration classifies: a dial function of theirs set on the pool config
// by hand gets none of it. Recognised by the error types' package paths,
// without importing them.
var unclassifiedDialers = []struct{ pkg, integration, option string }{
	{"cloud.google.com/go/cloudsqlconn", "cloudsql", "cloudsql.With(dialer, instance)"},
}

// hintIntegration warns once per factory when a dial failed with an error
// of a dialer that an integration of holdfast classifies, used without it
// (the Cloud SQL connector's Dial set as ConnConfig.DialFunc, as
// cloudsqlconn's README shows): its token and Admin API failures are then
// Fatal "unknown", not retried. Called on a dial's failure path only.
func (cn *connector) hintIntegration(ctx context.Context, err error) {
	if cn.hinted.Load() {
		return
	}
	for _, d := range unclassifiedDialers {
		if cn.dialBy == d.integration || !fromPackage(err, d.pkg, 0) {
			continue
		}
		if cn.hinted.CompareAndSwap(false, true) {
			cn.logger.LogAttrs(ctx, slog.LevelWarn,
				"holdfast: a dial failed with an error of "+d.pkg+", which this factory does not classify: its transient failures (a token or Admin API 5xx) are not retried; give the dialer to the factory with "+d.option+" instead of setting ConnConfig.DialFunc",
				slog.String("error", cn.tel.Redact(err.Error())), slog.String("check", d.option))
		}
		return
	}
}

// fromPackage reports whether err's tree holds an error whose type is
// declared in pkg or below it.
func fromPackage(err error, pkg string, depth int) bool {
	if err == nil || depth > 16 {
		return false
	}
	t := reflect.TypeOf(err)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if p := t.PkgPath(); p == pkg || strings.HasPrefix(p, pkg+"/") {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return fromPackage(u.Unwrap(), pkg, depth+1)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if fromPackage(e, pkg, depth+1) {
				return true
			}
		}
	}
	return false
}
