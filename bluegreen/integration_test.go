package bluegreen_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/fakes"
	fake "github.com/holdfast-db/holdfast/fakes/bluegreentest"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/retry"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// Short intervals keep the tests fast; the bounds are long so that a slow
// machine does not make them fail.
func fastConfig() bluegreen.Config {
	return bluegreen.Config{
		BaselineInterval:      40 * time.Millisecond,
		IncreasedInterval:     20 * time.Millisecond,
		HighInterval:          10 * time.Millisecond,
		ConnectTimeout:        20 * time.Second,
		SwitchoverTimeout:     60 * time.Second,
		MonitorConnectTimeout: 5 * time.Second,
		MonitorQueryTimeout:   5 * time.Second,
	}
}

// startEnv starts the blue and green servers, with TLS, for the subtests of
// t; they are stopped when all of them are done.
func startEnv(t *testing.T) *fake.Env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env, err := fake.Start(ctx, fake.Config{TLS: true})
	if errors.Is(err, fake.ErrNotFound) {
		if os.Getenv(pgtest.EnvRequire) == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Close(); err != nil {
			t.Error(err)
		}
	})
	for _, s := range []*fake.Server{env.Blue, env.Green} {
		serverAt[s.ListenAddr] = s.Host
	}
	return env
}

// serverAt maps where each server listens to the address clients see it
// at (they differ in the simulator's single-address mode). startEnv fills
// it before the tests run in parallel.
var serverAt = map[string]string{}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newDeployment(t *testing.T, env *fake.Env, engine fake.Engine) *fake.Deployment {
	t.Helper()
	d, err := env.NewDeployment(testCtx(t), fake.DeploymentConfig{Engine: engine})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = d.Drop(ctx)
	})
	return d
}

// client is a holdfast pool with blue/green routing on one host name.
type client struct {
	t    *testing.T
	f    *holdfast.Factory
	pool *pgxpool.Pool
	r    bluegreen.Router
	logs *fakes.LogBuffer
}

// newClient makes a client; mods change the pool's config before the pool
// is made.
func newClient(t *testing.T, d *fake.Deployment, host string, c bluegreen.Config, mods ...func(*pgxpool.Config)) *client {
	t.Helper()
	logs := &fakes.LogBuffer{}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	}
	b, err := retry.NewBudget(retry.DefaultBudget())
	if err != nil {
		t.Fatal(err)
	}
	p := retry.Default()
	p.InitialInterval, p.MaxInterval = time.Millisecond, 5*time.Millisecond
	f, err := holdfast.New(holdfast.WithBlueGreen(c), holdfast.WithRetryPolicy(p), holdfast.WithStartupPolicy(p),
		holdfast.WithRetryBudget(b))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	cfg, err := d.PoolConfig(host, "pool_max_conns=4")
	if err != nil {
		t.Fatal(err)
	}
	for _, mod := range mods {
		mod(cfg)
	}
	pool, err := f.NewPool(testCtx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	r := f.BlueGreen(pool)
	if r == nil {
		t.Fatal("Factory.BlueGreen = nil for a pool configured WithBlueGreen")
	}
	return &client{t: t, f: f, pool: pool, r: r, logs: logs}
}

// waitFor waits, on the status API's change notifications, until cond holds.
func (c *client) waitFor(what string, cond func(bluegreen.Status) bool) bluegreen.Status {
	c.t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		ch := c.r.Changed()
		st := c.r.Status()
		if cond(st) {
			return st
		}
		select {
		case <-ch:
		case <-deadline.C:
			c.t.Fatalf("timed out waiting for %s; status: %+v", what, st)
		}
	}
}

func (c *client) waitPhase(p bluegreen.Phase) bluegreen.Status {
	c.t.Helper()
	return c.waitFor(p.String(), func(s bluegreen.Status) bool { return s.Phase == p })
}

// waitMonitors waits until both monitors have polled after status was
// written (so that a later assertion sees what they read).
func (c *client) waitPolled(status string) {
	c.t.Helper()
	c.waitFor("both monitors read "+status, func(s bluegreen.Status) bool {
		for _, m := range s.Monitors {
			if m.Status != status {
				return false
			}
		}
		return true
	})
}

// result is the outcome of a background call.
type result struct {
	addr string
	ssl  bool
	err  error
	took time.Duration
}

