package holdfast

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/internal/obs"
	"github.com/holdfast-db/holdfast/retry"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// This file protects every connection a pool builds, whatever path asked
// for it (pool.Query, QueryRow, Exec, Begin, SendBatch, CopyFrom, Ping,
// Acquire, sqlc code, database/sql through stdlib.OpenDBFromPool), without
// wrapping the pool. pgxpool gives BeforeConnect a per-connection copy of
// the config, and pgconn's ConnectConfig tries the entries of Fallbacks in
// order, dialing each through the config's DialFunc. So the connect layer
// appends retry rounds to the connection's Fallbacks (copies of the entries
// there were) and gives it a DialFunc that, at the start of each retry
// round, looks at why the previous round failed and either backs off and
// dials again (a transient failure of the handshake: 53300, 57P03, 57P01,
// a connection reset mid-handshake) or refuses without dialing (a fatal
// one: a missing role, an unknown failure). pgconn stops by itself after
// 28P01, 3D000 and 42501. A last entry, never dialed, carries the
// *retry.Error that says the connection was already retried, so that
// Factory.Acquire does not retry it again.
//
// Nothing is resent: no statement has been sent on a connection that is
// still being built.

// attempt is the retry state of one connection being built.
type attempt struct {
	f      *Factory
	base   pgconn.DialFunc
	cc     *pgx.ConnConfig
	target *obs.Target // log lines name the pool's database
	ph     *poolHooks

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
	addr   string                      // the server's address, as the socket reports it
	madeAt time.Time                   // when the connection was made
	clamp  atomic.Int64                // unix nanos: deadlines are clamped to it while the connection closes (0: not closing)
	cut    cutFlag                     // set when a failover cut the connection (failover.go)
	dialed atomic.Pointer[string]      // the server of the current dial, from the dial on: a cut reaches a handshake too
	sock   atomic.Pointer[watchedConn] // the current dial's connection

	mu          sync.Mutex // guards the fields below (a slow write may read on pgconn's background reader)
	dials       int        // dials of this connection so far
	used        int        // failed attempts so far
	last        error      // why the last dialed attempt failed after its dial, if known
	stop        error      // once set, later dials of the retry rounds return it
	authRetried bool

	firstFailure time.Time // of a handshake, for MaxElapsed across rounds
	deadlined    bool      // watch set a deadline on the socket
	timeouts     int       // attempts that timed out: each later one may take longer (attemptBound)
}

// maxBoundGrowth bounds how many times an attempt's timeout doubles.
const maxBoundGrowth = 3

// attemptBound returns how long the next attempt of this connection may
// take (its dial, then its whole handshake): the policy's AttemptTimeout,
// doubled for each of the connection's attempts that timed out, at most
// 2^maxBoundGrowth times, and never past MaxElapsed from the first
// failure. A slow but alive server (a far region, a loaded proxy: TLS and
// SCRAM take four or five round trips) then connects on a later attempt,
// while a hung one stays bounded as before. 0: no bound. a.mu is held.
func (a *attempt) attemptBound() time.Duration {
	d := a.f.perTry
	if d <= 0 {
		return 0
	}
	for i := 0; i < a.timeouts && i < maxBoundGrowth; i++ {
		d *= 2
	}
	if me := a.f.dial.Policy.MaxElapsed; me > 0 && !a.firstFailure.IsZero() {
		if left := time.Until(a.firstFailure.Add(me)); left < d {
			d = max(left, time.Millisecond)
		}
	}
	return d
}

// timedOut reports whether err is an attempt that ran out of time: a
// socket or context deadline, a dial timeout.
func timedOut(err error) bool {
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) || isTimeout(err)
}

