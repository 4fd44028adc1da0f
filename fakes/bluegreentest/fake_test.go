package bluegreentest_test

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	fake "github.com/holdfast-db/holdfast/fakes/bluegreentest"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestResolver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name      string
		setup     func(r *fake.Resolver)
		host      string
		want      string
		notFound  bool
		temporary bool
	}{
		{name: "set", setup: func(r *fake.Resolver) { r.Set("a.example", "10.0.0.1") }, host: "a.example", want: "10.0.0.1"},
		{name: "case and trailing dot", setup: func(r *fake.Resolver) { r.Set("A.Example.", "10.0.0.1") }, host: "a.EXAMPLE", want: "10.0.0.1"},
		{name: "replaced", setup: func(r *fake.Resolver) { r.Set("a", "1.1.1.1"); r.Set("a", "2.2.2.2") }, host: "a", want: "2.2.2.2"},
		{name: "unknown", setup: func(*fake.Resolver) {}, host: "nope", notFound: true},
		{name: "removed", setup: func(r *fake.Resolver) { r.Set("a", "1.1.1.1"); r.Remove("a") }, host: "a", notFound: true},
		{name: "failing", setup: func(r *fake.Resolver) { r.Set("a", "1.1.1.1"); r.Fail("a") }, host: "a", temporary: true},
		{name: "failure ended by Set", setup: func(r *fake.Resolver) { r.Fail("a"); r.Set("a", "3.3.3.3") }, host: "a", want: "3.3.3.3"},
		{name: "an address resolves to itself", setup: func(*fake.Resolver) {}, host: "127.0.0.11", want: "127.0.0.11"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := fake.NewResolver()
			tt.setup(r)
			addrs, err := r.Lookup(ctx, tt.host)
			var de *net.DNSError
			switch {
			case tt.notFound:
				if !errors.As(err, &de) || !de.IsNotFound {
					t.Errorf("Lookup = %v, %v; want NXDOMAIN", addrs, err)
				}
			case tt.temporary:
				if !errors.As(err, &de) || !de.IsTemporary || de.IsNotFound {
					t.Errorf("Lookup = %v, %v; want a temporary failure", addrs, err)
				}
			default:
				if err != nil || len(addrs) != 1 || addrs[0] != tt.want {
					t.Errorf("Lookup = %v, %v; want [%s]", addrs, err, tt.want)
				}
			}
		})
	}
	r := fake.NewResolver()
	changed := r.Changed()
	r.Set("x", "1.2.3.4")
	select {
	case <-changed:
	default:
		t.Error("Set did not signal Changed")
	}
	_, _ = r.Lookup(ctx, "x")
	_, _ = r.Lookup(ctx, "X")
	if r.Lookups("x") != 2 || strings.Join(r.Names(), ",") != "x" || r.Addrs("x")[0] != "1.2.3.4" {
		t.Errorf("Lookups %d, Names %v, Addrs %v", r.Lookups("x"), r.Names(), r.Addrs("x"))
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := r.Lookup(cctx, "x"); err == nil {
		t.Error("Lookup ignored a canceled context")
	}
}

// checkListen checks where the servers listen, for the Env's mode.
func checkListen(t *testing.T, env *fake.Env) {
	t.Helper()
	for _, s := range []*fake.Server{env.Blue, env.Green} {
		host, port, err := net.SplitHostPort(s.ListenAddr)
		switch {
		case err != nil:
			t.Errorf("%s listen address %q: %v", s.Name, s.ListenAddr, err)
		case env.SingleIP && host != "127.0.0.1":
			t.Errorf("single-address mode: %s listens on %s, want 127.0.0.1", s.Name, s.ListenAddr)
		case !env.SingleIP && (host != s.Host || port != strconv.Itoa(s.Port)):
			t.Errorf("two-address mode: %s listens on %s, want %s:%d", s.Name, s.ListenAddr, s.Host, s.Port)
		}
	}
	if env.Blue.ListenAddr == env.Green.ListenAddr {
		t.Errorf("blue and green both listen on %s", env.Blue.ListenAddr)
	}
	if env.SingleIP != (env.SingleIPReason != "") {
		t.Errorf("SingleIP %v, SingleIPReason %q", env.SingleIP, env.SingleIPReason)
	}
}

