package bluegreentest_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/fakes"
	fake "github.com/holdfast-db/holdfast/fakes/bluegreentest"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/jackc/pgx/v5"
)

// TestAurora checks what an Aurora deployment publishes for a
// topology-aware client, and that holdfast's failover monitor runs on it.
func TestAurora(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a blue/green deployment of real servers: skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel) // the parallel subtests run after this function returns
	env, err := fake.Start(ctx, fake.Config{TLS: true})
	if errors.Is(err, fake.ErrNotFound) && os.Getenv(pgtest.EnvRequire) != "1" {
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
	t.Run("instance identifier", func(t *testing.T) {
		t.Parallel()
		testInstanceIdentifier(ctx, t, env)
	})
	t.Run("failover monitor", func(t *testing.T) {
		t.Parallel()
		testFailoverMonitor(ctx, t, env)
	})
}

// testInstanceIdentifier reads aurora_db_instance_identifier() on both
// servers, directly and by the instance endpoints a client derives from
// the topology ("<server_id>.<domain>"), before and after Rename and
// SwapDNS: each server names itself as its topology names its writer.
func testInstanceIdentifier(ctx context.Context, t *testing.T, env *fake.Env) {
	d, err := env.NewDeployment(ctx, fake.DeploymentConfig{Name: "ident", Readers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Drop(context.Background())
	n := d.Names
	id := func(host string) string { return strings.SplitN(host, ".", 2)[0] }
	_, domain, _ := strings.Cut(n.Instance, ".")

	// self connects to the deployment's database by dsn (through the
	// fake DNS and dialer) and returns the server's identifier, the
	// writer its topology names, and the address it reached.
	self := func(dsn string) (ident, writer, addr string) {
		t.Helper()
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		cfg.LookupFunc, cfg.DialFunc = env.Resolver.Lookup, env.Dial
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatalf("%s: %v", cfg.Host, err)
		}
		defer conn.Close(ctx)
		// The monitor's query (internal/topology.Self), unqualified.
		if err := conn.QueryRow(ctx, "SELECT lower(aurora_db_instance_identifier())").Scan(&ident); err != nil {
			t.Fatalf("%s: aurora_db_instance_identifier(): %v", cfg.Host, err)
		}
		rows, err := conn.Query(ctx, "SELECT server_id, session_id, last_update_timestamp, replica_lag_in_msec FROM "+fake.TopologyFunction+"()")
		if err != nil {
			t.Fatalf("%s: %v", cfg.Host, err)
		}
		for rows.Next() {
			var sid, session string
			var updated time.Time
			var lag *float32
			if err := rows.Scan(&sid, &session, &updated, &lag); err != nil {
				t.Fatal(err)
			}
			if updated.IsZero() {
				t.Errorf("%s: row %s without last_update_timestamp", cfg.Host, sid)
			}
			if session == fake.WriterSessionID {
				if writer != "" {
					t.Errorf("%s: two writers, %s and %s", cfg.Host, writer, sid)
				}
				writer = sid
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return ident, writer, conn.PgConn().Conn().RemoteAddr().String()
	}
	addrOf := func(s *fake.Server) string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }
	type want struct {
		dsn   string
		ident string
		addr  string // "": not checked (a direct connection)
		name  string
	}
	check := func(step string, cases []want) {
		t.Helper()
		for _, c := range cases {
			ident, writer, addr := self(c.dsn)
			if ident != c.ident || writer != ident {
				t.Errorf("%s, %s: aurora_db_instance_identifier() %q, topology's writer %q; want both %q", step, c.name, ident, writer, c.ident)
			}
			if c.addr != "" && addr != c.addr {
				t.Errorf("%s, %s: reached %s, want %s", step, c.name, addr, c.addr)
			}
		}
	}

	// Before the switchover: blue is blue's writer, green green's; each
	// instance endpoint leads to its server.
	check("before Rename", []want{
		{name: "blue (direct)", dsn: env.Blue.DSN(d.Database), ident: id(n.Instance)},
		{name: "green (direct)", dsn: env.Green.DSN(d.Database), ident: id(n.GreenInstance)},
		{name: "by " + n.Instance, dsn: d.DSN(id(n.Instance) + "." + domain), ident: id(n.Instance), addr: addrOf(env.Blue)},
		{name: "by " + n.GreenInstance, dsn: d.DSN(n.GreenInstance), ident: id(n.GreenInstance), addr: addrOf(env.Green)},
		{name: "by " + n.Cluster, dsn: d.DSN(n.Cluster), ident: id(n.Instance), addr: addrOf(env.Blue)},
	})
	if got, err := d.Blue.InstanceID(ctx); err != nil || got != id(n.Instance) {
		t.Errorf("Blue.InstanceID() = %q, %v; want %q", got, err, id(n.Instance))
	}

	// Rename: green answers the blue identifier, old blue the -old1 one;
	// the blue instance name still leads to old blue until SwapDNS.
	if err := d.Rename(ctx); err != nil {
		t.Fatal(err)
	}
	check("after Rename", []want{
		{name: "blue (direct)", dsn: env.Blue.DSN(d.Database), ident: id(n.OldInstance)},
		{name: "green (direct)", dsn: env.Green.DSN(d.Database), ident: id(n.Instance)},
		{name: "by " + n.Instance + " (DNS not swapped)", dsn: d.DSN(n.Instance), ident: id(n.OldInstance), addr: addrOf(env.Blue)},
	})
	d.SwapDNS()
	d.RemoveGreenDNS()
	check("after SwapDNS", []want{
		{name: "by " + n.Instance, dsn: d.DSN(n.Instance), ident: id(n.Instance), addr: addrOf(env.Green)},
		{name: "by " + n.OldInstance, dsn: d.DSN(n.OldInstance), ident: id(n.OldInstance), addr: addrOf(env.Blue)},
		{name: "by " + n.Cluster, dsn: d.DSN(n.Cluster), ident: id(n.Instance), addr: addrOf(env.Green)},
	})
	if got, err := d.Green.InstanceID(ctx); err != nil || got != id(n.Instance) {
		t.Errorf("Green.InstanceID() = %q, %v; want %q", got, err, id(n.Instance))
	}

	// Set by hand, and gone with the topology.
	if err := d.Blue.SetInstanceID(ctx, ""); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, env.Blue.DSN(d.Database))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var null *string
	if err := conn.QueryRow(ctx, "SELECT "+fake.InstanceIDFunction+"()").Scan(&null); err != nil || null != nil {
		t.Errorf("after SetInstanceID(\"\"): %v, %v; want NULL", null, err)
	}
	if err := d.Blue.UninstallTopology(ctx); err != nil {
		t.Fatal(err)
	}
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT to_regprocedure($1) IS NOT NULL", fake.InstanceIDFunction+"()").Scan(&exists); err != nil || exists {
		t.Errorf("after UninstallTopology %s() exists: %v, %v", fake.InstanceIDFunction, exists, err)
	}

	// RDS has neither function.
	rds, err := env.NewDeployment(ctx, fake.DeploymentConfig{Name: "ident-rds", Engine: fake.RDS})
	if err != nil {
		t.Fatal(err)
	}
	defer rds.Drop(context.Background())
	rc, err := pgx.Connect(ctx, env.Blue.DSN(rds.Database))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close(ctx)
	if err := rc.QueryRow(ctx, "SELECT to_regprocedure($1) IS NOT NULL", fake.InstanceIDFunction+"()").Scan(&exists); err != nil || exists {
		t.Errorf("an RDS deployment has %s(): %v, %v", fake.InstanceIDFunction, exists, err)
	}
}