// boundedDial is one dial of a retry, within attemptBound; a timeout makes
// the next attempt's bound longer. a.mu is held.
func (a *attempt) boundedDial(ctx context.Context, base pgconn.DialFunc, network, addr string) (net.Conn, error) {
	if d := a.attemptBound(); d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	conn, err := base(ctx, network, addr)
	if err != nil && timedOut(err) && ctx.Err() != nil {
		a.timeouts++
	}
	return conn, err
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

// newConnectError is the *ConnectError of layer (LayerConnect or
// LayerPassword), its deprecated Stage kept equal to Layer.
func newConnectError(layer string, err error) *ConnectError {
	return &ConnectError{Layer: layer, Stage: layer, Err: err}
}

// madeKey marks, in pgconn's CustomData, a connection that holdfast's
// connect layer made.
const madeKey = "holdfast/made"

// sentinelHost names the last Fallbacks entry, never dialed.
const sentinelHost = "holdfast-retry-summary"

// install prepares cc, a per-connection copy, for retried attempts.
func (a *attempt) install() {
	cc := a.cc
	a.entries = append(a.entries, cc.Host)
	for _, fb := range cc.Fallbacks {
		a.entries = append(a.entries, fb.Host)
	}
	for _, h := range a.entries {
		a.sockets = append(a.sockets, isSocket(h))
	}
	a.results = make([][]string, len(a.entries))
	a.lookupErrs = make([]error, len(a.entries))
	a.lookup = cc.LookupFunc
	if a.lookup == nil {
		a.lookup = net.DefaultResolver.LookupHost
	}
	if a.rounds > 1 {
		round := make([]*pgconn.FallbackConfig, 0, len(a.entries))
		round = append(round, &pgconn.FallbackConfig{Host: cc.Host, Port: cc.Port, TLSConfig: cc.TLSConfig})
		round = append(round, cc.Fallbacks...)
		fbs := make([]*pgconn.FallbackConfig, 0, len(round)*a.rounds)
		fbs = append(fbs, cc.Fallbacks...)
		for range a.rounds - 1 {
			fbs = append(fbs, round...)
		}
		fbs = append(fbs, &pgconn.FallbackConfig{Host: sentinelHost, Port: cc.Port})
		cc.Fallbacks = fbs
		cc.LookupFunc = a.lookupHost
		onPgError := cc.OnPgError
		cc.OnPgError = func(pc *pgconn.PgConn, pe *pgconn.PgError) bool {
			if !a.connected.Load() {
				a.note(pe)
			}
			if onPgError != nil {
				return onPgError(pc, pe)
			}
			return true
		}
	}
	if a.rounds > 1 && a.f.password != nil {
		// pgx connects with a copy of cc, which pgconn authenticates
		// with: a token that a retry round fetched (after 28000) reaches
		// the copy here, before the startup message.
		afterNet := cc.AfterNetConnect
		cc.AfterNetConnect = func(ctx context.Context, config *pgconn.Config, conn net.Conn) (net.Conn, error) {
			a.mu.Lock()
			config.Password = a.cc.Password
			a.mu.Unlock()
			if afterNet != nil {
				return afterNet(ctx, config, conn)
			}
			return conn, nil
		}
	}
	if fo := a.ph.fo; fo != nil {
		onPgError := cc.OnPgError
		cc.OnPgError = func(pc *pgconn.PgConn, pe *pgconn.PgError) bool {
			keep := fo.onPgError(pc, pe)
			if onPgError != nil {
				keep = onPgError(pc, pe) && keep
			}
			return keep
		}
		validate, host, writer := cc.ValidateConnect, cc.Host, fo.writer
		cc.ValidateConnect = func(ctx context.Context, pc *pgconn.PgConn) error {
			if ce := a.cut.Load(); ce != nil {
				// Cut while its handshake ran (failover.go): the server
				// was left behind; retried by the next round's dial.
				a.note(ce)
				return ce
			}
			if writer {
				if err := a.ph.validateWriter(host, pc); err != nil {
					a.note(err) // retried, by the next round's dial, on the writer
					return err
				}
			}
			if validate != nil {
				return validate(ctx, pc)
			}
			return nil
		}
	}
	after := cc.AfterConnect
	cc.AfterConnect = func(ctx context.Context, pc *pgconn.PgConn) error {
		if a.deadlined {
			_ = pc.Conn().SetDeadline(time.Time{}) // the attempt's bound ends with it
		}
		a.addr, a.madeAt = pc.Conn().RemoteAddr().String(), time.Now()
		a.pc.Store(pc)
		a.connected.Store(true)
		pc.CustomData()[madeKey] = a // Factory.Start checks that its layers ran; eviction reads addr and madeAt
		a.f.budget.Success()         // a connection that completed its handshake
		if after != nil {
			return after(ctx, pc)
		}
		return nil
	}
	cc.DialFunc = a.dial
}

// isSocket reports whether host is a Unix socket directory, which pgconn
// dials without a lookup.
func isSocket(host string) bool { return len(host) > 0 && host[0] == '/' }

// lookupHost is the connection's LookupFunc: entries of the first round are
// resolved by the pool's own LookupFunc; the entries of retry rounds reuse
// those answers, so that a retry costs no extra DNS query at connect time.
func (a *attempt) lookupHost(ctx context.Context, host string) ([]string, error) {
	a.mu.Lock()
	i := a.nextLookupEntry()
	a.mu.Unlock()
	n := len(a.entries)
	switch {
	case i < 0 || i >= n*a.rounds:
		// The summary entry: one "address", never dialed; nothing at all
		// when no entry resolved (then nothing is dialed either).
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.perRound() == 0 {
			return nil, a.firstLookupErr()
		}
		return []string{sentinelHost}, nil
	case i < n:
		addrs, err := a.lookupRetried(ctx, host)
		a.mu.Lock()
		a.results[i], a.lookupErrs[i] = addrs, err
		a.mu.Unlock()
		return addrs, err
	default:
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.results[i%n], a.lookupErrs[i%n]
	}
}

// lookupRetried resolves host, retrying a transient DNS failure (a
// timeout, a SERVFAIL) under the dial policy: a lookup is part of the
// connect, and pgx makes no dial when it fails.
func (a *attempt) lookupRetried(ctx context.Context, host string) ([]string, error) {
	addrs, err := a.lookup(ctx, host)
	if err == nil {
		return addrs, nil
	}
	ctx = obs.WithTarget(ctx, a.target) // a failure path
	r := a.f.dial
	err = a.f.retryFrom(ctx, &r, LayerConnect, err, func(ctx context.Context) error {
		var lerr error
		addrs, lerr = a.lookup(ctx, host)
		return lerr
	})
	if err != nil {
		return nil, a.f.redact(newConnectError(LayerConnect, err))
	}
	return addrs, nil
}

// firstLookupErr is the first lookup failure of the first round. a.mu is
// held.
func (a *attempt) firstLookupErr() error {
	for _, err := range a.lookupErrs {
		if err != nil {
			return err
		}
	}
	return &net.DNSError{Err: "no address", Name: a.entries[0], IsNotFound: true}
}

// nextLookupEntry maps the next LookupFunc call to its entry index (pgconn
// skips sockets). a.mu is held.
func (a *attempt) nextLookupEntry() int {
	k := a.calls
	a.calls++
	n := len(a.entries)
	seen := 0
	for i := 0; i < n*a.rounds; i++ {
		if a.sockets[i%n] {
			continue
		}
		if seen == k {
			return i
		}
		seen++
	}
	return -1
}

// perRound returns the dials of one round. a.mu is held; every lookup of
// every entry is done before the first dial.
func (a *attempt) perRound() int {
	if a.perRnd == 0 {
		for i, addrs := range a.results {
			if a.sockets[i] {
				a.perRnd++
			} else {
				a.perRnd += len(addrs)
			}
		}
	}
	return a.perRnd
}

// note records why the current attempt failed after its dial.
func (a *attempt) note(err error) {
	a.mu.Lock()
	a.last = err
	a.mu.Unlock()
}

// dial is the connection's DialFunc; its errors carry no secret holdfast
// knows (they become part of pgx's error text).
func (a *attempt) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := a.dialRedacted(ctx, network, addr)
	if err != nil {
		return nil, a.f.redact(err)
	}
	return conn, nil
}