// where runs a query reporting the server address (as clients see it) and
// whether TLS is on.
func where(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (string, bool, error) {
	var addr string
	var ssl bool
	err := q.QueryRow(ctx, "SELECT host(inet_server_addr()) || ':' || inet_server_port(), (SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid())").Scan(&addr, &ssl)
	if host, ok := serverAt[addr]; ok {
		addr = host
	}
	return addr, ssl, err
}

// newConn makes the pool open a new connection: it holds every idle one,
// acquires (which connects), and releases them all.
func (c *client) newConn(ctx context.Context) result {
	start := time.Now()
	idle := c.pool.AcquireAllIdle(ctx)
	defer func() {
		for _, i := range idle {
			i.Release()
		}
	}()
	conn, err := c.pool.Acquire(ctx)
	if err != nil {
		return result{err: err, took: time.Since(start)}
	}
	defer conn.Release()
	addr, ssl, err := where(ctx, conn)
	return result{addr: addr, ssl: ssl, err: err, took: time.Since(start)}
}

// goNewConn runs newConn in the background.
func (c *client) goNewConn(ctx context.Context) <-chan result {
	ch := make(chan result, 1)
	go func() { ch <- c.newConn(ctx) }()
	return ch
}

// waitSubstituted waits until new connections to host are pinned to addr
// (in PREPARATION, once the blue monitor has resolved the blue names).
func (c *client) waitSubstituted(host, addr string) {
	c.t.Helper()
	c.waitFor(host+" substituted with "+addr, func(s bluegreen.Status) bool {
		for _, r := range s.Routing.Routes {
			if r.Host == host && r.Action == "substitute" && strings.HasPrefix(r.Addr, addr+":") {
				return true
			}
		}
		return false
	})
}

// waitMapped waits for CREATED with every blue host mapped to a green
// host, both with addresses: the inventory a switchover starts from.
func (c *client) waitMapped() bluegreen.Status {
	c.t.Helper()
	return c.waitFor("CREATED with both sides mapped", func(s bluegreen.Status) bool {
		if s.Phase != bluegreen.Created || len(s.Mapping) == 0 {
			return false
		}
		for _, m := range s.Mapping {
			if m.BlueAddr == "" || m.GreenAddr == "" {
				return false
			}
		}
		return true
	})
}

func (c *client) waitWaiting(n int64) {
	c.t.Helper()
	c.waitFor("callers held", func(s bluegreen.Status) bool { return s.Waiting >= n })
}

func set(t *testing.T, d *fake.Deployment, status string) {
	t.Helper()
	if err := d.SetStatus(testCtx(t), status); err != nil {
		t.Fatal(err)
	}
}

func pending(ch <-chan result) bool {
	select {
	case r := <-ch:
		panic("returned while it should be held: " + r.addr + " " + errString(r.err))
	default:
		return true
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

func expectAddr(t *testing.T, what string, r result, addr string) {
	t.Helper()
	if r.err != nil || r.addr != addr || !r.ssl {
		t.Errorf("%s: server %q, TLS %v, err %v; want %s over TLS", what, r.addr, r.ssl, r.err, addr)
	}
}

// TestIntegration runs switchovers against two real PostgreSQL servers with
// TLS on (every connection uses sslmode=verify-full with the deployment's
// host names), the metadata function fed from a control table, and a fake
// DNS.
func TestIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("plays a blue/green switchover on real servers: skipped with -short")
	}
	env := startEnv(t)
	blueIP, greenIP := env.Blue.Host, env.Green.Host

	t.Run("whole switchover, Aurora", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		d := newDeployment(t, env, fake.Aurora)
		set(t, d, fake.StatusAvailable)
		c := newClient(t, d, d.Names.Cluster, fastConfig())
		green := newClient(t, d, d.Names.GreenCluster, fastConfig())

		st := c.waitMapped()
		if st.Engine != bluegreen.EngineAurora {
			t.Errorf("engine = %v, want aurora", st.Engine)
		}
		c.waitFor("readiness line", func(bluegreen.Status) bool {
			return strings.Contains(c.logs.String(), "target topology recognized") &&
				strings.Contains(c.logs.String(), d.Names.Cluster+" ("+blueIP+") -> "+d.Names.GreenCluster+" ("+greenIP+")")
		})
		// Before any switchover: plain routing, and the pools' conns go where DNS says.
		if !st.Routing.Normal {
			t.Errorf("routing during CREATED is not normal: %+v", st.Routing)
		}
		expectAddr(t, "CREATED blue", c.newConn(ctx), blueIP)
		held, err := c.pool.Acquire(ctx) // a blue connection in use when IN_PROGRESS begins
		if err != nil {
			t.Fatal(err)
		}
		greenHeld, err := green.pool.Acquire(ctx) // a green one
		if err != nil {
			t.Fatal(err)
		}

		// PREPARATION: the blue name is pinned to the blue start address,
		// so it connects even while DNS fails.
		set(t, d, fake.StatusInitiated)
		c.waitSubstituted(d.Names.Cluster, blueIP)
		env.Resolver.Fail(d.Names.Cluster)
		expectAddr(t, "PREPARATION blue with DNS failing", c.newConn(ctx), blueIP)
		env.Resolver.Set(d.Names.Cluster, blueIP)

		// IN_PROGRESS: new connections, acquires and statements are held;
		// the blue connection in use is dropped.
		set(t, d, fake.StatusInProgress)
		c.waitPhase(bluegreen.InProgress)
		green.waitPhase(bluegreen.InProgress)
		_, err = held.Exec(ctx, "SELECT 1")
		var de *bluegreen.DroppedError
		if !errors.As(err, &de) || de.Addr != blueIP || !pgconn.SafeToRetry(err) {
			t.Errorf("statement on a blue connection in IN_PROGRESS: %v, want a *DroppedError for %s, safe to retry", err, blueIP)
		}
		if v := c.f.Classify(err); v.Reason != "bluegreen-dropped" || !v.Retryable() {
			t.Errorf("classified %v, want transient bluegreen-dropped", v)
		}
		held.Release()
		connect := c.goNewConn(ctx)
		query := make(chan result, 1)
		go func() {
			addr, ssl, err := where(ctx, greenHeld)
			query <- result{addr: addr, ssl: ssl, err: err}
		}()
		acquire := make(chan result, 1)
		go func() {
			conn, err := green.pool.Acquire(ctx) // an idle green connection: held in PrepareConn
			if err != nil {
				acquire <- result{err: err}
				return
			}
			defer conn.Release()
			addr, ssl, err := where(ctx, conn)
			acquire <- result{addr: addr, ssl: ssl, err: err}
		}()
		c.waitWaiting(1)
		green.waitWaiting(2)
		pending(connect)
		pending(query)
		pending(acquire)

		// POST: everything held goes on; the blue name now leads to green.
		set(t, d, fake.StatusPostProcessing)
		expectAddr(t, "held new connection", <-connect, greenIP)
		expectAddr(t, "held statement", <-query, greenIP)
		expectAddr(t, "held acquire", <-acquire, greenIP)
		greenHeld.Release()
		st = c.waitPhase(bluegreen.Post)
		if st.Dropped < 1 {
			t.Errorf("Dropped = %d, want the blue connections counted", st.Dropped)
		}
		if c.pool.Stat().TotalConns() > 0 {
			for _, conn := range c.pool.AcquireAllIdle(ctx) {
				if addr, _, err := where(ctx, conn); err != nil || addr != greenIP {
					t.Errorf("after IN_PROGRESS the pool holds a connection to %s (%v)", addr, err)
				}
				conn.Release()
			}
		}
		expectAddr(t, "POST blue name", c.newConn(ctx), greenIP)
		expectAddr(t, "POST green name before the rename", green.newConn(ctx), greenIP)

		// Green takes the blue names: new connections to green names are rejected.
		if err := d.Rename(ctx); err != nil {
			t.Fatal(err)
		}
		green.waitFor("green topology changed", func(s bluegreen.Status) bool { return s.GreenTopologyChanged })
		c.waitFor("green topology changed", func(s bluegreen.Status) bool { return s.GreenTopologyChanged })
		r := green.newConn(ctx)
		var re *bluegreen.RejectError
		if !errors.As(r.err, &re) || re.Host != d.Names.GreenCluster {
			t.Errorf("POST green connection: %v, want a *RejectError", r.err)
		}
		if r.took > 5*time.Second {
			t.Errorf("rejection took %v; it must not wait", r.took)
		}

		// DNS catches up, then COMPLETED ends the switchover.
		d.SwapDNS()
		c.waitFor("blue DNS updated", func(s bluegreen.Status) bool { return s.BlueDNSUpdated })
		expectAddr(t, "blue name after blue DNS update", c.newConn(ctx), greenIP)
		d.RemoveGreenDNS()
		c.waitFor("green DNS removed", func(s bluegreen.Status) bool { return s.GreenDNSRemoved })
		set(t, d, fake.StatusCompleted)
		st = c.waitFor("the switchover to end", func(s bluegreen.Status) bool { return s.LastSummary != nil })
		sum := st.LastSummary
		t.Logf("summary:\n%s", sum)
		if sum.Outcome != bluegreen.OutcomeCompleted || st.Generation != 1 || !st.Routing.Normal {
			t.Errorf("outcome %v, generation %d, routing %+v; want COMPLETED, 1, normal", sum.Outcome, st.Generation, st.Routing)
		}
		wantOrder(t, sum.Events, "CREATED", "PREPARATION", "IN_PROGRESS", "Blue connections dropped", "POST",
			"Green topology changed", "Blue DNS updated", "Green DNS removed", "COMPLETED", "Routing normal")
		log := c.logs.String()
		for _, want := range []string{"Blue/Green Deployment switchover COMPLETED", "time offset (ms)", "IN_PROGRESS"} {
			if !strings.Contains(log, want) {
				t.Errorf("log lacks %q:\n%s", want, log)
			}
		}
		expectAddr(t, "after the switchover", c.newConn(ctx), greenIP)

		// Monitoring restarted: the next deployment is seen.
		if err := d.DropSource(ctx); err != nil {
			t.Fatal(err)
		}
		set(t, d, "")
		c.waitFor("the metadata gone", func(s bluegreen.Status) bool { return s.Phase == bluegreen.NotCreated })
		set(t, d, fake.StatusAvailable)
		c.waitFor("both monitors reading the next deployment from green", func(s bluegreen.Status) bool {
			if s.Phase != bluegreen.Created || s.Generation != 1 {
				return false
			}
			for _, m := range s.Monitors {
				if !m.Connected || m.Addr != greenIP || m.Observation != "rows" {
					return false
				}
			}
			return true
		})
	})

	t.Run("instance endpoint, metadata with cluster endpoints only", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		// The metadata names only the cluster endpoints; the instances come
		// from aurora_replica_status() on each side.
		d, err := env.NewDeployment(ctx, fake.DeploymentConfig{ClusterEndpointsOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Drop(context.Background()) })
		set(t, d, fake.StatusAvailable)
		c := newClient(t, d, d.Names.Instance, fastConfig())
		st := c.waitFor("the instances mapped", func(s bluegreen.Status) bool {
			for _, m := range s.Mapping {
				if m.Blue == d.Names.Instance && m.Green == d.Names.GreenInstance && m.BlueAddr == blueIP && m.GreenAddr == greenIP {
					return true
				}
			}
			return false
		})
		if !st.Monitors[0].Topology || !st.Monitors[1].Topology {
			t.Errorf("monitors %+v: want both reading the topology", st.Monitors)
		}
		expectAddr(t, "CREATED instance", c.newConn(ctx), blueIP)
		held, err := c.pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		set(t, d, fake.StatusInitiated)
		c.waitSubstituted(d.Names.Instance, blueIP)
		set(t, d, fake.StatusInProgress)
		c.waitPhase(bluegreen.InProgress)
		_, err = held.Exec(ctx, "SELECT 1")
		var de *bluegreen.DroppedError
		if !errors.As(err, &de) || de.Addr != blueIP {
			t.Errorf("statement on the instance connection in IN_PROGRESS: %v, want a *DroppedError for %s", err, blueIP)
		}
		held.Release()
		connect := c.goNewConn(ctx)
		c.waitWaiting(1)
		pending(connect)
		set(t, d, fake.StatusPostProcessing)
		expectAddr(t, "held instance connection", <-connect, greenIP)
		expectAddr(t, "POST instance", c.newConn(ctx), greenIP)
		if err := d.Rename(ctx); err != nil {
			t.Fatal(err)
		}
		d.SwapDNS()
		d.RemoveGreenDNS()
		set(t, d, fake.StatusCompleted)
		st = c.waitFor("the switchover to end", func(s bluegreen.Status) bool { return s.LastSummary != nil })
		if st.LastSummary.Outcome != bluegreen.OutcomeCompleted || st.Dropped < 1 || st.TimedOut != 0 {
			t.Errorf("outcome %v, dropped %d, timed out %d; want COMPLETED, the instance connection dropped, no timeout",
				st.LastSummary.Outcome, st.Dropped, st.TimedOut)
		}
		expectAddr(t, "after the switchover", c.newConn(ctx), greenIP)

		// Without the topology function (the old behaviour, or an engine
		// without it): absent, not an error; the metadata is read as
		// before, and the instance is not routed.
		d2, err := env.NewDeployment(ctx, fake.DeploymentConfig{ClusterEndpointsOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d2.Drop(context.Background()) })
		for _, m := range []*fake.Metadata{d2.Blue, d2.Green} {
			if err := m.UninstallTopology(ctx); err != nil {
				t.Fatal(err)
			}
		}
		set(t, d2, fake.StatusAvailable)
		c2 := newClient(t, d2, d2.Names.Instance, fastConfig())
		c2.waitMapped()
		set(t, d2, fake.StatusInitiated)
		st = c2.waitFor("PREPARATION with the cluster pinned", func(s bluegreen.Status) bool {
			return s.Phase == bluegreen.Preparation && hasRoute(s.Routing, d2.Names.Cluster, "substitute")
		})
		if hasRoute(st.Routing, d2.Names.Instance, "substitute") {
			t.Errorf("routing %+v routes the instance without a topology", st.Routing)
		}
		// A monitor shows "waiting" while a poll is in flight: wait for a
		// status where both have read rows.
		st = c2.waitFor("both monitors reading rows", func(s bluegreen.Status) bool {
			for _, m := range s.Monitors {
				if m.Observation != "rows" {
					return false
				}
			}
			return true
		})
		for _, m := range st.Monitors {
			if m.Topology || m.Error != "" {
				t.Errorf("monitor %+v: want rows, no topology, no error", m)
			}
		}
	})

	t.Run("reader endpoint: every blue reader's connections are dropped", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		d, err := env.NewDeployment(ctx, fake.DeploymentConfig{Readers: 2, ClusterEndpointsOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Drop(context.Background()) })
		r1, r2 := env.Blue.ReaderAddr(1), env.Blue.ReaderAddr(2)
		set(t, d, fake.StatusAvailable)
		c := newClient(t, d, d.Names.Reader, fastConfig())
		c.waitMapped()
		// The reader endpoint leads to reader 1, then (round robin) to
		// reader 2: the pool holds a connection to each.
		conns := map[string]*pgxpool.Conn{}
		for _, addr := range []string{r1, r2} {
			env.Resolver.Set(d.Names.Reader, addr)
			conn, err := c.pool.Acquire(ctx) // a new connection: the other one is held
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Release()
			if got := remoteHost(conn); got != addr {
				t.Fatalf("connection through %s to %s, want %s", d.Names.Reader, got, addr)
			}
			conns[addr] = conn
		}
		// At PREPARATION the reader endpoint resolves to reader 2 only.
		c.waitFor("the reader endpoint resolved to reader 2", func(s bluegreen.Status) bool {
			for _, m := range s.Mapping {
				if m.Blue == d.Names.Reader {
					return m.BlueAddr == r2
				}
			}
			return false
		})
		set(t, d, fake.StatusInitiated)
		c.waitPhase(bluegreen.Preparation)
		set(t, d, fake.StatusInProgress)
		st := c.waitPhase(bluegreen.InProgress)
		if strings.Join(st.Routing.DropAddrs, ",") != strings.Join([]string{blueIP, r1, r2}, ",") {
			t.Errorf("dropped addresses %v, want the writer's and both readers' %v", st.Routing.DropAddrs, []string{blueIP, r1, r2})
		}
		for addr, conn := range conns {
			_, err := conn.Exec(ctx, "SELECT 1")
			var de *bluegreen.DroppedError
			if !errors.As(err, &de) || de.Addr != addr {
				t.Errorf("statement on the connection to reader %s in IN_PROGRESS: %v, want a *DroppedError", addr, err)
			}
		}
		// POST: the reader endpoint leads to green's.
		set(t, d, fake.StatusPostProcessing)
		c.waitPhase(bluegreen.Post)
		conn, err := c.pool.Acquire(ctx) // a new connection (the pool has room for it)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Release()
		if got := remoteHost(conn); got != env.Green.ReaderAddr(1) {
			t.Errorf("POST connection through %s to %s, want green's reader %s", d.Names.Reader, got, env.Green.ReaderAddr(1))
		}
	})

	t.Run("blue black-holes connections: DNS is still seen on time", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		d := newDeployment(t, env, fake.Aurora)
		set(t, d, fake.StatusAvailable)
		// Old blue silently drops new connections during IN_PROGRESS: a
		// listener that accepts and never answers, put in front of blue by
		// the pool's dialer (which the monitors use too).
		hole := blackHole(t)
		var holed atomic.Bool
		const ttl = 200 * time.Millisecond
		cfg := fastConfig()
		cfg.MonitorConnectTimeout = 8 * time.Second
		cfg.MonitorQueryTimeout = 8 * time.Second
		c := newClient(t, d, d.Names.Cluster, cfg, func(pc *pgxpool.Config) {
			pc.ConnConfig.LookupFunc = env.Resolver.Cached(ttl).Lookup
			dial := pc.ConnConfig.DialFunc
			pc.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
				if h, _, _ := net.SplitHostPort(addr); holed.Load() && h == blueIP {
					var d net.Dialer
					return d.DialContext(ctx, network, hole)
				}
				return dial(ctx, network, addr)
			}
		})
		c.waitMapped()
		set(t, d, fake.StatusInitiated)
		c.waitPhase(bluegreen.Preparation)
		set(t, d, fake.StatusInProgress)
		c.waitPhase(bluegreen.InProgress)
		// Blue ends the monitor's session; its reconnect goes into the hole.
		holed.Store(true)
		if err := env.Blue.Exec(ctx, "postgres", "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '"+
			d.Database+"' AND application_name = 'holdfast-bluegreen-monitor'"); err != nil {
			t.Fatal(err)
		}
		st := c.waitFor("the blue monitor waiting on its connect", func(s bluegreen.Status) bool {
			return !s.Monitors[0].Connected && s.Monitors[0].Observation == "waiting"
		})
		connects := st.Monitors[0].Connects
		connect := c.goNewConn(ctx)
		c.waitWaiting(1)
		pending(connect)

		// DNS moves while the monitor's connect hangs.
		swapped := time.Now()
		d.SwapDNS()
		r := <-connect
		released := time.Since(swapped)
		expectAddr(t, "held connection released by the DNS update", r, greenIP)
		st = c.r.Status()
		t.Logf("released %v after the DNS change (HighInterval %v, DNS TTL %v); the monitor's connect would have returned after up to %v",
			released.Round(time.Millisecond), cfg.HighInterval, ttl, cfg.MonitorConnectTimeout)
		// Before, the blue monitor resolved only after its connect
		// returned: up to MonitorConnectTimeout (8 s) after it began. Now
		// the release follows the DNS change by about HighInterval plus the
		// TTL (bounded generously for a loaded machine), while the connect
		// is still hanging.
		if bound := cfg.HighInterval + ttl + 1500*time.Millisecond; released > bound {
			t.Errorf("released %v after the DNS change, want at most %v", released, bound)
		}
		if m := st.Monitors[0]; m.Connected || m.Connects != connects {
			t.Errorf("blue monitor %+v: want it still waiting on the connect it began before the DNS change", m)
		}
		wantOrder(t, st.Timeline, "IN_PROGRESS", "Blue DNS updated", "Traffic released on blue DNS update")
	})

	t.Run("rollback, RDS", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		d := newDeployment(t, env, fake.RDS)
		set(t, d, fake.StatusAvailable)
		c := newClient(t, d, d.Names.Instance, fastConfig())
		if st := c.waitMapped(); st.Mapping[0].Green != d.Names.GreenInstance {
			t.Errorf("mapping %+v, want %s -> %s", st.Mapping, d.Names.Instance, d.Names.GreenInstance)
		}
		set(t, d, fake.StatusInitiated)
		c.waitPhase(bluegreen.Preparation)
		set(t, d, fake.StatusInProgress)
		if st := c.waitPhase(bluegreen.InProgress); st.Engine != bluegreen.EngineRDS {
			t.Errorf("engine = %v, want rds", st.Engine)
		}
		connect := c.goNewConn(ctx)
		c.waitWaiting(1)

		// Blue going back is not a rollback, nor is a failed green read.
		if err := d.Blue.SetRows(ctx, d.Rows(fake.StatusAvailable)...); err != nil {
			t.Fatal(err)
		}
		c.waitFor("blue reads AVAILABLE", func(s bluegreen.Status) bool { return s.Monitors[0].Status == fake.StatusAvailable })
		if err := d.Green.Fail(ctx, "An error occurred while retrieving the blue/green fast switchover metadata"); err != nil {
			t.Fatal(err)
		}
		c.waitFor("green read failing", func(s bluegreen.Status) bool { return s.Monitors[1].Observation == "failed" })
		if st := c.r.Status(); st.Phase != bluegreen.InProgress || st.LastSummary != nil {
			t.Fatalf("phase %v, summary %v: blue going back or a failed read was taken for a rollback", st.Phase, st.LastSummary)
		}
		pending(connect)
		if err := d.Green.Fail(ctx, ""); err != nil {
			t.Fatal(err)
		}

		// Green going back is.
		set(t, d, fake.StatusAvailable)
		expectAddr(t, "held connection after the rollback", <-connect, blueIP)
		st := c.waitFor("the rollback", func(s bluegreen.Status) bool { return s.LastSummary != nil })
		if st.LastSummary.Outcome != bluegreen.OutcomeRolledBack || !st.Routing.Normal || st.Generation != 1 {
			t.Errorf("summary %v, routing %+v, generation %d; want ROLLED BACK, normal, 1", st.LastSummary.Outcome, st.Routing, st.Generation)
		}
		wantOrder(t, st.LastSummary.Events, "PREPARATION", "IN_PROGRESS", "CREATED (rollback)", "ROLLED BACK", "Routing normal")
		if !strings.Contains(c.logs.String(), "Blue/Green Deployment switchover ROLLED BACK") {
			t.Errorf("log lacks the ROLLED BACK summary:\n%s", c.logs.String())
		}
		c.waitPhase(bluegreen.Created)
		expectAddr(t, "after the rollback", c.newConn(ctx), blueIP)
	})

	t.Run("DNS flips before POST", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		d := newDeployment(t, env, fake.Aurora)
		set(t, d, fake.StatusAvailable)
		c := newClient(t, d, d.Names.Cluster, fastConfig())
		c.waitMapped()
		set(t, d, fake.StatusInitiated)
		c.waitPhase(bluegreen.Preparation)
		set(t, d, fake.StatusInProgress)
		c.waitPhase(bluegreen.InProgress)
		connect := c.goNewConn(ctx)
		c.waitWaiting(1)
		pending(connect)

		d.SwapDNS() // still IN_PROGRESS
		expectAddr(t, "held connection released by the DNS update", <-connect, greenIP)
		st := c.r.Status()
		if st.Phase != bluegreen.InProgress || !st.BlueDNSUpdated || st.Routing.Phase != bluegreen.Post {
			t.Errorf("phase %v, blue DNS updated %v, routing phase %v; want IN_PROGRESS, true, POST", st.Phase, st.BlueDNSUpdated, st.Routing.Phase)
		}
		for _, m := range st.Mapping {
			if m.Blue == d.Names.Cluster && m.BlueAddr != blueIP {
				t.Errorf("start address of %s rewritten to %q by the DNS change, want %s", m.Blue, m.BlueAddr, blueIP)
			}
		}
		wantOrder(t, st.Timeline, "IN_PROGRESS", "Blue DNS updated", "Traffic released on blue DNS update")

		set(t, d, fake.StatusPostProcessing)
		d.RemoveGreenDNS()
		set(t, d, fake.StatusCompleted)
		st = c.waitFor("the switchover to end", func(s bluegreen.Status) bool { return s.LastSummary != nil })
		if st.LastSummary.Outcome != bluegreen.OutcomeCompleted {
			t.Errorf("outcome %v, want COMPLETED", st.LastSummary.Outcome)
		}
		if r := c.newConn(ctx); r.err != nil || r.addr != greenIP {
			j, _ := json.MarshalIndent(c.r.Status(), "", "  ")
			t.Errorf("after the switchover: %v %v\n%s\n%s", r.addr, r.err, j, c.logs.String())
		}
	})

	t.Run("stuck in IN_PROGRESS: the timer releases traffic", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		d := newDeployment(t, env, fake.Aurora)
		set(t, d, fake.StatusAvailable)
		cfg := fastConfig()
		cfg.SwitchoverTimeout = 3 * time.Second
		c := newClient(t, d, d.Names.Cluster, cfg)
		c.waitMapped()
		set(t, d, fake.StatusInitiated)
		c.waitPhase(bluegreen.Preparation)
		set(t, d, fake.StatusInProgress)
		c.waitPhase(bluegreen.InProgress)
		connect := c.goNewConn(ctx)
		st := c.waitFor("the connection held, or the timer", func(s bluegreen.Status) bool { return s.Waiting >= 1 || s.LastSummary != nil })
		if st.LastSummary != nil {
			t.Fatal("the timer expired before the test could hold a connection; the machine is too slow for this test")
		}
		r := <-connect // nothing changes in the metadata: only the timer can release it
		expectAddr(t, "connection released by the timer", r, blueIP)
		st = c.waitFor("the timeout summary", func(s bluegreen.Status) bool { return s.LastSummary != nil })
		if st.LastSummary.Outcome != bluegreen.OutcomeTimedOut || !st.Routing.Normal || !st.Stale {
			t.Errorf("outcome %v, routing %+v, stale %v; want TIMED OUT, normal, stale", st.LastSummary.Outcome, st.Routing, st.Stale)
		}
		wantOrder(t, st.LastSummary.Events, "PREPARATION", "IN_PROGRESS", "Switchover timer expired", "Routing normal")
		c.waitPolled(fake.StatusInProgress)
		expectAddr(t, "while the metadata is still stuck", c.newConn(ctx), blueIP)
		if st := c.r.Status(); !st.Routing.Normal || st.Phase != bluegreen.Created {
			t.Errorf("phase %v, routing %+v after the timer while the metadata is stuck; want CREATED, normal", st.Phase, st.Routing)
		}
		set(t, d, fake.StatusAvailable)
		c.waitFor("the stale flag cleared", func(s bluegreen.Status) bool { return !s.Stale })
	})

	t.Run("bounded waits", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		d := newDeployment(t, env, fake.Aurora)
		set(t, d, fake.StatusAvailable)
		cfg := fastConfig()
		const bound = 300 * time.Millisecond
		cfg.ConnectTimeout = bound
		c := newClient(t, d, d.Names.Cluster, cfg)
		green := newClient(t, d, d.Names.GreenCluster, cfg)
		greenHeld, err := green.pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer greenHeld.Release()
		if r := green.newConn(ctx); r.err != nil { // leaves an idle green connection
			t.Fatal(r.err)
		}
		set(t, d, fake.StatusInitiated)
		set(t, d, fake.StatusInProgress)
		c.waitPhase(bluegreen.InProgress)
		green.waitPhase(bluegreen.InProgress)

		// A new connection (BeforeConnect, which pgxpool runs without the
		// caller's cancellation): ConnectTimeout bounds it.
		start := time.Now()
		conn, err := c.pool.Acquire(ctx)
		if err == nil {
			conn.Release()
		}
		expectSuspended(t, "new connection", err, "connect", time.Since(start), bound)
		if v := c.f.Classify(err); v.Class != classify.Transient || v.Reason != "bluegreen-suspended" {
			t.Errorf("factory classifies %v, want transient bluegreen-suspended", v)
		}
		if v := classify.Classify(err); !v.Retryable() {
			t.Errorf("built-in rules classify %v, want transient", v)
		}
		// Through Factory.Acquire the transient error is retried, and still bounded.
		start = time.Now()
		_, err = c.f.Acquire(ctx, c.pool)
		if took := time.Since(start); !errors.As(err, new(*bluegreen.SuspendError)) || took < bound || took > 20*time.Second {
			t.Errorf("Factory.Acquire = %v after %v, want a bounded *SuspendError", err, took)
		}

		// An idle green connection at Acquire (PrepareConn): the bound, or
		// the caller's shorter deadline.
		if idle := green.pool.Stat().IdleConns(); idle == 0 {
			t.Fatal("no idle green connection to acquire")
		}
		start = time.Now()
		_, err = green.pool.Acquire(ctx)
		expectSuspended(t, "acquire", err, "acquire", time.Since(start), bound)
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		start = time.Now()
		_, err = green.pool.Acquire(short)
		cancel()
		var se *bluegreen.SuspendError
		if took := time.Since(start); !errors.As(err, &se) || !errors.Is(err, context.DeadlineExceeded) || took >= bound {
			t.Errorf("acquire with a 50ms deadline: %v after %v, want the caller's deadline before the bound", err, took)
		}

		// A statement on an acquired green connection (the query tracer).
		start = time.Now()
		_, err = greenHeld.Exec(ctx, "SELECT 1")
		expectSuspended(t, "statement", err, "query", time.Since(start), bound)
		if !pgconn.SafeToRetry(err) {
			t.Errorf("a held statement's error is not SafeToRetry: %v", err)
		}
		if st := green.r.Status(); st.TimedOut < 2 {
			t.Errorf("TimedOut = %d, want at least 2", st.TimedOut)
		}

		// After the switchover moves on, the same connection works.
		set(t, d, fake.StatusPostProcessing)
		green.waitPhase(bluegreen.Post)
		if addr, _, err := where(ctx, greenHeld); err != nil || addr != greenIP {
			t.Errorf("after POST the held connection gives %q, %v", addr, err)
		}
	})

	t.Run("green connections rejected during POST", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		d := newDeployment(t, env, fake.RDS)
		set(t, d, fake.StatusAvailable)
		green := newClient(t, d, d.Names.GreenInstance, fastConfig())
		green.waitMapped()
		for _, s := range []string{fake.StatusInitiated, fake.StatusInProgress, fake.StatusPostProcessing} {
			set(t, d, s)
		}
		green.waitPhase(bluegreen.Post)
		expectAddr(t, "green name before the rename", green.newConn(ctx), greenIP)
		if err := d.Rename(ctx); err != nil {
			t.Fatal(err)
		}
		st := green.waitFor("green topology changed", func(s bluegreen.Status) bool { return s.GreenTopologyChanged })
		if !hasRoute(st.Routing, d.Names.GreenInstance, "reject") {
			t.Errorf("routing %+v, want %s rejected", st.Routing, d.Names.GreenInstance)
		}
		for range 3 {
			r := green.newConn(ctx)
			var re *bluegreen.RejectError
			if !errors.As(r.err, &re) {
				t.Fatalf("new green connection: %v, want a *RejectError", r.err)
			}
			if v := green.f.Classify(r.err); v.Retryable() {
				t.Errorf("rejection classified %v, want fatal", v)
			}
		}
		if st := green.r.Status(); st.Rejected < 3 || st.Waiting != 0 {
			t.Errorf("rejected %d, waiting %d; want 3 and 0", st.Rejected, st.Waiting)
		}
		d.RemoveGreenDNS()
		green.waitFor("green DNS removed", func(s bluegreen.Status) bool { return s.GreenDNSRemoved })
		r := green.newConn(ctx)
		var dnsErr *net.DNSError
		if !errors.As(r.err, &dnsErr) || !dnsErr.IsNotFound {
			t.Errorf("green name after its DNS was removed: %v, want a DNS failure, not a rejection", r.err)
		}
	})

	t.Run("verify-full checks the host name under IP substitution", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		d := newDeployment(t, env, fake.Aurora)
		// The certificate names the RDS host names only: connecting to the
		// address itself with verify-full must fail.
		cfg, err := pgx.ParseConfig(d.DSN(blueIP))
		if err != nil {
			t.Fatal(err)
		}
		cfg.DialFunc = env.Dial // the simulator's addresses, in either of its modes
		_, err = pgx.ConnectConfig(ctx, cfg)
		var hostErr x509.HostnameError
		if !errors.As(err, &hostErr) {
			t.Fatalf("verify-full to %s: %v, want an x509.HostnameError", blueIP, err)
		}
		// Through the host name with its address substituted, it works.
		set(t, d, fake.StatusAvailable)
		c := newClient(t, d, d.Names.Cluster, fastConfig())
		c.waitPhase(bluegreen.Created)
		set(t, d, fake.StatusInitiated)
		c.waitSubstituted(d.Names.Cluster, blueIP)
		env.Resolver.Fail(d.Names.Cluster)
		defer env.Resolver.Set(d.Names.Cluster, blueIP)
		expectAddr(t, "substituted, verify-full", c.newConn(ctx), blueIP)
	})

	t.Run("monitors ignore target_session_attrs and reconnect", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		d := newDeployment(t, env, fake.Aurora)
		// Green is read-only, as it is before a switchover: a monitor that
		// inherited target_session_attrs=read-write could not read it.
		if err := env.Green.Exec(ctx, "postgres", "ALTER DATABASE "+d.Database+" SET default_transaction_read_only = on"); err != nil {
			t.Fatal(err)
		}
		set(t, d, fake.StatusAvailable)
		cfg, err := d.PoolConfig(d.Names.Cluster, "target_session_attrs=read-write")
		if err != nil {
			t.Fatal(err)
		}
		c := fastConfig()
		c.Logger = slog.New(slog.DiscardHandler)
		f, err := holdfast.New(holdfast.WithBlueGreen(c))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		pool, err := f.NewPool(ctx, cfg) // its first connection starts the monitors
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		r := f.BlueGreen(pool)
		onBoth := func(s bluegreen.Status) bool {
			return s.Monitors[0].Addr == blueIP && s.Monitors[1].Addr == greenIP &&
				s.Monitors[0].Observation == "rows" && s.Monitors[1].Observation == "rows"
		}
		st := waitStatus(t, r, "monitors on blue and green", onBoth)
		before := []int{st.Monitors[0].Connects, st.Monitors[1].Connects}

		// Their connections break: they reconnect, through the factory's
		// dial (the pool's DialFunc) and the pool's resolver.
		for _, srv := range []*fake.Server{env.Blue, env.Green} {
			if err := srv.Exec(ctx, "postgres", "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '"+
				d.Database+"' AND application_name = 'holdfast-bluegreen-monitor'"); err != nil {
				t.Fatal(err)
			}
		}
		waitStatus(t, r, "monitors reconnected", func(s bluegreen.Status) bool {
			return onBoth(s) && s.Monitors[0].Connects > before[0] && s.Monitors[1].Connects > before[1]
		})
		f.Close() // stops the pool's router
		if st := r.Status(); !st.Closed || !st.Routing.Normal {
			t.Errorf("after Close: closed %v, routing %+v", st.Closed, st.Routing)
		}
	})

	t.Run("metadata observations are kept apart", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		d := newDeployment(t, env, fake.Aurora)
		for _, m := range []*fake.Metadata{d.Blue, d.Green} {
			if err := m.Uninstall(ctx); err != nil {
				t.Fatal(err)
			}
		}
		c := newClient(t, d, d.Names.Cluster, fastConfig())
		c.waitFor("absent", func(s bluegreen.Status) bool { return s.Monitors[0].Observation == "absent" })
		for _, srv := range []*fake.Server{env.Blue, env.Green} {
			if _, err := fake.Install(ctx, srv.DSN(d.Database), fake.Aurora); err != nil {
				t.Fatal(err)
			}
		}
		c.waitFor("empty", func(s bluegreen.Status) bool { return s.Monitors[0].Observation == "empty" })
		if st := c.r.Status(); st.Phase != bluegreen.NotCreated || !st.Routing.Normal {
			t.Errorf("phase %v, routing %+v; want NOT_CREATED, normal", st.Phase, st.Routing)
		}
		// Statuses and roles in any case; an unknown version is read as 1.0.
		rows := d.Rows("available")
		for i := range rows {
			rows[i].Role = strings.ToLower(rows[i].Role)
			rows[i].Version = "2.0"
		}
		for _, m := range []*fake.Metadata{d.Blue, d.Green} {
			if err := m.SetRows(ctx, rows...); err != nil {
				t.Fatal(err)
			}
		}
		c.waitPhase(bluegreen.Created)
		// A failed query changes nothing.
		if err := d.Blue.Fail(ctx, "boom"); err != nil {
			t.Fatal(err)
		}
		c.waitFor("failed", func(s bluegreen.Status) bool { return s.Monitors[0].Observation == "failed" })
		// An unknown status changes nothing either.
		for i := range rows {
			rows[i].Status = "SWITCHOVER_SOMETHING_NEW"
		}
		if err := d.Green.SetRows(ctx, rows...); err != nil {
			t.Fatal(err)
		}
		c.waitFor("the unknown status read", func(s bluegreen.Status) bool { return s.Monitors[1].Status == "SWITCHOVER_SOMETHING_NEW" })
		if st := c.r.Status(); st.Phase != bluegreen.Created || !st.Routing.Normal {
			t.Errorf("phase %v, routing %+v after a failed read and an unknown status; want CREATED, normal", st.Phase, st.Routing)
		}
		log := c.logs.String()
		for _, want := range []string{"unknown metadata version", "unknown metadata status"} {
			if !strings.Contains(log, want) {
				t.Errorf("log lacks %q:\n%s", want, log)
			}
		}
	})
}