// testFailoverMonitor runs a holdfast pool with blue/green routing and
// writer-failover routing on one deployment, with no switchover: the
// failover monitor reads the topology, learns blue's writer and stays on
// one connection (it reconnected 117 times in 20 s when the simulator
// lacked aurora_db_instance_identifier()).
func testFailoverMonitor(ctx context.Context, t *testing.T, env *fake.Env) {
	d, err := env.NewDeployment(ctx, fake.DeploymentConfig{Name: "monitor"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Drop(context.Background())
	if err := d.CreateRole(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	if err := d.SetStatus(ctx, fake.StatusAvailable); err != nil {
		t.Fatal(err)
	}
	var logs fakes.LogBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	f, err := holdfast.New(holdfast.WithBlueGreen(bluegreen.Config{Logger: logger}), holdfast.WithFailover(failover.Config{}),
		holdfast.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := d.RolePoolConfig(d.Names.Cluster, "app", "pool_max_conns=2")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	pool, err := f.NewPool(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	mon := f.Failover(pool)
	if mon == nil {
		t.Fatal("Factory.Failover(pool) is nil: no failover monitor for the pool")
	}
	defer func() {
		if t.Failed() {
			t.Logf("holdfast's log:\n%s", logs.String())
		}
	}()

	wantWriter := strings.SplitN(d.Names.Instance, ".", 2)[0]
	wantAddr := net.JoinHostPort(env.Blue.Host, strconv.Itoa(env.Blue.Port))
	// A workload meanwhile, as a service's, and the monitor's status
	// every 100 ms for 4 s.
	var st failover.Status
	learned := time.Duration(0)
	for time.Since(start) < 4*time.Second {
		var one int
		if err := pool.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
			t.Fatalf("query after %v: %v", time.Since(start).Round(time.Millisecond), err)
		}
		st = mon.Status()
		if learned == 0 && st.Writer == wantWriter {
			learned = time.Since(start)
		}
		time.Sleep(100 * time.Millisecond)
	}
	st = mon.Status()
	t.Logf("after %v: writer %q at %s (learned after %v), routing %s, off %q, error %q, %d monitor connections, events %+v",
		time.Since(start).Round(time.Millisecond), st.Writer, st.WriterAddr, learned.Round(time.Millisecond), st.Routing, st.Off, st.Error,
		st.MonitorConnects, st.Events)
	if st.Writer != wantWriter || st.WriterAddr != wantAddr {
		t.Errorf("monitor's writer %q at %s, want %q at %s (blue's writer)", st.Writer, st.WriterAddr, wantWriter, wantAddr)
	}
	if st.Routing != "normal" || st.Off != "" || st.Failovers != 0 || st.Writer == "" {
		t.Errorf("monitor: routing %s, off %q, %d failovers, writer %q; want normal, on, none, a writer", st.Routing, st.Off, st.Failovers, st.Writer)
	}
	if st.MonitorConnects > 5 {
		t.Errorf("the failover monitor opened %d connections in %v, want at most 5 (a reconnect storm)", st.MonitorConnects, time.Since(start).Round(time.Millisecond))
	}
	if bg := f.BlueGreen(pool).Status(); bg.Phase != bluegreen.Created {
		t.Errorf("blue/green phase %s, want CREATED", bg.Phase)
	}
}