func (a *attempt) dialRedacted(ctx context.Context, network, addr string) (net.Conn, error) {
	if a.connected.Load() {
		return a.cancelDial(ctx, network, addr)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	d := a.dials
	a.dials++
	if a.rounds > 1 {
		per := a.perRound()
		switch {
		case per == 0 || d >= per*a.rounds+1:
			// Past our entries: pgconn's own last resort (a host that
			// target_session_attrs did not prefer).
		case d == per*a.rounds:
			// The summary entry: the retry rounds are over.
			if a.stop == nil {
				a.used++ // the last round's failed handshake
				a.stop = a.exhausted()
			}
			return nil, a.stop
		case a.stop != nil:
			return nil, a.stop
		case d > 0 && d%per == 0:
			// A retry round starts: the previous round failed.
			return a.retryRound(ctx, network, addr)
		}
	}
	return a.dialOnce(ctx, network, addr)
}

// dialOnce dials, retrying dial failures under the connection's allowance.
// a.mu is held.
func (a *attempt) dialOnce(ctx context.Context, network, addr string) (net.Conn, error) {
	if a.used >= a.f.maxDials && a.used > 0 {
		if a.stop == nil {
			a.stop = a.exhausted()
		}
		return nil, a.stop
	}
	base := a.routedBase()
	start := time.Now()
	conn, err := a.f.dialWithin(ctx, a.attemptBound(), base, network, addr)
	if err != nil {
		a.ph.trouble()                      // a refused connect may be a failover
		ctx = obs.WithTarget(ctx, a.target) // a failure path
		if timedOut(err) {
			a.timeouts++
		}
		var n int
		conn, n, err = a.redial(ctx, network, addr, err)
		if err != nil {
			a.used += n
			a.stop = err
			return nil, err
		}
		a.used += n - 1
	}
	return a.watch(conn, start), nil
}

// redial carries on after the failed first dial of an entry, under the
// dial policy limited to the connection's remaining attempts, each within
// attemptBound. It returns the connection or a *ConnectError, and how many
// attempts were made (the failed one included). a.mu is held.
func (a *attempt) redial(ctx context.Context, network, addr string, firstErr error) (net.Conn, int, error) {
	r := a.f.dial
	r.Policy.MaxAttempts = a.f.maxDials - a.used
	r.Policy.AttemptTimeout = 0 // each dial is bounded by attemptBound
	base := a.retryBase()
	var conn net.Conn
	attempts := 1
	err := a.f.retryFrom(ctx, &r, LayerConnect, firstErr, func(ctx context.Context) error {
		attempts++
		c, err := a.boundedDial(ctx, base, network, addr)
		conn = c
		return err
	})
	if err != nil {
		return nil, attempts, newConnectError(LayerConnect, err)
	}
	return conn, attempts, nil
}

// routedBase returns the dial of each try: a.base, through the failover
// routing when the pool has it (held while the writer is down, to the new
// writer while DNS lags), so that a retry follows a failover that happens
// while the connect layer retries.
func (a *attempt) routedBase() pgconn.DialFunc {
	if a.ph.fo == nil {
		return a.base
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		addr, err := a.ph.routeDial(ctx, a.cc.Host, addr)
		if err != nil {
			return nil, err
		}
		return a.base(ctx, network, addr)
	}
}

// retryBase returns the dial of a retry: routedBase, after resolving the
// connection's host again when it has a single one. pgconn resolves the
// host once per connect, and a retry that kept dialing that answer would
// follow a server that DNS has since moved away from (a writer that
// failed over and came back as a reader) for as long as the retries last.
func (a *attempt) retryBase() pgconn.DialFunc {
	routed := a.routedBase()
	if len(a.entries) != 1 || a.sockets[0] {
		return routed // several hosts: pgx chooses among them
	}
	host := a.entries[0]
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return routed(ctx, network, a.reresolve(ctx, host, addr))
	}
}

