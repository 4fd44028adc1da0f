package outage_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/internal/compose"
	"github.com/holdfast-db/holdfast/internal/outage"
	"github.com/holdfast-db/holdfast/internal/pace"
)

// TestMain runs the tests and checks, with goleak, that no prober
// outlives its layer.
func TestMain(m *testing.M) { pgtest.Main(m) }

// handle is a connection's handle for the layer's hooks.
type handle struct {
	addr    string
	made    time.Time
	aborted atomic.Bool
}

func (h *handle) Server() string               { return h.addr }
func (h *handle) MadeAt() time.Time            { return h.made }
func (h *handle) Abort(func(error) error) bool { return h.aborted.CompareAndSwap(false, true) }
func (h *handle) SetAuthHosts([]string)        {}
func (h *handle) MarkCommit(bool)              {}
func (h *handle) Unread() bool                 { return false }
func (h *handle) String() string               { return h.addr }
func (h *handle) wasAborted() bool             { return h.aborted.Load() }
func refusedErr(addr string) error {
	return &net.OpError{Op: "dial", Net: "tcp", Addr: fakeAddr(addr), Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
}
func (a fakeAddr) Network() string { return "tcp" }
func (a fakeAddr) String() string  { return string(a) }
func downErr(d outage.Down) error  { return &downError{d} }
func (e *downError) Error() string {
	return fmt.Sprintf("down since %v, waited %v: %v", e.d.Since, e.d.Waited, e.d.Cause)
}
func (e *downError) Is(target error) bool { return target == outage.ErrDown }
func (e *downError) Unwrap() []error      { return []error{e.d.Err, e.d.Cause} }
func (r *report) Down(cause error, v classify.Verdict, addr string) {
	r.add("down " + v.Reason + " " + addr)
}
func (r *report) Back(d time.Duration, addr string, moved []string) {
	r.add(fmt.Sprintf("back %s moved %v", addr, moved))
}
func (r *report) Woke(d time.Duration, addr string) {
	r.add(fmt.Sprintf("woke %s", addr))
}

type fakeAddr string

type downError struct{ d outage.Down }

// report records the layer's reports, in order.
type report struct {
	mu    sync.Mutex
	lines []string
	ch    chan struct{}
}

func newReport() *report { return &report{ch: make(chan struct{}, 16)} }

func (r *report) add(s string) {
	r.mu.Lock()
	r.lines = append(r.lines, s)
	r.mu.Unlock()
	select {
	case r.ch <- struct{}{}:
	default:
	}
}

func (r *report) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.lines)
}

// await waits until r has n lines, at most d.
func (r *report) await(t *testing.T, n int, d time.Duration) []string {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		if l := r.all(); len(l) >= n {
			return l
		}
		select {
		case <-r.ch:
		case <-timer.C:
			t.Fatalf("%d reports within %v, want %d: %v", len(r.all()), d, n, r.all())
		}
	}
}

// rig is a layer in a composition of its own, with a fake eviction that
// records the addresses left (Gone), and a probe scripted by the test.
type rig struct {
	l      *outage.Layer
	hooks  compose.Layer
	rep    *report
	mu     sync.Mutex
	gone   []string
	probes atomic.Int32
	// probe answers a check of the addresses the host resolved to
	// (nil: a socket or a failed lookup); nil pc and nil error: connect
	// to the real server.
	probe func(ctx context.Context, addrs []string) (pc *pgconn.PgConn, dialed []string, err error)
	// lookup is the host's answer now.
	lookup atomic.Pointer[[]string]
	// probed gets a value at each check's start (never blocking).
	probed chan struct{}
	// tracer is the pool config's Acquire tracer, which pgxpool calls on
	// every Acquire: the composed one, the layer's hooks behind their
	// switch.
	tracer pgxpool.AcquireTracer
}

const host = "db.internal"

// steadyPace runs the prober at a steady pace (pace.Steady: every 100 ms
// while requests wait, whatever the demand), for the tests of the steps'
// mechanics; TestPaceFollowsDemand tests the engine's.
func steadyPace(c *outage.Config) {
	p := pace.Steady()
	c.Pace = &p
}

func newRig(t *testing.T, holdFor time.Duration, opts ...func(*outage.Config)) *rig {
	t.Helper()
	return newRigWith(t, holdFor, opts...)
}