// blackHole returns the address of a listener that accepts connections and
// never answers, as a server that silently drops them; it is closed, with
// what it accepted, when the test ends.
func blackHole(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

// remoteHost is the address a pooled connection is connected to, as the
// simulator presents it (a reader's own address).
func remoteHost(c *pgxpool.Conn) string {
	h, _, _ := net.SplitHostPort(c.Conn().PgConn().Conn().RemoteAddr().String())
	return h
}

func waitStatus(t *testing.T, r bluegreen.Router, what string, cond func(bluegreen.Status) bool) bluegreen.Status {
	t.Helper()
	c := &client{t: t, r: r}
	return c.waitFor(what, cond)
}

func hasRoute(r bluegreen.Routing, host, action string) bool {
	for _, rt := range r.Routes {
		if rt.Host == host && rt.Action == action {
			return true
		}
	}
	return false
}

func expectSuspended(t *testing.T, what string, err error, op string, took, bound time.Duration) {
	t.Helper()
	var se *bluegreen.SuspendError
	if !errors.As(err, &se) || se.Op != op || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("%s: %v, want a *SuspendError (op %s) wrapping context.DeadlineExceeded", what, err, op)
		return
	}
	if took < bound || se.Waited < bound {
		t.Errorf("%s: returned after %v (waited %v), before the bound %v", what, took, se.Waited, bound)
	}
	if took > 20*time.Second {
		t.Errorf("%s: returned after %v, far past the bound %v", what, took, bound)
	}
}

func wantOrder(t *testing.T, events []bluegreen.Event, names ...string) {
	t.Helper()
	i := 0
	var got []string
	for _, e := range events {
		got = append(got, e.Name)
		if i < len(names) && e.Name == names[i] {
			i++
		}
	}
	if i < len(names) {
		t.Errorf("timeline %q lacks %q in order", got, names)
	}
}