// reresolve returns addr when host still resolves to it (or cannot be
// resolved now), else host's first address now, with addr's port unless
// the answer carries one.
func (a *attempt) reresolve(ctx context.Context, host, addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	addrs, err := a.lookup(ctx, host)
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

// watch wraps a dialed connection for its handshake: it records the
// handshake's network errors and, with an AttemptTimeout, bounds the whole
// attempt (TLS, the startup handshake, ValidateConnect) with a deadline on
// the socket, which AfterConnect clears. a.mu is held.
func (a *attempt) watch(conn net.Conn, dialStart time.Time) net.Conn {
	a.last = nil
	tuneSocket(conn) // dead-connection detection (netdial.go)
	if fo := a.ph.fo; fo != nil {
		// A new dial: a cut of the previous one does not carry over, and
		// a cut from now on reaches this one, handshake included — also
		// one that came while it was dialed (fo.track checks).
		a.cut.Store(nil)
		a.clamp.Store(0)
		addr := conn.RemoteAddr().String()
		a.dialed.Store(&addr)
	}
	if d := a.attemptBound(); d > 0 {
		_ = conn.SetDeadline(time.Now().Add(d))
		a.deadlined = true
	}
	wc := &watchedConn{Conn: conn, a: a}
	a.sock.Store(wc)
	if fo := a.ph.fo; fo != nil {
		fo.track(a, *a.dialed.Load(), dialStart)
	}
	return wc
}

// retryRound starts a retry round after the previous round failed with
// a.last, or refuses it. a.mu is held.
func (a *attempt) retryRound(ctx context.Context, network, addr string) (net.Conn, error) {
	a.used++            // the failed handshake
	prior := a.used - 1 // attempts before this loop's first, which is the failed handshake
	last := a.last
	if last == nil {
		// A failure this layer did not see (TLS verification,
		// ValidateConnect, a protocol error): never retried here. The
		// connection's error carries the real cause.
		a.stop = errRefused
		return nil, a.stop
	}
	if timedOut(last) {
		a.timeouts++ // the next attempt may take longer
	}
	r := a.f.dial
	r.Policy.MaxAttempts = a.f.maxDials - a.used + 1 // the failed handshake is attempt 1
	r.Policy.AttemptTimeout = 0                      // each dial is bounded by attemptBound
	classifier := r.Classify
	r.Classify = func(err error) classify.Verdict {
		v := classifier(err)
		if !a.freshAuth() {
			return v
		}
		return retryAuthOnce(v, err, &a.authRetried) // a fresh token or a fresh dial
	}
	// MaxElapsed bounds the connection's retries from its first failure,
	// across rounds (each loop would otherwise count from its own start).
	if a.firstFailure.IsZero() {
		a.firstFailure = time.Now()
	}
	if me := a.f.dial.Policy.MaxElapsed; me > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, a.firstFailure.Add(me))
		defer cancel()
	}
	var conn net.Conn
	var start time.Time
	refreshed := false
	err := a.f.retryFrom(ctx, &r, LayerConnect, last, func(ctx context.Context) error {
		if a.authRetried && a.f.password != nil && !refreshed {
			pw, err := a.f.fetchPassword(ctx, a.retryHost())
			if err != nil {
				return err
			}
			a.cc.Password, refreshed = pw, true
		}
		start = time.Now()
		c, err := a.boundedDial(ctx, a.retryBase(), network, addr)
		if err != nil {
			a.used++
		}
		conn = c
		return err
	})
	if err != nil {
		var re *retry.Error
		if errors.As(err, &re) {
			re.Attempts += prior // count the connection's attempts, not this loop's
		}
		a.stop = newConnectError(LayerConnect, err)
		return nil, a.stop
	}
	return a.watch(conn, start), nil
}