// newRigWith is newRig with more of the layer's config set by opts.
func newRigWith(t *testing.T, holdFor time.Duration, opts ...func(*outage.Config)) *rig {
	t.Helper()
	r := &rig{rep: newReport(), probed: make(chan struct{}, 64)}
	r.lookup.Store(&[]string{"10.0.0.1:5432"})
	cfg, err := pgxpool.ParseConfig("postgres://app@" + host + ":5432/orders?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	var owner struct{}
	comp := compose.Begin(cfg, &owner)
	dsn := pgtest.DSN(t)
	ocfg := outage.Config{
		HoldFor: holdFor,
		Host:    host,
		Role:    outage.RoleLearn,
		Lookup: func(context.Context, string) ([]string, error) {
			return slices.Clone(*r.lookup.Load()), nil
		},
		Probe: func(ctx context.Context, lookup pgconn.LookupFunc) (*pgconn.PgConn, []string, error) {
			r.probes.Add(1)
			select {
			case r.probed <- struct{}{}:
			default:
			}
			addrs, _ := lookup(ctx, host)
			pc, dialed, err := r.probe(ctx, addrs)
			if pc == nil && err == nil {
				pc, err = pgconn.Connect(ctx, dsn)
			}
			return pc, dialed, err
		},
		ProbeTimeout: 3 * time.Second,
		Classify:     classify.Classify,
		DownError:    downErr,
		Report:       r.rep,
		Comp:         comp,
	}
	for _, o := range opts {
		o(&ocfg)
	}
	r.l = outage.New(ocfg)
	comp.Add(compose.Outage, r.l.Layer())
	comp.Add(compose.Eviction, compose.Layer{Gone: func(addr string) {
		r.mu.Lock()
		r.gone = append(r.gone, addr)
		r.mu.Unlock()
	}})
	comp.Install(cfg, func(context.Context, *pgx.ConnConfig) compose.Conn { return &handle{} })
	r.hooks = r.l.Layer()
	r.tracer, _ = cfg.ConnConfig.Tracer.(pgxpool.AcquireTracer)
	t.Cleanup(r.l.Close)
	return r
}

// arm makes the layer watch outages: a connection of its pool completed
// its handshake (to the real server: a writable one).
func (r *rig) arm(t *testing.T) {
	t.Helper()
	pc, err := pgconn.Connect(context.Background(), pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close(context.Background())
	if err := r.hooks.Validate(context.Background(), &handle{addr: "10.0.0.1:5432"}, host, pc); err != nil {
		t.Fatal(err)
	}
	if got := r.l.Role(); got != outage.RoleWriter {
		t.Fatalf("role after a writable first connection: %v, want RoleWriter", got)
	}
}

func (r *rig) left() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.gone)
}

// waitState waits until the layer's state satisfies cond, at each of its
// changes, at most d.
func waitState(t *testing.T, l *outage.Layer, d time.Duration, cond func(outage.State) bool) outage.State {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		ch := l.Changed()
		st := l.State()
		if cond(st) {
			return st
		}
		select {
		case <-ch:
		case <-timer.C:
			t.Fatalf("state %+v within %v", st, d)
		}
	}
}

// awaitChecks waits for n more checks to begin, at most d.
func (r *rig) awaitChecks(t *testing.T, n int, d time.Duration) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for range n {
		select {
		case <-r.probed:
		case <-timer.C:
			t.Fatalf("%d checks within %v", n, d)
		}
	}
}

// Before its pool's first connection the layer watches nothing: a failed
// dial makes no check and holds nothing (the startup policy bounds it).
func TestNotArmedBeforeTheFirstConnection(t *testing.T) {
	t.Parallel()
	r := newRig(t, 10*time.Second)
	r.probe = func(context.Context, []string) (*pgconn.PgConn, []string, error) {
		return nil, nil, refusedErr("10.0.0.1:5432")
	}
	r.hooks.Failed("10.0.0.1:5432", false)
	waited, err := r.hooks.Hold(context.Background(), &handle{})
	if waited || err != nil || r.probes.Load() != 0 || r.l.State().Down {
		t.Fatalf("Hold = %v, %v; %d checks; state %+v: want no check and no hold", waited, err, r.probes.Load(), r.l.State())
	}
}