// In the single-address mode, as on macOS without loopback aliases, both
// servers listen on 127.0.0.1 at two ports, and Env.Dial presents them to
// clients at the two addresses on one port: the RDS names lead to the right
// server, connections report the address clients asked for, a cancel
// request (which pgx sends to that address) reaches the server, and
// nothing listens at the addresses themselves.
func TestEnvSingleIP(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a blue/green deployment of real servers: skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env, err := fake.Start(ctx, fake.Config{SingleIP: true})
	if errors.Is(err, fake.ErrNotFound) && os.Getenv(pgtest.EnvRequire) != "1" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := env.Close(); err != nil {
			t.Error(err)
		}
	}()
	if !env.SingleIP || env.SingleIPReason != "Config.SingleIP" {
		t.Fatalf("SingleIP %v (%q), want the single-address mode for Config.SingleIP", env.SingleIP, env.SingleIPReason)
	}
	if env.Blue.Host != fake.DefaultBlueHost || env.Green.Host != fake.DefaultGreenHost || env.Blue.Port != env.Green.Port {
		t.Errorf("clients see blue %s:%d, green %s:%d; want the default addresses on one port",
			env.Blue.Host, env.Blue.Port, env.Green.Host, env.Green.Port)
	}
	checkListen(t, env)

	d, err := env.NewDeployment(ctx, fake.DeploymentConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Drop(context.Background())
	for _, tt := range []struct {
		host string
		srv  *fake.Server
	}{
		{d.Names.Cluster, env.Blue},
		{d.Names.GreenCluster, env.Green},
		{env.Green.Host, env.Green},
	} {
		cfg, err := d.PoolConfig(tt.host)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
		if err != nil {
			t.Fatalf("%s: %v", tt.host, err)
		}
		var got string
		if err := conn.QueryRow(ctx, "SELECT host(inet_server_addr()) || ':' || inet_server_port()").Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != tt.srv.ListenAddr {
			t.Errorf("%s: connected to %s, want %s (%s)", tt.host, got, tt.srv.ListenAddr, tt.srv.Name)
		}
		want := net.JoinHostPort(tt.srv.Host, strconv.Itoa(tt.srv.Port))
		if ra := conn.PgConn().Conn().RemoteAddr().String(); ra != want {
			t.Errorf("%s: RemoteAddr %s, want %s", tt.host, ra, want)
		}
		// A cancel request: pgx dials RemoteAddr, through Dial. It is sent
		// until the query ends, since one sent before the query starts is
		// ignored.
		done := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-done:
					return
				case <-tick.C:
					if err := conn.PgConn().CancelRequest(ctx); err != nil {
						t.Errorf("%s: cancel request: %v", tt.host, err)
						return
					}
				}
			}
		})
		_, err = conn.Exec(ctx, "SELECT pg_sleep(30)")
		close(done)
		wg.Wait()
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "57014" {
			t.Errorf("%s: canceled query: %v, want 57014 (the cancel request reached the server)", tt.host, err)
		}
		conn.Close(ctx)
	}
	// Without Dial, the addresses clients see lead nowhere.
	var dialer net.Dialer
	if c, err := dialer.DialContext(ctx, "tcp", net.JoinHostPort(env.Green.Host, strconv.Itoa(env.Green.Port))); err == nil {
		c.Close()
		t.Errorf("something listens at %s:%d in the single-address mode", env.Green.Host, env.Green.Port)
	}
}

func TestNames(t *testing.T) {
	t.Parallel()
	rds := fake.NewNames(fake.RDS, "orders", "acct12345678", "eu-west-1", "zz9999")
	if rds.Instance != "orders.acct12345678.eu-west-1.rds.amazonaws.com" ||
		rds.GreenInstance != "orders-green-zz9999.acct12345678.eu-west-1.rds.amazonaws.com" ||
		rds.OldInstance != "orders-old1.acct12345678.eu-west-1.rds.amazonaws.com" || rds.Cluster != "" {
		t.Errorf("RDS names: %+v", rds)
	}
	aur := fake.NewNames(fake.Aurora, "orders", "", "", "")
	if len(aur.Blue()) != 3 || len(aur.Green()) != 3 || len(aur.Old()) != 3 || len(rds.Blue()) != 1 {
		t.Errorf("name lists: %v %v %v %v", aur.Blue(), aur.Green(), aur.Old(), rds.Blue())
	}
	if aur.Reader != "orders.cluster-ro-abcdefghijkl.us-east-1.rds.amazonaws.com" {
		t.Errorf("reader: %s", aur.Reader)
	}
}