// cancelDial dials for a cancel request on the established connection.
// When pgx sends it because it is closing the connection after a failure
// (a canceled or timed-out query), the cancel request and the drain that
// follows are bounded by closeBound instead of pgx's 15 s, during which
// the pool keeps the connection's slot; and if the server does not answer
// the cancel request in time, the pool's other connections to it are
// presumed dead too (evicted when next acquired).
func (a *attempt) cancelDial(ctx context.Context, network, addr string) (net.Conn, error) {
	pc := a.pc.Load()
	if pc == nil || !pc.IsClosed() {
		return a.f.firstDial(ctx, a.base, network, addr) // a cancel request of the user's
	}
	if ce := a.cut.Load(); ce != nil {
		return nil, ce // cut by a failover: the old writer is gone, nothing to cancel there
	}
	end := time.Now().Add(closeBound)
	a.clamp.Store(end.UnixNano())
	if c := pc.Conn(); c != nil {
		_ = c.SetDeadline(end) // the drain after the cancel request
	}
	dctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	conn, err := a.base(dctx, network, addr)
	if err != nil {
		a.ph.evictHost(a.addr)
		return nil, err
	}
	_ = conn.SetDeadline(end)
	return &cancelConn{Conn: conn, a: a}, nil
}

// cancelConn is the connection of a cancel request sent while closing: a
// server that does not answer it in time is presumed unreachable.
type cancelConn struct {
	net.Conn
	a *attempt
}