// A sign, a failed check: down, reported once; a connect waits, and goes
// on (waited) when a check connects: back, reported with the downtime.
func TestDownThenBack(t *testing.T) {
	t.Parallel()
	r := newRig(t, 10*time.Second)
	var up atomic.Bool
	r.probe = func(context.Context, []string) (*pgconn.PgConn, []string, error) {
		if up.Load() {
			return nil, nil, nil
		}
		return nil, []string{"10.0.0.1:5432"}, refusedErr("10.0.0.1:5432")
	}
	r.arm(t)
	r.hooks.Failed("10.0.0.1:5432", false)
	if got := r.rep.await(t, 1, 5*time.Second); got[0] != "down conn-refused 10.0.0.1:5432" {
		t.Fatalf("reports %v", got)
	}
	st := r.l.State()
	if !st.Down || st.Since.IsZero() || st.Cause == nil {
		t.Fatalf("state %+v, want down with since and cause", st)
	}
	type held struct {
		waited bool
		err    error
	}
	done := make(chan held, 1)
	go func() {
		w, err := r.hooks.Hold(context.Background(), &handle{})
		done <- held{w, err}
	}()
	// Checks go on while it waits, and it does not return.
	for range len(r.probed) {
		<-r.probed
	}
	r.awaitChecks(t, 3, 5*time.Second)
	select {
	case h := <-done:
		t.Fatalf("Hold returned while down: %+v", h)
	default:
	}
	up.Store(true)
	select {
	case h := <-done:
		if !h.waited || h.err != nil {
			t.Fatalf("Hold = %+v, want waited and no error", h)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Hold did not return at back")
	}
	if got := r.rep.await(t, 2, 5*time.Second); got[1] != "back "+serverAddr(t)+" moved []" {
		t.Errorf("reports %v, want back at the real server, nothing moved", got)
	}
	if st := r.l.State(); st.Down || st.Back.IsZero() {
		t.Errorf("state %+v after back", st)
	}
}

// refusedChecks makes r's checks refused and records them: made gets a
// value per check, once recorded (while its buffer lasts); checks
// returns their times.
func refusedChecks(r *rig) (made <-chan struct{}, checks func() []time.Time) {
	var mu sync.Mutex
	var at []time.Time
	ch := make(chan struct{}, 64)
	r.probe = func(context.Context, []string) (*pgconn.PgConn, []string, error) {
		mu.Lock()
		at = append(at, time.Now())
		mu.Unlock()
		select {
		case ch <- struct{}{}:
		default:
		}
		return nil, []string{"10.0.0.1:5432"}, refusedErr("10.0.0.1:5432")
	}
	return ch, func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(at)
	}
}

// While the database is down and nothing waits, the prober backs off:
// at most one check per step, the steps doubling from 100 ms (±20 %);
// a request that starts waiting wakes it at once, and it checks every
// 100 ms (±20 %) while the request waits.
func TestPace(t *testing.T) {
	t.Parallel()
	r := newRig(t, 10*time.Second, steadyPace)
	made, checks := refusedChecks(r)
	await := func(n int, d time.Duration) {
		t.Helper()
		timer := time.NewTimer(d)
		defer timer.Stop()
		for range n {
			select {
			case <-made:
			case <-timer.C:
				t.Fatalf("%d checks within %v", n, d)
			}
		}
	}
	r.arm(t)
	r.hooks.Failed("10.0.0.1:5432", false)
	// The first check and 6 steps: 100, 200, 400, 800, 1600, 3200 ms.
	await(7, 10*time.Second)
	idle := checks()
	for i := 1; i < len(idle); i++ {
		step := 100 * time.Millisecond << (i - 1)
		if gap := idle[i].Sub(idle[i-1]); gap < step*8/10 {
			t.Errorf("nothing waiting: check %d came %v after the one before, want at least %v (a step of %v, -20 %%)", i, gap, step*8/10, step)
		}
	}
	// The next step is 5 s: a request that starts waiting wakes the
	// prober at once.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = r.hooks.Hold(ctx, &handle{})
	}()
	waitFrom := time.Now()
	await(1, 10*time.Second)
	woke := checks()[len(idle)]
	await(3, 5*time.Second)
	cancel()
	<-done
	waiting := checks()[len(idle):]
	t.Logf("MEASURED idle steps %v; a request that started waiting got a check %v later", gaps(idle), woke.Sub(waitFrom).Round(time.Millisecond))
	if d := woke.Sub(waitFrom); d > time.Second {
		t.Errorf("a request that started waiting got a check %v later, want within a second (not the idle step of 5 s)", d)
	}
	for i := 1; i < len(waiting); i++ {
		if gap := waiting[i].Sub(waiting[i-1]); gap < 80*time.Millisecond {
			t.Errorf("while a request waits: two checks %v apart, want at least 80ms (100 ms, -20 %%)", gap)
		}
	}
}