// The environment is real: two servers on one port at two addresses,
// serving TLS for the RDS names, with the metadata functions under their
// real names and columns.
func TestEnv(t *testing.T) {
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
	if env.Blue.Port != env.Green.Port || env.Blue.Host != fake.DefaultBlueHost || env.Green.Host != fake.DefaultGreenHost {
		t.Errorf("blue %s:%d, green %s:%d; want the same port at the default addresses",
			env.Blue.Host, env.Blue.Port, env.Green.Host, env.Green.Port)
	}
	checkListen(t, env)

	t.Run("topology and readers", func(t *testing.T) {
		t.Parallel()
		testTopology(ctx, t, env)
	})

	t.Run("functions", func(t *testing.T) {
		t.Parallel()
		for _, tt := range []struct {
			engine fake.Engine
			fn     string
			cols   string
		}{
			{fake.Aurora, fake.AuroraFunction, "version,endpoint,port,role,status"},
			{fake.RDS, fake.RDSFunction, "id,endpoint,port,role,status,version"},
		} {
			t.Run(tt.engine.String(), func(t *testing.T) {
				t.Parallel()
				d, err := env.NewDeployment(ctx, fake.DeploymentConfig{Engine: tt.engine})
				if err != nil {
					t.Fatal(err)
				}
				defer d.Drop(context.Background())
				query := func(srv *fake.Server) ([]string, [][]any) {
					conn, err := pgx.Connect(ctx, srv.DSN(d.Database))
					if err != nil {
						t.Fatal(err)
					}
					defer conn.Close(ctx)
					rows, err := conn.Query(ctx, "SELECT * FROM "+tt.fn+"('holdfast-test')")
					if err != nil {
						t.Fatal(err)
					}
					var cols []string
					for _, fd := range rows.FieldDescriptions() {
						cols = append(cols, fd.Name)
					}
					var vals [][]any
					for rows.Next() {
						v, err := rows.Values()
						if err != nil {
							t.Fatal(err)
						}
						vals = append(vals, v)
					}
					if err := rows.Err(); err != nil {
						t.Fatal(err)
					}
					return cols, vals
				}
				cols, vals := query(env.Blue)
				if strings.Join(cols, ",") != tt.cols || len(vals) != 0 {
					t.Errorf("columns %v, %d rows; want %s and none", cols, len(vals), tt.cols)
				}
				if err := d.SetStatus(ctx, fake.StatusInProgress); err != nil {
					t.Fatal(err)
				}
				for _, srv := range []*fake.Server{env.Blue, env.Green} {
					_, vals := query(srv)
					want := len(d.Rows(fake.StatusInProgress))
					if len(vals) != want || want == 0 {
						t.Fatalf("%s: %d rows, want %d", srv.Name, len(vals), want)
					}
					for _, v := range vals {
						row := fmt.Sprint(v...)
						if !strings.Contains(row, fake.StatusInProgress) || !strings.Contains(row, "1.0") {
							t.Errorf("%s row %v", srv.Name, v)
						}
					}
				}
				if err := d.Blue.Fail(ctx, "An error occurred while retrieving the blue/green fast switchover metadata"); err != nil {
					t.Fatal(err)
				}
				conn, err := pgx.Connect(ctx, env.Blue.DSN(d.Database))
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close(ctx)
				if _, err := conn.Exec(ctx, "SELECT * FROM "+tt.fn+"('x')"); err == nil ||
					!strings.Contains(err.Error(), "An error occurred while retrieving") {
					t.Errorf("failing function: %v", err)
				}
				if err := d.Blue.Uninstall(ctx); err != nil {
					t.Fatal(err)
				}
				var exists bool
				if err := conn.QueryRow(ctx, "SELECT to_regprocedure($1) IS NOT NULL", tt.fn+"(text)").Scan(&exists); err != nil || exists {
					t.Errorf("after Uninstall the function exists: %v %v", exists, err)
				}
			})
		}
	})

	t.Run("switchover steps", func(t *testing.T) {
		t.Parallel()
		d, err := env.NewDeployment(ctx, fake.DeploymentConfig{Name: "steps"})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Drop(context.Background())
		roleOf := func(rows []fake.Row, role string) []string {
			var out []string
			for _, r := range rows {
				if r.Role == role {
					out = append(out, r.Endpoint)
				}
			}
			return out
		}
		if err := d.SetStatus(ctx, fake.StatusPostProcessing); err != nil {
			t.Fatal(err)
		}
		if err := d.Rename(ctx); err != nil {
			t.Fatal(err)
		}
		rows, err := d.Green.Rows(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if src, dst := roleOf(rows, fake.RowRoleSource), roleOf(rows, fake.RowRoleTarget); strings.Join(src, ",") != d.Names.OldCluster+","+d.Names.OldInstance ||
			strings.Join(dst, ",") != d.Names.Cluster+","+d.Names.Instance {
			t.Errorf("after Rename: source %v, target %v", src, dst)
		}
		if err := d.DropSource(ctx); err != nil {
			t.Fatal(err)
		}
		rows, _ = d.Blue.Rows(ctx)
		if len(roleOf(rows, fake.RowRoleSource)) != 0 || len(roleOf(rows, fake.RowRoleTarget)) != 2 {
			t.Errorf("after DropSource: %+v", rows)
		}
		r := env.Resolver
		if a := r.Addrs(d.Names.Cluster); len(a) != 1 || a[0] != env.Blue.Host {
			t.Errorf("blue name resolves to %v", a)
		}
		d.SwapDNS()
		d.RemoveGreenDNS()
		if a := r.Addrs(d.Names.Cluster); len(a) != 1 || a[0] != env.Green.Host {
			t.Errorf("after SwapDNS the blue name resolves to %v", a)
		}
		if a := r.Addrs(d.Names.OldInstance); len(a) != 1 || a[0] != env.Blue.Host {
			t.Errorf("after SwapDNS the old name resolves to %v", a)
		}
		if a := r.Addrs(d.Names.GreenCluster); a != nil {
			t.Errorf("after RemoveGreenDNS the green name resolves to %v", a)
		}
	})

	t.Run("TLS checks the RDS names", func(t *testing.T) {
		t.Parallel()
		d, err := env.NewDeployment(ctx, fake.DeploymentConfig{Engine: fake.RDS, Name: "tls"})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Drop(context.Background())
		for _, tt := range []struct {
			host   string
			server string
			ok     bool
		}{
			{d.Names.Instance, env.Blue.ListenAddr, true},
			{d.Names.GreenInstance, env.Green.ListenAddr, true},
			{env.Blue.Host, env.Blue.ListenAddr, false}, // no IP address in the certificate
		} {
			cfg, err := pgx.ParseConfig(d.DSN(tt.host))
			if err != nil {
				t.Fatal(err)
			}
			cfg.LookupFunc = env.Resolver.Lookup
			cfg.DialFunc = env.Dial
			conn, err := pgx.ConnectConfig(ctx, cfg)
			if !tt.ok {
				var he x509.HostnameError
				if !errors.As(err, &he) {
					t.Errorf("%s: %v, want a host name error", tt.host, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v", tt.host, err)
			}
			var addr string
			var ssl bool
			err = conn.QueryRow(ctx, "SELECT host(inet_server_addr()) || ':' || inet_server_port(), ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&addr, &ssl)
			conn.Close(ctx)
			if err != nil || addr != tt.server || !ssl {
				t.Errorf("%s: server %s, ssl %v, %v; want %s over TLS", tt.host, addr, ssl, err, tt.server)
			}
		}
	})

	t.Run("read-only database", func(t *testing.T) {
		t.Parallel()
		d, err := env.NewDeployment(ctx, fake.DeploymentConfig{Name: "readonly"})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Drop(context.Background())
		if err := env.Blue.Exec(ctx, "postgres", "ALTER DATABASE "+d.Database+" SET default_transaction_read_only = on"); err != nil {
			t.Fatal(err)
		}
		if err := d.SetStatus(ctx, fake.StatusAvailable); err != nil {
			t.Errorf("metadata of a read-only database: %v", err)
		}
	})

	if _, err := env.NewDeployment(ctx, fake.DeploymentConfig{Name: "Bad Name"}); err == nil {
		t.Error("NewDeployment accepted an invalid name")
	}
}

// testTopology checks an Aurora deployment with readers whose metadata
// lists only the cluster endpoints: aurora_replica_status() on each server
// lists its side's instances (the writer by MASTER_SESSION_ID), each
// instance name resolves to an address of its own that Env.Dial connects
// to its side's server, and Rename and SwapDNS carry the instances along.
func testTopology(ctx context.Context, t *testing.T, env *fake.Env) {
	d, err := env.NewDeployment(ctx, fake.DeploymentConfig{Readers: 2, ClusterEndpointsOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Drop(context.Background())
	n := d.Names
	if len(n.ReaderInstances) != 2 || n.ReaderInstances[0] != strings.Replace(n.Instance, "-1.", "-2.", 1) ||
		n.GreenReaderInstances[1] != strings.Replace(n.GreenInstance, "-1-green-", "-3-green-", 1) ||
		n.OldReaderInstances[0] != strings.Replace(n.OldInstance, "-1-old1.", "-2-old1.", 1) {
		t.Errorf("reader names %v %v %v", n.ReaderInstances, n.GreenReaderInstances, n.OldReaderInstances)
	}
	if rows := d.Rows(fake.StatusAvailable); len(rows) != 2 || rows[0].Endpoint != n.Cluster || rows[1].Endpoint != n.GreenCluster {
		t.Errorf("metadata rows %+v, want the two cluster endpoints only", rows)
	}
	topology := func(srv *fake.Server) string {
		conn, err := pgx.Connect(ctx, srv.DSN(d.Database))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		rows, err := conn.Query(ctx, "SELECT server_id, session_id = $1 FROM "+fake.TopologyFunction+"()", fake.WriterSessionID)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for rows.Next() {
			var id string
			var writer bool
			if err := rows.Scan(&id, &writer); err != nil {
				t.Fatal(err)
			}
			if writer {
				id += "*"
			}
			out = append(out, id)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return strings.Join(out, ",")
	}
	id := func(h string) string { return strings.SplitN(h, ".", 2)[0] }
	if got, want := topology(env.Blue), id(n.Instance)+"*,"+id(n.ReaderInstances[0])+","+id(n.ReaderInstances[1]); got != want {
		t.Errorf("blue topology %s, want %s", got, want)
	}
	if got, want := topology(env.Green), id(n.GreenInstance)+"*,"+id(n.GreenReaderInstances[0])+","+id(n.GreenReaderInstances[1]); got != want {
		t.Errorf("green topology %s, want %s", got, want)
	}
	// Each reader name resolves to an address of its own, which leads to
	// its side's server and is the connection's remote address.
	for _, tc := range []struct {
		host, addr string
		srv        *fake.Server
	}{
		{n.ReaderInstances[1], env.Blue.ReaderAddr(2), env.Blue},
		{n.Reader, env.Blue.ReaderAddr(1), env.Blue},
		{n.GreenReaderInstances[0], env.Green.ReaderAddr(1), env.Green},
	} {
		cfg, err := pgx.ParseConfig(d.DSN(tc.host))
		if err != nil {
			t.Fatal(err)
		}
		cfg.LookupFunc, cfg.DialFunc = env.Resolver.Lookup, env.Dial
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatalf("%s: %v", tc.host, err)
		}
		var port int
		err = conn.QueryRow(ctx, "SELECT inet_server_port()").Scan(&port)
		remote := conn.PgConn().Conn().RemoteAddr().String()
		conn.Close(ctx)
		_, listenPort, _ := net.SplitHostPort(tc.srv.ListenAddr)
		if err != nil || strconv.Itoa(port) != listenPort || remote != net.JoinHostPort(tc.addr, strconv.Itoa(tc.srv.Port)) {
			t.Errorf("%s: server port %d (%v), remote %s; want %s's server at %s", tc.host, port, err, remote, tc.srv.Name, tc.addr)
		}
	}
	if err := d.Rename(ctx); err != nil {
		t.Fatal(err)
	}
	d.SwapDNS()
	if got, want := topology(env.Green), id(n.Instance)+"*,"+id(n.ReaderInstances[0])+","+id(n.ReaderInstances[1]); got != want {
		t.Errorf("green topology after Rename %s, want the blue identifiers %s", got, want)
	}
	if got, want := topology(env.Blue), id(n.OldInstance)+"*,"+id(n.OldReaderInstances[0])+","+id(n.OldReaderInstances[1]); got != want {
		t.Errorf("blue topology after Rename %s, want the -old1 identifiers %s", got, want)
	}
	for host, want := range map[string]string{n.ReaderInstances[0]: env.Green.ReaderAddr(1), n.Reader: env.Green.ReaderAddr(1),
		n.OldReaderInstances[1]: env.Blue.ReaderAddr(2), n.Instance: env.Green.Host} {
		if got := env.Resolver.Addrs(host); len(got) != 1 || got[0] != want {
			t.Errorf("after SwapDNS %s resolves to %v, want %s", host, got, want)
		}
	}
	if _, err := env.NewDeployment(ctx, fake.DeploymentConfig{Engine: fake.RDS, Readers: 1}); err == nil {
		t.Error("readers accepted for an RDS instance")
	}
	if err := d.Blue.UninstallTopology(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := d.Green.Topology(ctx); err != nil || len(got) != 3 || !got[0].Writer {
		t.Errorf("Topology() = %+v, %v", got, err)
	}
}
