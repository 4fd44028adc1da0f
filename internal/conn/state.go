package conn

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/internal/compose"
	"github.com/holdfast-db/holdfast/internal/obs"
	"github.com/holdfast-db/holdfast/retry"
)

// connState is one connection of a pool, from its first dial to its close:
// the attempts it took, its retry rounds, then the established connection
// (its server, whether a failover cut it). pgconn keeps it in the
// connection's CustomData (compose.Keep): it is the layers' handle of the
// connection (compose.Conn, handle methods below).
type connState struct {
	cn     *connector
	p      *Pool // the pool: its layers' chain, its admission limit
	base   pgconn.DialFunc
	cc     *pgx.ConnConfig
	target *obs.Target // log lines name the pool's database

	rounds     int                      // retry rounds, the first included (the policy's MaxAttempts)
	authHosts  []string                 // the names the password is issued for, in order, when blue/green routing named them (SetAuthHosts)
	entries    []string                 // the hosts of one round: cc.Host, then the original fallbacks
	ports      []uint16                 // and their ports
	sockets    []bool                   // entries that are Unix sockets (pgconn does not look them up)
	fallbacks  []*pgconn.FallbackConfig // cc's own Fallbacks, before the retry rounds
	lookup     pgconn.LookupFunc
	results    [][]string // lookup results of the first round, by entry
	lookupErrs []error    // and their failures
	resolved   []bool     // entries looked up already (predial): pgconn gets the same answer
	onlyFirst  int        // an entry whose lookup gives pgconn its first address only (-1: none)
	calls      int        // lookup calls so far
	perRnd     int        // dials in one round, known once the first round is looked up

	pre        *predialed // the first dial, made before pgconn's connect (predial): pgconn's first dial takes it
	predialing bool       // predial is dialing: the admission slot's backstop waits for pgconn's context
	start      time.Time  // when the connection's first dial began

	connected atomic.Bool // the handshake completed: later dials are cancel requests

	// Set when the handshake completes.
	pc     atomic.Pointer[pgconn.PgConn]
	addr   string    // the server's address, as the socket reports it
	madeAt time.Time // when the connection was made

	clamp      atomic.Int64                       // unix nanos: deadlines are clamped to it while the connection closes (0: not closing)
	inflight   atomic.Int32                       // what the connection has in flight (outcome.go)
	standby    atomic.Bool                        // its server said it is in hot standby (outcome.go): nothing in flight commits
	committing atomic.Bool                        // a transaction runner's COMMIT comes next (MarkCommit)
	pingAt     atomic.Int64                       // unix nanos when pgxpool's ping of it was decided (pinging): positive until the ping is written, negative from then until the next request (pingOnly)
	aborted    atomic.Pointer[abortion]           // set when a layer cut the connection (abort)
	hungUp     atomic.Bool                        // the server, or what lies between, closed the established connection (an EOF or a reset): no cancel request follows (dialCancel)
	dialed     atomic.Pointer[string]             // the server of the current dial, from the dial on: a cut reaches a handshake too
	sock       atomic.Pointer[watchedConn]        // the current dial's connection
	peeked     atomic.Pointer[peekedSocket]       // the socket Unread peeks, found at its first peek (peek.go)
	pending    atomic.Pointer[context.CancelFunc] // cancels the dial under way, before its socket exists (Abort)

	mu          sync.Mutex // guards the fields below (a slow write may read on pgconn's background reader)
	dials       int        // dials of this connection so far
	used        int        // failed attempts so far
	last        error      // why the last dialed attempt failed after its dial, if known
	stop        error      // once set, later dials of the retry rounds return it
	told        bool       // stop was returned once in full; later entries say they were not dialed
	authRetried bool

	end       time.Time // when its dials and handshakes must be over (zero: no bound): endOf
	deadlined bool      // watch set a deadline on the socket
	timeouts  int       // attempts that timed out: each later one may take longer (attemptBound)

	// The telemetry of the connection's retries, from its first retried
	// failure to its end: recovered when its handshake completes, given
	// up when its retries end (endRetries).
	tctx context.Context
	tl   *obs.Loop

	ctx         context.Context // BeforeConnect's, naming the target: for the ERROR line of a failed connect
	failedLayer string          // the layer whose BeforeConnect step failed (LayerPassword), for that line
	reported    bool            // that line was written (or the failure was retryable)

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
	if budgetFree(ctx) {
		rr.Budget = nil // startup, the prober: bounded by their own policies
	}
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
	if c.p != nil {
		c.p.chain.Ended(c, err) // the outage layer: a check's connect that ended without a retry
	}
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

// stateOf returns the state of c, or nil for a connection this package
// did not make: the handle compose.Keep recorded is the connector's own.
func stateOf(c *pgx.Conn) *connState {
	s, _ := compose.ConnOf(c).(*connState)
	return s
}

// prepare makes cc, the per-connection copy of the pool's config that
// BeforeConnect received, build its connection through c: retry rounds
// in its Fallbacks, the connection's DialFunc, LookupFunc, OnPgError,
// ValidateConnect and AfterConnect, each chained to what the pool config
// had; then it makes the connection's first dial (predial). ctx is
// BeforeConnect's.
func (c *connState) prepare(ctx context.Context) {
	cc := c.cc
	c.entries = append(c.entries, cc.Host)
	c.ports = append(c.ports, cc.Port)
	for _, fb := range cc.Fallbacks {
		c.entries = append(c.entries, fb.Host)
		c.ports = append(c.ports, fb.Port)
	}
	for _, h := range c.entries {
		c.sockets = append(c.sockets, isSocket(h))
	}
	c.fallbacks = cc.Fallbacks
	c.results = make([][]string, len(c.entries))
	c.lookupErrs = make([]error, len(c.entries))
	c.resolved = make([]bool, len(c.entries))
	c.onlyFirst = -1
	c.lookup = cc.LookupFunc
	if c.lookup == nil {
		c.lookup = net.DefaultResolver.LookupHost
	}
	if len(c.entries) > 1 && c.rounds <= 1 {
		cc.LookupFunc = c.lookupEntry // predial's answers, for pgconn
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
	chain := c.p.chain
	onPgError := cc.OnPgError
	cc.OnPgError = func(pc *pgconn.PgConn, pe *pgconn.PgError) bool {
		if c.cn.creds != nil && !c.connected.Load() && (pe.Code == "28P01" || pe.Code == "28000") {
			c.mu.Lock()
			user, pw := c.cc.User, c.cc.Password
			c.mu.Unlock()
			c.cn.creds.refuse(user, pw) // the next fetch is a fresh one
		}
		if c.connected.Load() {
			if pe.Severity == "FATAL" && (pe.Code == "57P01" || pe.Code == "57P02") {
				// The server ended the session shutting down (or an
				// administrator ended it): its other connections go too.
				chain.Failed(c.addr, true)
			}
		} else if shuttingDown(pe) {
			chain.Failed(c.Server(), false) // the handshake of a server that is down, or going
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
		keep := chain.PgError(pc, pe)
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
		if err := chain.Validate(ctx, c, host, pc); err != nil {
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
		standby := inHotStandby(ctx, pc) // within the attempt's bound: an older server is asked
		if c.deadlined {
			_ = pc.Conn().SetDeadline(time.Time{}) // the attempt's bound ends with it
		}
		c.addr, c.madeAt = pc.Conn().RemoteAddr().String(), time.Now()
		c.standby.Store(standby)
		c.pc.Store(pc)
		c.connected.Store(true)
		compose.Keep(pc, c)   // the layers find its handle (eviction: Server, MadeAt); Engine.Start checks that the connector ran
		c.cn.budget.Success() // a connection that completed its handshake
		c.mu.Lock()
		c.endRetries(nil) // recovered, if it was retried
		c.mu.Unlock()
		if after != nil {
			return after(ctx, pc)
		}
		return nil
	}
	cc.DialFunc = c.dial
	if len(cc.Fallbacks) > 0 {
		c.predial(ctx)
	}
}

// predialed is the first dial of a connection, made before pgconn's
// connect: pgconn's first dial takes it.
type predialed struct {
	network, addr string
	conn          net.Conn
	err           error
}

// predial makes the connection's first dial before pgconn starts, so
// that pgconn is not made to try entries that will never be dialed: when
// that dial fails for good (a refused port, a missing socket, a timeout,
// after the dial's retries), no entry after it is dialed (every dial of a
// connection shares one allowance), so the retry rounds are left out of
// cc's Fallbacks and pgx's error is one line. It resolves every entry
// first, as pgconn does (each with its DNS retries, once: lookupEntry
// gives pgconn the same answers), and dials the first address pgconn
// would dial, through the same path (dialEntry: admission, routing, the
// dial's retries). When pgconn might refuse the config before it dials
// (predialable), it leaves the connection to pgconn. c.mu is not held.
func (c *connState) predial(ctx context.Context) {
	cc := c.cc
	if !predialable(cc) {
		return
	}
	k, network, addr := -1, "", ""
	for i, host := range c.entries {
		if c.sockets[i] {
			if k < 0 {
				k = i
				network, addr = pgconn.NetworkAddress(host, c.ports[i])
			}
			continue
		}
		addrs, err := c.lookupRetried(ctx, host)
		c.mu.Lock()
		c.results[i], c.lookupErrs[i], c.resolved[i] = addrs, err, true
		c.mu.Unlock()
		if k < 0 && len(addrs) > 0 {
			n, a, ok := connectAddress(addrs[0], c.ports[i])
			if !ok {
				return // pgconn refuses the answer before any dial
			}
			k, network, addr = i, n, a
		}
	}
	if k < 0 {
		// No entry resolved: nothing will be dialed, and the rounds
		// would only repeat each host's lookup failure. pgconn gets
		// each host once (sslmode=prefer's second entry is the same).
		seen := []string{cc.Host}
		fbs := make([]*pgconn.FallbackConfig, 0, len(c.fallbacks))
		for _, fb := range c.fallbacks {
			if !slices.Contains(seen, fb.Host) {
				seen = append(seen, fb.Host)
				fbs = append(fbs, fb)
			}
		}
		cc.Fallbacks = fbs
		return
	}
	if cc.ConnectTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cc.ConnectTimeout) // as pgconn bounds a dial
		defer cancel()
	}
	c.mu.Lock()
	c.predialing = true
	c.mu.Unlock()
	conn, err := c.dialEntry(ctx, network, addr)
	c.mu.Lock()
	c.predialing = false
	c.pre = &predialed{network: network, addr: addr, conn: conn, err: err}
	if err != nil {
		// The connection's retries are over: pgconn tries the entries
		// up to this one (those before it did not resolve), this one at
		// its first address only.
		cc.Fallbacks = c.fallbacks[:k]
		c.onlyFirst = k
	}
	c.mu.Unlock()
}

// predialable reports whether pgconn reaches its first dial with cc: its
// checks before a dial pass (sslcertmode, the protocol versions). A
// config that fails them is left to pgconn, which returns its error.
func predialable(cc *pgx.ConnConfig) bool {
	switch cc.SSLCertMode {
	case "", "disable", "allow", "require":
	default:
		return false
	}
	for _, v := range []string{cc.MinProtocolVersion, cc.MaxProtocolVersion} {
		switch v {
		case "", "3.0", "3.2", "latest":
		default:
			return false
		}
	}
	return true
}

// connectAddress is the network and address pgconn dials for a lookup
// answer of an entry on port (pgconn's buildConnectOneConfigs): the
// answer's own port when it has one; ok is false for an answer pgconn
// refuses (a port that does not parse).
func connectAddress(answer string, port uint16) (network, addr string, ok bool) {
	host, p, err := net.SplitHostPort(answer)
	if err != nil {
		network, addr = pgconn.NetworkAddress(answer, port)
		return network, addr, true
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return "", "", false
	}
	network, addr = pgconn.NetworkAddress(host, uint16(n))
	return network, addr, true
}

// shuttingDown reports whether a handshake's failure pe says the server
// does not accept connections: shutting down (57P01, 57P02), starting up
// or in recovery (57P03).
func shuttingDown(pe *pgconn.PgError) bool {
	return pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
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
		c.mu.Lock()
		if c.resolved[i] { // by predial
			addrs, err := c.results[i], c.lookupErrs[i]
			if i == c.onlyFirst && len(addrs) > 1 {
				addrs = addrs[:1]
			}
			c.mu.Unlock()
			return addrs, err
		}
		c.mu.Unlock()
		addrs, err := c.lookupRetried(ctx, host)
		c.mu.Lock()
		c.results[i], c.lookupErrs[i], c.resolved[i] = addrs, err, true
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
		return nil, c.cn.redact(c.cn.failure(LayerConnect, c.cn.coreText(lastOf(err)), err, time.Time{}, c.target))
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
	if p := c.pre; p != nil {
		c.pre = nil
		if p.network == network && p.addr == addr {
			// pgconn's first dial: the one predial made. The admission
			// slot's backstop now waits on pgconn's connect context.
			if c.admitted.Load() && c.admitStop == nil {
				c.admitStop = context.AfterFunc(ctx, c.releaseAdmission)
			}
			return p.conn, p.err
		}
		if p.conn != nil { // not reached: lookupEntry gave pgconn predial's answers
			_ = p.conn.Close()
		}
	}
	d := c.dials
	c.dials++
	if d == 0 {
		c.start = time.Now()
		c.end = c.endOf(ctx, c.start)
	}
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
	return "holdfast: not dialed: the connection's retries ended above"
}

func (e *notDialedError) Unwrap() error { return e.end }

// dialAttempt dials an entry, retrying dial failures under the
// connection's allowance. After a failed dial the layers may hold the
// connection (Hold: the target is down); once it is back, the connection
// starts afresh, by its host's address now, as a first attempt: no retry
// is spent on waiting. c.mu is held.
func (c *connState) dialAttempt(ctx context.Context, network, addr string) (net.Conn, error) {
	if c.used >= c.cn.maxDials && c.used > 0 {
		if c.stop == nil {
			c.stop = c.exhausted()
		}
		return nil, c.stopped()
	}
	base := c.routedDial(false)
	for {
		start := time.Now()
		dctx, done := c.abortable(ctx)
		conn, err := c.cn.boundedDial(dctx, c.attemptBound(), base, network, addr)
		done()
		if err == nil {
			return c.watch(conn, start), nil
		}
		if cut := c.abortErr(err); cut != nil {
			err = cut // a layer's abort: its error (Transient), and no sign of the target's
		} else {
			c.dialFailed(addr, err)
		}
		if timedOut(err) {
			c.timeouts++
		}
		waited, herr := c.hold(ctx)
		if herr != nil {
			c.used++
			c.stop = herr
			return nil, c.stopped()
		}
		if waited {
			c.afresh(ctx)
			base = c.retryDial()
			continue
		}
		var n int
		conn, n, err = c.redial(ctx, network, addr, err)
		if err != nil {
			c.used += n
			c.stop = err
			return nil, c.stopped()
		}
		c.used += n - 1
		return c.watch(conn, start), nil
	}
}

// dialFailed is the sign of a dial to addr that failed with err: the
// target's (the layers' Failed: a refused connect may be a failover, or
// the target down), or, when an integration's dialer could not get what
// a connection needs (its token, its certificate: credentialsFailure),
// the token source's, which suspects no address and is no sign of a
// failover.
func (c *connState) dialFailed(addr string, err error) {
	if !c.cn.credentialsFailure(err) {
		c.p.chain.Failed(addr, false)
	} else if c.p.out != nil {
		c.p.out.CredentialsFailed()
	}
}

// hold asks the layers whether to wait before a retry of the connection
// (compose.Chain.Hold): waited when the target was down and is back.
// While a layer waits, the connection's admission slot is given back
// (nothing dials while held: the other connects of the pool are not kept
// waiting for admission, whose wait MaxElapsed bounds, behind it), and
// it is taken again before the next dial (readmit). c.mu is held; the
// wait is bounded by ctx and the layers' own bounds.
func (c *connState) hold(ctx context.Context) (waited bool, err error) {
	yielded := false
	hctx := compose.WithHoldWait(obs.WithTarget(ctx, c.target), func() {
		if !yielded && c.admitted.Load() {
			yielded = true
			c.releaseAdmission()
		}
	})
	waited, err = c.p.chain.Hold(hctx, c)
	if yielded && err == nil {
		err = c.readmit(ctx)
	}
	return waited, err
}

// afresh starts the connection's attempts over after a hold that waited
// for the target to come back: its allowance, its attempts' bounds and
// MaxElapsed count from now. c.mu is held.
func (c *connState) afresh(ctx context.Context) {
	c.used, c.timeouts = 0, 0
	c.end = c.endOf(ctx, time.Now())
}

// redial carries on after the failed first dial of an entry, under the
// dial policy limited to the connection's remaining attempts, each within
// attemptBound. It returns the connection or the face's *ConnectError
// (the last dial's failure, with the connection's attempts), and how many
// attempts were made (the failed one included). c.mu is held.
func (c *connState) redial(ctx context.Context, network, addr string, firstErr error) (net.Conn, int, error) {
	r := c.cn.dial
	r.Policy.MaxAttempts = c.cn.maxDials - c.used
	r.Policy.AttemptTimeout = 0 // each dial is bounded by attemptBound
	ctx = c.withEnd(ctx)
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
		return nil, attempts, c.cn.failure(LayerConnect, c.cn.coreText(lastOf(err)), err, c.start, c.target)
	}
	return conn, attempts, nil
}

// routedDial returns the dial of each try: the pool's, through its
// layers' Route (failover: held while the writer is down, to the new
// writer while DNS lags; blue/green, for a retry: held through
// IN_PROGRESS), so that a retry follows a failover that happens while the
// connection is retried. retry is false for the connection's first dial.
func (c *connState) routedDial(retry bool) pgconn.DialFunc {
	chain := c.p.chain
	if !chain.Routes() {
		return c.base
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		addr, err := chain.Route(ctx, c, c.cc.Host, addr, retry)
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
	routed := c.routedDial(true)
	if len(c.entries) != 1 || c.sockets[0] {
		return routed // several hosts: pgx chooses among them
	}
	host := c.entries[0]
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return routed(ctx, network, c.reresolve(ctx, host, addr))
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

// endOf returns when the connection's dials and handshakes must be over:
// MaxElapsed after from (its first dial, or the end of a hold that waited
// for the target to come back: afresh), or earlier when the door that
// waits on it ends earlier (ConnectsWithin); zero for no bound.
func (c *connState) endOf(ctx context.Context, from time.Time) time.Time {
	var end time.Time
	if me := c.cn.dial.Policy.MaxElapsed; me > 0 {
		end = from.Add(me)
	}
	if t, ok := ctx.Value(connectEndKey{}).(time.Time); ok && (end.IsZero() || t.Before(end)) {
		end = t
	}
	return end
}

// attemptBound returns how long the next attempt of this connection may
// take (its dial, then its whole handshake): the policy's AttemptTimeout,
// doubled for each of the connection's attempts that timed out, at most
// 2^maxBoundGrowth times, and clamped to the time left before the
// connection's end (endOf: MaxElapsed from its first dial), so that its
// attempts end within MaxElapsed, not one grown bound after it. A slow
// but alive server (a far region, a loaded proxy: TLS and SCRAM take four
// or five round trips) then connects on a later attempt, while a hung one
// stays bounded. 0: no bound. c.mu is held.
func (c *connState) attemptBound() time.Duration {
	d := c.cn.perTry
	for i := 0; d > 0 && i < c.timeouts && i < maxBoundGrowth; i++ {
		d *= 2
	}
	if !c.end.IsZero() {
		if left := max(time.Until(c.end), time.Millisecond); d <= 0 || left < d {
			d = left
		}
	}
	return d
}

// withEnd returns ctx bounded by the connection's end (endOf), for its
// retry loops: no backoff runs past it (the loop stops with
// StopDeadline), and no attempt, each being clamped to it (attemptBound).
func (c *connState) withEnd(ctx context.Context) context.Context {
	if c.end.IsZero() {
		return ctx
	}
	return retry.WithCallerDeadline(ctx, c.end)
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
	ctx, done := c.abortable(ctx)
	defer done()
	conn, err := dial(ctx, network, addr)
	if err != nil {
		if cut := c.abortErr(err); cut != nil {
			return nil, cut
		}
	}
	if err != nil && timedOut(err) && ctx.Err() != nil {
		c.timeouts++
	}
	return conn, err
}

// abortable returns ctx for one dial of the connection, which Abort
// cancels while the dial is pending (no socket yet: a dial to an address
// whose packets are dropped), and the func that ends it. c.mu is held.
func (c *connState) abortable(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	c.pending.Store(&cancel)
	return ctx, func() {
		c.pending.Store(nil)
		cancel()
	}
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
	c.peeked.Store(nil)
	if d := c.attemptBound(); d > 0 {
		_ = conn.SetDeadline(time.Now().Add(d))
		c.deadlined = true
	}
	wc := &watchedConn{Conn: conn, c: c}
	c.sock.Store(wc)
	c.p.chain.Dialed(c, addr, dialStart) // a cut from now on reaches it
	return wc
}

// retryRound starts a retry round after the previous round failed with
// c.last, or refuses it. c.mu is held.
func (c *connState) retryRound(ctx context.Context, network, addr string) (net.Conn, error) {
	c.used++ // the failed handshake
	last := c.last
	if last == nil {
		// A failure this layer did not see (TLS verification,
		// ValidateConnect, a protocol error): never retried here. The
		// connection's error carries the real cause, the line above.
		c.stop = c.cn.errs.Connect(&Failure{Layer: LayerConnect, Attempts: c.used, Elapsed: time.Since(c.start), Stop: retry.StopFatal}, errRefused)
		return nil, c.stopped()
	}
	if timedOut(last) {
		c.timeouts++ // the next attempt may take longer
	}
	// The layers may hold the round while the target is down: once it is
	// back, the round's first dial is a first attempt again.
	if waited, err := c.hold(ctx); err != nil {
		c.stop = err
		return nil, c.stopped()
	} else if waited {
		c.afresh(ctx)
		start := time.Now()
		dctx, done := c.abortable(ctx)
		conn, err := c.cn.boundedDial(dctx, c.attemptBound(), c.retryDial(), network, addr)
		done()
		if err == nil {
			return c.watch(conn, start), nil
		}
		if cut := c.abortErr(err); cut != nil {
			err = cut
		} else {
			c.dialFailed(addr, err)
		}
		c.used++
		last = err
	}
	prior := c.used - 1 // attempts before this loop's first, which is the failed attempt
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
	r.Exempt = isFreshAuth
	// The connection's end bounds its retries across rounds (each loop
	// would otherwise count MaxElapsed from its own start).
	ctx = c.withEnd(ctx)
	var conn net.Conn
	var start time.Time
	refreshed, dialed := false, false
	dial := c.retryDial()
	err := c.retry(ctx, &r, prior, last, func(ctx context.Context) error {
		dialed = true
		if c.authRetried && c.cn.password != nil && !refreshed {
			cr, err := c.cn.fetchPassword(ctx, c.retryHost(), nil)
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
		line := "" // the round dialed nothing: its cause is the handshake's line above
		if dialed {
			line = c.cn.coreText(lastOf(err))
		}
		c.stop = c.cn.failure(LayerConnect, line, err, c.start, c.target)
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
// None is sent when nothing would receive it: a layer cut the connection
// (abort), its ping went unanswered (pingOnly), or the server closed it
// (hungUp).
func (c *connState) dialCancel(ctx context.Context, network, addr string) (net.Conn, error) {
	pc := c.pc.Load()
	if pc == nil || !pc.IsClosed() {
		return c.cn.boundedDial(ctx, c.cn.perTry, c.base, network, addr) // a cancel request of the user's
	}
	if err := c.abortErr(nil); err != nil {
		return nil, err // cut: the server was left behind, nothing to cancel there
	}
	if c.hungUp.Load() {
		// The server closed the connection (an EOF or a reset, as a
		// failover, a restart or a maintenance cuts every connection):
		// the session the cancel request would name ended with it, and
		// a pool cut at once would send one dial per connection to a
		// server that is going away, beside the pool's own reconnects.
		// libpq sends none either. (A middlebox that resets a connection
		// whose server still runs its statement is the exception: the
		// statement runs on until it answers; the keepalive holdfast sets
		// on its sockets keeps an idle timeout from being that middlebox.)
		// Nothing is left to drain: pgx's Terminate and drain end at
		// once, not within its 15 s.
		c.closeNow(pc)
		return nil, errHungUp
	}
	if c.pingOnly(pingUnanswered) {
		// Its last request is pgxpool's ping before handing it out, an
		// empty statement: nothing runs on the server to cancel, and a
		// server that left it unanswered this long would leave the cancel
		// request and the drain unanswered too, while the pool keeps the
		// connection's slot. It closes now (no cancel request, no drain:
		// pgx's Terminate and drain fail at once), so the slot is free
		// for a new connection. (The layers heard that the server failed
		// it when the ping's read timed out: failed.)
		c.closeNow(pc)
		return nil, errPingUnanswered
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
		c.p.chain.Failed(c.addr, true)
		return nil, err
	}
	_ = conn.SetDeadline(end)
	return &cancelConn{Conn: conn, c: c}, nil
}

// closeNow ends what is left of the closing of pc, whose cancel request
// is not sent: its deadlines are clamped to now, so that pgx's Terminate
// and drain fail at once and the pool's slot is free.
func (c *connState) closeNow(pc *pgconn.PgConn) {
	now := time.Now()
	c.clamp.Store(now.UnixNano())
	if nc := pc.Conn(); nc != nil {
		_ = nc.SetDeadline(now)
	}
}

// errHungUp is what pgx's cancel request of a connection the server
// closed returns (dialCancel): none is sent. pgx drops it.
var errHungUp = errors.New("holdfast: no cancel request: the server closed the connection")

// hangUp records that the server closed the established connection when
// a read or write of it failed with err: the end of the stream or a
// reset. One atomic store, off the fast path.
func (c *connState) hangUp(err error) {
	if c.connected.Load() && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)) {
		c.hungUp.Store(true)
	}
}

// errPingUnanswered is what pgx's cancel request of a connection closed
// after its ping went unanswered returns (dialCancel): none is sent. pgx
// drops it.
var errPingUnanswered = errors.New("holdfast: no cancel request: the connection's ping went unanswered")

// pingUnanswered is how long pgxpool's ping of a connection must have gone
// unanswered for the connection to close without a cancel request
// (dialCancel): a server answers an empty statement at once. A ping that
// its caller's deadline cut shorter says nothing of the server: the
// connection then closes as after any request, and the cancel request
// tells (a server that answers it frees the slot at once).
const pingUnanswered = closeBound / 2

// pinging records that pgxpool pings the connection next, before handing
// it out (compose.Layer.Pinging): a clock read and one atomic store, on
// the Acquire's goroutine, before the ping's goroutine starts.
func (c *connState) pinging() { c.pingAt.Store(time.Now().UnixNano()) }

// pingOnly reports whether the last request the connection sent is
// pgxpool's ping, sent at least d ago: nothing else was written since
// pinging (the ping's write marks it sent, the next request's clears it).
func (c *connState) pingOnly(d time.Duration) bool {
	at := -c.pingAt.Load()
	return at > 0 && time.Since(time.Unix(0, at)) >= d
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
		cc.c.p.chain.Failed(cc.c.addr, true)
	}
	return n, err
}

// exhausted is the error of a connection whose retry rounds all failed:
// the end of its retries, whose cause is the handshake's line before it.
// c.mu is held.
func (c *connState) exhausted() error {
	last := c.last
	if last == nil {
		last = errRefused
	}
	return c.cn.failure(LayerConnect, "", &retry.Error{Attempts: c.used, Last: last,
		Verdict: c.cn.classifier.Classify(last), Stop: retry.StopExhausted}, c.start, c.target)
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

// abortion is how a layer cut a connection: wrap turns the I/O error the
// cut caused into the layer's error (a *failover.CutError).
type abortion struct{ wrap func(cause error) error }

// Abort cuts the connection, at any moment from its dial on: a dial under
// way is canceled; its socket's deadlines are set in the past, so a
// blocked read or write returns at once and every later one fails before
// sending anything, with wrap(the I/O error) as the cause; a handshake
// that completes anyway is refused (ValidateConnect). It reports whether
// this call cut it (not an earlier one).
func (c *connState) Abort(wrap func(cause error) error) bool {
	if !c.aborted.CompareAndSwap(nil, &abortion{wrap: wrap}) {
		return false
	}
	past := time.Unix(1, 0)
	c.clamp.Store(past.UnixNano())
	if wc := c.sock.Load(); wc != nil {
		_ = wc.Conn.SetDeadline(past) // the socket itself: during the handshake too
	}
	if cancel := c.pending.Load(); cancel != nil {
		(*cancel)() // a dial under way, before its socket exists
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

// Server returns the address of the connection's current dial ("" before
// it).
func (c *connState) Server() string {
	if d := c.dialed.Load(); d != nil {
		return *d
	}
	return ""
}

// MadeAt returns when the connection's handshake completed (zero before).
func (c *connState) MadeAt() time.Time { return c.madeAt }

// SetAuthHosts names the hosts the connection's password or token is
// issued for (blue/green routing, in its BeforeConnect, before the
// connect layer's).
func (c *connState) SetAuthHosts(hosts []string) { c.authHosts = hosts }

// MarkCommit tells the connection whether a transaction runner's COMMIT
// is what it sends next; the mark ends with the next request written.
func (c *connState) MarkCommit(next bool) { c.committing.Store(next) }

// connState is the layers' handle of the connection.
var _ compose.Conn = (*connState)(nil)

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
		w.c.hangUp(err)
		err = w.c.ioErr(err)
		w.c.failed(err)
		if k := w.c.inflight.Load(); mayCommit(k) && w.c.connected.Load() && (w.c.clamp.Load() == 0 || w.c.aborted.Load() != nil) {
			// A statement that could commit was sent and its answer is
			// lost (a failed write sends nothing the server runs), unless
			// its server is a standby, where nothing commits.
			if pc := w.c.pc.Load(); pc != nil && w.c.standby.Load() && stillStandby(pc) {
				err = &StandbyLostError{Statement: inflightNames[k], Err: err}
			} else {
				err = w.c.cn.errs.OutcomeUnknown(inflightNames[k], err)
			}
		}
	}
	return n, err
}

func (w *watchedConn) Write(b []byte) (int, error) {
	if c := w.c; c.connected.Load() && c.clamp.Load() == 0 { // not while closing
		if at := c.pingAt.Load(); at != 0 {
			// pgxpool's ping is the first request after pinging; the next
			// one is not a ping.
			if at > 0 {
				c.pingAt.Store(-at)
			} else {
				c.pingAt.Store(0)
			}
		}
		// What the connection now has in flight, for a read that fails
		// (outcome.go). pgconn writes from the goroutine that owns the
		// connection, so its TxStatus is read safely here.
		if pc := c.pc.Load(); pc != nil {
			committing := c.committing.Load()
			c.inflight.Store(requestKind(b, pc.TxStatus(), committing, c.inflight.Load()))
			if committing && startsRequest(b) {
				// The mark is for the next request only: the COMMIT. The
				// runner cannot clear it itself once the transaction's
				// Commit has handed the connection back to its pool.
				c.committing.Store(false)
			}
		}
	}
	n, err := w.Conn.Write(b)
	if err != nil {
		w.c.hangUp(err)
		err = w.c.ioErr(err)
		w.c.failed(err)
	}
	return n, err
}

// Close tells the layers, unless a later dial of the same connection
// replaced this one.
func (w *watchedConn) Close() error {
	if w.c.sock.Load() == w {
		w.c.p.chain.Closed(w.c)
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
// caller's context) is not one, unless it ended pgxpool's ping after the
// server left it unanswered for pingUnanswered: as a cancel request left
// unanswered (dialCancel), it tells the layers before the ping fails, so
// that the pool's other connections to the server are evicted when next
// acquired, not handed out.
func (c *connState) failed(err error) {
	if !c.connected.Load() {
		c.noteNet(err)
		return
	}
	if c.clamp.Load() != 0 || errors.Is(err, net.ErrClosed) {
		return
	}
	if errors.Is(err, os.ErrDeadlineExceeded) && (c.aborted.Load() != nil || !c.pingOnly(pingUnanswered)) {
		return
	}
	c.p.chain.Failed(c.addr, true)
}

// noteNet records a network error of the handshake unless a server error
// was already recorded (the server closes the socket after an
// ErrorResponse).
func (c *connState) noteNet(err error) {
	if errors.Is(err, net.ErrClosed) {
		return // pgconn closed it after a failure it reports itself
	}
	c.mu.Lock()
	first := c.last == nil
	if first {
		c.last = err
	}
	c.mu.Unlock()
	if first && c.aborted.Load() == nil {
		// A reset, an EOF or a hung handshake (the attempt's deadline):
		// the server may be down. (A layer's cut is not a sign of it.)
		c.p.chain.Failed(c.Server(), false)
	}
}

// reasonAuthFreshToken is the retry reason of an authentication failure
// retried once with a fresh token or a fresh dial.
const reasonAuthFreshToken = "auth-failed-fresh-token"

// isFreshAuth reports whether v is retryAuthOnce's verdict: the one retry
// of a refused password or token with a fresh one, which the retry budget
// neither charges nor refuses (retry.Retrier.Exempt). It has a bound of
// its own, once per connection, and a credentials rotation under load
// refuses many connects at once, each needing it: under the default
// budget, retry.DemandBudget, the third would leave the rest refused.
func isFreshAuth(v classify.Verdict) bool { return v.Reason == reasonAuthFreshToken }

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