// gaps returns the times between successive ts, rounded.
func gaps(ts []time.Time) []time.Duration {
	var out []time.Duration
	for i := 1; i < len(ts); i++ {
		out = append(out, ts[i].Sub(ts[i-1]).Round(time.Millisecond))
	}
	return out
}

// A wait ends at HoldFor with the face's error (ErrDown), carrying since
// when and the cause; a negative HoldFor does not wait; the caller's
// context ends a wait with its error.
func TestWaitBounds(t *testing.T) {
	t.Parallel()
	refused := func(context.Context, []string) (*pgconn.PgConn, []string, error) {
		return nil, []string{"10.0.0.1:5432"}, refusedErr("10.0.0.1:5432")
	}
	for _, tc := range []struct {
		name    string
		holdFor time.Duration
		ctx     time.Duration // the caller's deadline, 0: none
		want    time.Duration // how long the wait should last at least
		ctxErr  bool
	}{
		{"HoldFor", 300 * time.Millisecond, 0, 300 * time.Millisecond, false},
		{"negative HoldFor", -1, 0, 0, false},
		{"the caller's deadline", 10 * time.Second, 200 * time.Millisecond, 200 * time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newRig(t, tc.holdFor)
			r.probe = refused
			r.arm(t)
			r.hooks.Failed("10.0.0.1:5432", false)
			r.rep.await(t, 1, 5*time.Second)
			ctx := context.Background()
			if tc.ctx > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.ctx)
				defer cancel()
			}
			began := time.Now()
			waited, err := r.hooks.Hold(ctx, &handle{})
			took := time.Since(began)
			var de *downError
			if !waited || !errors.Is(err, outage.ErrDown) || !errors.As(err, &de) {
				t.Fatalf("Hold = %v, %v; want waited and the down error", waited, err)
			}
			if took < tc.want || took > tc.want+2*time.Second {
				t.Errorf("waited %v, want about %v", took, tc.want)
			}
			if de.d.Since.IsZero() || de.d.Cause == nil || (de.d.Err != nil) != tc.ctxErr || de.d.Bound != tc.holdFor {
				t.Errorf("the error's Down: %+v", de.d)
			}
			if tc.ctxErr && !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%v does not match context.DeadlineExceeded", err)
			}
		})
	}
}

// Close joins the prober and lets every wait go on (the pool works on as
// a plain one); goleak (TestMain) finds no prober left.
func TestCloseWhileDown(t *testing.T) {
	t.Parallel()
	r := newRig(t, time.Minute)
	r.probe = func(context.Context, []string) (*pgconn.PgConn, []string, error) {
		return nil, []string{"10.0.0.1:5432"}, refusedErr("10.0.0.1:5432")
	}
	r.arm(t)
	r.hooks.Failed("10.0.0.1:5432", false)
	r.rep.await(t, 1, 5*time.Second)
	done := make(chan error, 1)
	go func() {
		_, err := r.hooks.Hold(context.Background(), &handle{})
		done <- err
	}()
	waitState(t, r.l, 5*time.Second, func(st outage.State) bool { return st.Down })
	r.l.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Hold after Close: %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Hold did not return at Close")
	}
	checks := r.probes.Load()
	r.hooks.Failed("10.0.0.1:5432", false)
	if r.probes.Load() != checks || r.l.State().Down {
		t.Errorf("a sign after Close made a check")
	}
}

// While a layer that outranks this one routes the pool, a sign makes no
// check and holds nothing.
func TestStandsDown(t *testing.T) {
	t.Parallel()
	r := newRig(t, 10*time.Second)
	var routing atomic.Bool
	r.hooks.StandDownWhile(routing.Load)
	r.probe = func(context.Context, []string) (*pgconn.PgConn, []string, error) {
		return nil, nil, refusedErr("10.0.0.1:5432")
	}
	r.arm(t)
	routing.Store(true)
	r.hooks.Failed("10.0.0.1:5432", false)
	if r.probes.Load() != 0 || r.l.State().Down {
		t.Fatalf("%d checks while a layer that outranks it routes", r.probes.Load())
	}
}