func (c *cancelConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		c.a.ph.evictHost(c.a.addr)
	}
	return n, err
}

// exhausted is the error of a connection whose retry rounds all failed.
// a.mu is held.
func (a *attempt) exhausted() error {
	last := a.last
	if last == nil {
		last = errRefused
	}
	return newConnectError(LayerConnect, &retry.Error{Attempts: a.used, Last: last,
		Verdict: a.f.classifier.Classify(last), Stop: retry.StopExhausted})
}

// retryHost is the name the token of the one retry after an
// authentication failure is issued for: the next of authHosts (the other
// name of a blue/green pair), else the same.
func (a *attempt) retryHost() string {
	switch len(a.authHosts) {
	case 0:
		return a.cc.Host
	case 1:
		return a.authHosts[0]
	}
	return a.authHosts[1]
}

// freshAuth reports whether an authentication failure may be retried once:
// with a password function (a fresh token) or an integration whose dial
// authenticates (the Cloud SQL connector's IAM login).
func (a *attempt) freshAuth() bool { return a.f.password != nil || a.f.authRetry }

// errRefused is what the dials of the remaining retry rounds return after
// a failure this layer does not retry. It is not a *retry.Error: nothing
// was retried, so Factory.Acquire still classifies the real cause.
var errRefused = errors.New("holdfast: not retried: the previous attempt failed with an error that is not retried while connecting")

// watchedConn records the first network error of a connection's handshake,
// so that the next retry round knows why it failed. After the handshake it
// only forwards.
type watchedConn struct {
	net.Conn
	a *attempt
}

func (c *watchedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil {
		err = c.a.cutErr(err)
		c.a.failed(err)
	}
	return n, err
}

func (c *watchedConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if err != nil {
		err = c.a.cutErr(err)
		c.a.failed(err)
	}
	return n, err
}

// Close forgets the connection in the failover layer, unless a later dial
// of the same connection replaced it.
func (c *watchedConn) Close() error {
	if fo := c.a.ph.fo; fo != nil && c.a.sock.Load() == c {
		fo.untrack(c.a)
	}
	return c.Conn.Close()
}

// SetDeadline, SetReadDeadline and SetWriteDeadline keep a closing
// connection's deadlines within closeBound (see cancelDial).
func (c *watchedConn) SetDeadline(t time.Time) error { return c.Conn.SetDeadline(c.a.clamped(t)) }
func (c *watchedConn) SetReadDeadline(t time.Time) error {
	return c.Conn.SetReadDeadline(c.a.clamped(t))
}
func (c *watchedConn) SetWriteDeadline(t time.Time) error {
	return c.Conn.SetWriteDeadline(c.a.clamped(t))
}

// clamped returns t, or the closing bound when the connection is closing
// and t is later (or none).
func (a *attempt) clamped(t time.Time) time.Time {
	if n := a.clamp.Load(); n != 0 {
		if end := time.Unix(0, n); t.IsZero() || t.After(end) {
			return end
		}
	}
	return t
}

// failed handles a network error of the connection: during the handshake
// it tells the next retry round why the attempt failed; afterwards, an
// error of the network (a reset, a broken pipe, TCP_USER_TIMEOUT's
// ETIMEDOUT, the server closing) presumes the pool's other connections to
// that server dead too. A deadline (the caller's context) is not one.
func (a *attempt) failed(err error) {
	if !a.connected.Load() {
		a.noteNet(err)
		return
	}
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, net.ErrClosed) || a.clamp.Load() != 0 {
		return
	}
	a.ph.evictHost(a.addr)
	a.ph.trouble()
}

// noteNet records a network error of the handshake unless a server error
// was already recorded (the server closes the socket after an
// ErrorResponse).
func (a *attempt) noteNet(err error) {
	if errors.Is(err, net.ErrClosed) {
		return // pgconn closed it after a failure it reports itself
	}
	a.mu.Lock()
	if a.last == nil {
		a.last = err
	}
	a.mu.Unlock()
}