// A pool meant for writes that another layer makes a reader's for a
// while (Config.ReaderWhile: failover routing keeps a pinned pool on its
// instance while the cluster publishes a topology): meanwhile a new
// connection to a read-only server is let in and a 25006 from one starts
// no check; once it no longer does (no topology), the connection is
// refused and the 25006 makes a check, as in a pool without failover.
func TestReaderWhile(t *testing.T) {
	t.Parallel()
	var keeping atomic.Bool
	r := newRig(t, 10*time.Second, func(c *outage.Config) { c.ReaderWhile = keeping.Load })
	r.probe = func(context.Context, []string) (*pgconn.PgConn, []string, error) { return nil, nil, nil }
	r.arm(t)
	cc, err := pgconn.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cc.RuntimeParams["default_transaction_read_only"] = "on" // reported at connect (PostgreSQL 14 and later)
	pc, err := pgconn.ConnectConfig(context.Background(), cc)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close(context.Background())
	if pc.ParameterStatus("default_transaction_read_only") != "on" {
		t.Skip("the server does not report default_transaction_read_only (before PostgreSQL 14)")
	}
	h := &handle{addr: "10.0.0.1:5432"}
	compose.Keep(pc, h)
	pe := &pgconn.PgError{Code: "25006"}

	keeping.Store(true)
	if err := r.hooks.Validate(context.Background(), h, host, pc); err != nil {
		t.Errorf("Validate of a read-only server while a reader's: %v, want nil", err)
	}
	if keep := r.hooks.PgError(pc, pe); !keep || r.probes.Load() != 0 {
		t.Errorf("25006 while a reader's: keep %v, %d checks; want kept, no check", keep, r.probes.Load())
	}

	keeping.Store(false)
	r.hooks.PgError(pc, pe)
	r.awaitChecks(t, 1, 3*time.Second) // the 25006 makes a check
	var nw *outage.NotWritableError
	if err := r.hooks.Validate(context.Background(), h, host, pc); !errors.As(err, &nw) {
		t.Errorf("Validate of a read-only server meant for writes: %v, want a *NotWritableError", err)
	}
}

// A check that hangs on an address whose packets are dropped moves to the
// address the host resolves to next, at once: the old address is left
// (Gone), a dial a stale cache still sends there goes to the new one
// (Route), a dial to it under way is cut (Abort).
func TestFollowsTheName(t *testing.T) {
	t.Parallel()
	r := newRig(t, 10*time.Second)
	real := serverAddr(t)
	r.probe = func(ctx context.Context, addrs []string) (*pgconn.PgConn, []string, error) {
		if slices.Contains(addrs, "10.0.0.1:5432") {
			<-ctx.Done() // silent
			return nil, []string{"10.0.0.1:5432"}, ctx.Err()
		}
		return nil, nil, nil // the real server answers at the new address
	}
	r.arm(t)
	dialing := &handle{}
	if _, err := r.hooks.Route(context.Background(), dialing, host, "10.0.0.1:5432", false); err != nil {
		t.Fatal(err)
	}
	r.hooks.Failed("10.0.0.1:5432", false)
	r.awaitChecks(t, 1, 3*time.Second) // the first check hangs
	moved := time.Now()
	r.lookup.Store(&[]string{real})
	st := waitState(t, r.l, 5*time.Second, func(st outage.State) bool { return !st.Down && slices.Contains(r.left(), "10.0.0.1:5432") })
	t.Logf("MEASURED the check moved to the new address %v after the name moved", time.Since(moved).Round(time.Millisecond))
	if st.Down {
		t.Fatalf("state %+v", st)
	}
	if to, err := r.hooks.Route(context.Background(), &handle{}, host, "10.0.0.1:5432", false); err != nil || to != real {
		t.Errorf("Route of the old address = %s, %v; want %s", to, err, real)
	}
	if !dialing.wasAborted() {
		t.Errorf("the dial to the old address under way was not cut")
	}
}

// RoleOf reads target_session_attrs.
func TestRoleOf(t *testing.T) {
	t.Parallel()
	for attrs, want := range map[string]outage.Role{
		"":               outage.RoleLearn,
		"any":            outage.RoleLearn,
		"read-write":     outage.RoleWriter,
		"primary":        outage.RoleWriter,
		"read-only":      outage.RoleReadOnly,
		"standby":        outage.RoleStandby,
		"prefer-standby": outage.RoleReader,
	} {
		dsn := "postgres://app@db/orders"
		if attrs != "" {
			dsn += "?target_session_attrs=" + attrs
		}
		cfg, err := pgconn.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		if got := outage.RoleOf(cfg); got != want {
			t.Errorf("target_session_attrs=%q: %v, want %v", attrs, got, want)
		}
	}
}

// serverAddr is the shared server's address, as a connection to it
// reports it.
func serverAddr(t *testing.T) string {
	t.Helper()
	pc, err := pgconn.Connect(context.Background(), pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close(context.Background())
	return pc.Conn().RemoteAddr().String()
}

// The engine's pace follows the demand (issue 30, item 5: polite by
// default). While the database is down and one connect waits with
// nothing else asked for, the prober checks about every second or two
// (1.1 checks per connect asked for; the connect still waiting counted
// as asking every 2 s), where a steady pace checks every 100 ms; the
// Acquires that start meanwhile and find no connection are the demand:
// 40 of them make it check every 100 ms (±20 %) at once. An Acquire while
// the database is up is not counted: its context is left as it was. The
// Acquires go through the pool config's tracer, as pgxpool calls it: the
// layer's hooks run behind the switch it turns on while not up.
func TestPaceFollowsDemand(t *testing.T) {
	t.Parallel()
	r := newRig(t, 30*time.Second)
	made, checks := refusedChecks(r)
	bg := context.Background()
	if r.tracer == nil {
		t.Fatal("the pool config's tracer traces no Acquire: the layer cannot see the demand")
	}
	acquire := func() context.Context { return r.tracer.TraceAcquireStart(bg, nil, pgxpool.TraceAcquireStartData{}) }
	if ctx := acquire(); ctx != bg {
		t.Error("an Acquire while the database is up was counted (its context changed)")
	}
	r.arm(t)
	r.hooks.Failed("10.0.0.1:5432", false)
	for !r.l.State().Down {
		select {
		case <-r.l.Changed():
		case <-time.After(5 * time.Second):
			t.Fatal("not down within 5 s of a refused check")
		}
	}
	ctx, cancel := context.WithCancel(bg)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = r.hooks.Hold(ctx, &handle{})
	}()
	defer func() { cancel(); <-done }()
	// One connect waits, nothing else is asked for: 3 s of checks.
	quiet := time.Now()
	timer := time.NewTimer(3 * time.Second)
	for waiting := true; waiting; {
		select {
		case <-made:
		case <-timer.C:
			waiting = false
		}
	}
	var slow []time.Time
	for _, c := range checks() {
		if c.After(quiet) {
			slow = append(slow, c)
		}
	}
	// The demand: 40 Acquires find no connection.
	var acquired []context.Context
	for range 40 {
		acquired = append(acquired, acquire())
	}
	if acquired[0] == bg {
		t.Error("an Acquire while the database is down was not counted")
	}
	asked := time.Now()
	n := len(checks())
	for range 6 {
		select {
		case <-made:
		case <-time.After(2 * time.Second):
			t.Fatalf("%d checks within 2 s of 40 Acquires, want 6 (one every 100 ms)", len(checks())-n)
		}
	}
	for _, a := range acquired {
		r.tracer.TraceAcquireEnd(a, nil, pgxpool.TraceAcquireEndData{})
	}
	fast := checks()[n:]
	t.Logf("MEASURED one connect waiting: %d checks in 3 s, %v apart; 40 Acquires: the first check %v later, then %v apart",
		len(slow), gaps(slow), fast[0].Sub(asked).Round(time.Millisecond), gaps(fast))
	if len(slow) > 4 {
		t.Errorf("one connect waiting, nothing asked: %d checks in 3 s, want at most 4 (about one a second or two; a steady pace makes 30)", len(slow))
	}
	for _, g := range gaps(slow) {
		if g < 700*time.Millisecond {
			t.Errorf("one connect waiting: checks %v apart, want at least 700ms (909 ms at the least demand counted, -20 %%)", g)
		}
	}
	if d := fast[0].Sub(asked); d > 300*time.Millisecond {
		t.Errorf("40 Acquires: the next check %v later, want within 300ms (the pace asked again)", d)
	}
	for _, g := range gaps(fast) {
		if g < 75*time.Millisecond || g > 250*time.Millisecond {
			t.Errorf("40 Acquires: checks %v apart, want every 100 ms ±20 %%", g)
		}
	}
}
