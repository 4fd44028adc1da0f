package failover_test

import (
	"context"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/fakes"
	"github.com/holdfast-db/holdfast/fakes/failovertest"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/internal/topology"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// poolPassword is the static password of the trust tests' pools (the
// simulator's servers trust every connection and ignore it).
const poolPassword = "pool-secret-Zq8w"

// startTrap starts a pgtest.Trap serving TLS for name, closed when the
// test ends.
func startTrap(t *testing.T, name string) *pgtest.Trap {
	t.Helper()
	trap, err := pgtest.StartTrap(pgtest.TrapConfig{Names: []string{name}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := trap.Close(); err != nil {
			t.Error(err)
		}
	})
	return trap
}

// waitAttempts waits, on the trap's notifications, until it has seen n
// connection attempts, at most 30 s.
func waitAttempts(t *testing.T, trap *pgtest.Trap, n int) {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		ch := trap.Changed()
		if trap.Attempts() >= n && len(trap.Logins()) >= n {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("the canary saw %d attempts in 30 s, want %d: the monitor did not probe the topology's instances", trap.Attempts(), n)
		}
	}
}

// TestTopologyRowOutsideDomain plays a topology row that names a host
// outside the cluster's domain ("mydb-2.attacker.example", as a role that
// owns the database but is not a superuser could make
// rds_tools.show_topology say, or a compromised topology) against a
// listener that records connection attempts and passwords, with
// sslmode=verify-full and a certificate for that name from a CA the
// client trusts: holdfast must never connect there, so the pool's
// password never leaves for it. A second forged row names a host inside
// the domain (a canary, a listener too): the monitor probes it, which
// shows that the probe round that would have reached the foreign host ran.
//
// Before the fix (checked by running this test on main): the Multi-AZ
// case failed, the monitor sending the pool's password to the foreign
// listener in the first probe round. An Aurora row carries a server id
// and no host name, and an id that is not an instance identifier was
// already refused: the Aurora case passes on main too, and guards that.
func TestTopologyRowOutsideDomain(t *testing.T) {
	const foreign = "mydb-2.attacker.example"
	for _, eng := range []failovertest.Engine{failovertest.MultiAZ, failovertest.Aurora} {
		t.Run(string(eng), func(t *testing.T) {
			c := failovertest.StartTest(t, failovertest.Config{Engine: eng, TLS: true, TTL: time.Second})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			_, domain, _ := strings.Cut(c.InstanceEndpoint(c.Writer()), ".")
			canaryHost := "canary-1." + domain
			attacker, canary := startTrap(t, foreign), startTrap(t, canaryHost)
			c.Resolver.Set(foreign, attacker.Addr())
			c.Resolver.Set(canaryHost, canary.Addr())
			_, port, _ := net.SplitHostPort(attacker.Addr())
			p, _ := strconv.Atoi(port)
			foreignID := "mydb-2" // Multi-AZ: the first label of the row's endpoint
			if eng == failovertest.Aurora {
				foreignID = foreign // Aurora: only a server id, whatever it says
			}
			if err := c.ForgeRow(ctx, foreignID, foreign, p); err != nil {
				t.Fatal(err)
			}
			_, port, _ = net.SplitHostPort(canary.Addr())
			p, _ = strconv.Atoi(port)
			if err := c.ForgeRow(ctx, "canary-1", canaryHost, p); err != nil {
				t.Fatal(err)
			}

			logs := &fakes.LogBuffer{}
			f := newFactory(t, holdfast.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
			cfg, err := c.PoolConfig(c.ClusterEndpoint, "password="+poolPassword)
			if err != nil {
				t.Fatal(err)
			}
			attacker.Trust(cfg.ConnConfig) // a public CA, as the attacker's would be
			canary.Trust(cfg.ConnConfig)
			pool, err := f.NewPool(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			m := f.Failover(pool)
			if !waitFor(ctx, func() bool { return m.Status().Writer != "" }) {
				t.Fatal("the monitor never read the topology")
			}
			engine(m).Trouble() // probe every instance, every FastInterval
			// Two attempts on the canary: the first probe round, which
			// dials every instance of the topology at once and joins them,
			// has ended.
			waitAttempts(t, canary, 2)
			if got := canary.Logins()[0]; got.Password != poolPassword || !got.TLS || got.ServerName != canaryHost {
				t.Errorf("the canary got %+v; want the pool's password over TLS for %s (the test's own check)", got, canaryHost)
			}

			if n := attacker.Attempts(); n != 0 {
				t.Errorf("the host outside the domain got %d connection attempts, logins %+v; want none", n, attacker.Logins())
			}
			if n := c.Resolver.Lookups(foreign); n != 0 {
				t.Errorf("the host outside the domain was resolved %d times; want never", n)
			}
			if eng == failovertest.MultiAZ {
				if n := strings.Count(logs.String(), "topology row outside the cluster's domain ignored"); n != 1 ||
					!strings.Contains(logs.String(), foreign) {
					t.Errorf("%d WARN lines for the row; want one naming %s:\n%s", n, foreign, logs)
				}
			}
			if strings.Contains(logs.String(), poolPassword) {
				t.Errorf("the logs carry the pool's password:\n%s", logs)
			}
		})
	}
}

// untrustedTopology creates, on the shared pgtest server, a database
// owned by a role that is not a superuser, and in it, as that role, the
// schema rds_tools with the functions of a Multi-AZ DB cluster: they name
// the server itself (mydb-1, writer) and mydb-2, an instance endpoint of
// the cluster's domain whose DNS the test points at trap. It returns the
// pool config (as that role, with poolPassword) on the cluster endpoint
// of that domain, resolved to the server.
func untrustedTopology(t *testing.T, trap *pgtest.Trap) *pgxpool.Config {
	t.Helper()
	ctx := context.Background()
	const (
		role   = "trust_db_owner"
		db     = "trust_untrusted_topology"
		domain = "abc123.us-east-1.rds.amazonaws.com"
		self   = "db-SELFSELFSELFSELFSELFSELF1"
	)
	admin, err := pgx.Connect(ctx, pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	for _, q := range []string{"CREATE ROLE " + role + " LOGIN", "CREATE DATABASE " + db + " OWNER " + role} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		admin, err := pgx.Connect(context.Background(), pgtest.DSN(t))
		if err == nil {
			_, _ = admin.Exec(context.Background(), "DROP DATABASE "+db+" WITH (FORCE)")
			_, _ = admin.Exec(context.Background(), "DROP ROLE "+role)
			admin.Close(context.Background())
		}
	})
	base, err := pgx.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	owner := base.Copy()
	owner.User, owner.Database = role, db
	conn, err := pgx.ConnectConfig(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	_, trapPort, _ := net.SplitHostPort(trap.Addr())
	port := strconv.Itoa(int(base.Port))
	for _, q := range []string{
		"CREATE SCHEMA rds_tools",
		`CREATE FUNCTION rds_tools.show_topology(client text DEFAULT NULL) RETURNS TABLE (id text, endpoint text, port int)
			LANGUAGE sql AS $$ VALUES ('` + self + `', 'mydb-1.` + domain + `', ` + port + `),
			('db-TRAPTRAPTRAPTRAPTRAPTRAP1', 'mydb-2.` + domain + `', ` + trapPort + `) $$`,
		"CREATE FUNCTION rds_tools.dbi_resource_id() RETURNS text LANGUAGE sql AS $$ SELECT '" + self + "'::text $$",
		"CREATE FUNCTION rds_tools.multi_az_db_cluster_source_dbi_resource_id() RETURNS SETOF text LANGUAGE sql AS $$ SELECT 'x'::text WHERE false $$",
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	cfg, err := pgxpool.ParseConfig("postgres://" + role + ":" + poolPassword + "@mydb.cluster-" + domain + ":" + port + "/" + db + "?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.LookupFunc = func(_ context.Context, host string) ([]string, error) {
		if strings.HasPrefix(host, "mydb-2.") {
			return []string{trap.Addr()}, nil
		}
		return []string{base.Host}, nil
	}
	return cfg
}

// TestUntrustedTopologyFunction: a role that owns the application's
// database but is not a superuser creates rds_tools.show_topology (and
// the id functions) naming hosts of its choice, here inside the cluster's
// domain, one of them a listener that records connection attempts and
// passwords. A function no superuser (nor rdsadmin) owns is not trusted:
// failover routing is off (Status.Off "untrusted"), as without the
// function, with one WARN, and nothing is dialed but the pool's own host,
// again each RefreshInterval.
//
// Before the fix (checked by running this test on main) the monitor read
// the rows, adopted the writer they named, and, probing, sent the pool's
// password to the listener.
func TestUntrustedTopologyFunction(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers of its own: skipped with -short")
	}
	trap, err := pgtest.StartTrap(pgtest.TrapConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := trap.Close(); err != nil {
			t.Error(err)
		}
	})
	cfg := untrustedTopology(t, trap)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	logs := &fakes.LogBuffer{}
	f := newFactory(t, holdfast.WithFailover(failover.Config{RefreshInterval: 200 * time.Millisecond}),
		holdfast.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	pool, err := f.NewPool(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	m := f.Failover(pool)
	engine(m).Trouble() // probe every instance it knows, as soon as it knows them
	// Until the monitor has looked three times (routing off, looked again
	// after RefreshInterval), or the trap was reached.
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		mch, tch := m.Changed(), trap.Changed()
		st := m.Status()
		if len(trap.Logins()) > 0 || st.Off == "untrusted" && st.MonitorConnects >= 3 {
			break
		}
		select {
		case <-mch:
		case <-tch:
		case <-deadline.C:
			t.Fatalf("the monitor neither turned routing off nor reached the trap in 30 s: %+v", st)
		}
	}
	if n := trap.Attempts(); n != 0 {
		t.Errorf("the host the untrusted function named got %d connection attempts, logins %+v; want none", n, trap.Logins())
	}
	st := m.Status()
	if st.Off != "untrusted" || st.Writer != "" || !strings.Contains(st.Error, "trust_db_owner") {
		t.Errorf("Status: Off %q, Writer %q, Error %q; want off \"untrusted\", no writer, the owner named", st.Off, st.Writer, st.Error)
	}
	if n := strings.Count(logs.String(), "not owned by a superuser or rdsadmin"); n != 1 {
		t.Errorf("%d WARN lines; want one:\n%s", n, logs)
	}
	if strings.Contains(logs.String(), poolPassword) {
		t.Errorf("the logs carry the pool's password:\n%s", logs)
	}
}

// TestTopologyRowsBounded: a topology of 400 rows (Aurora has at most 16
// instances, a Multi-AZ DB cluster 3) is read up to its first 64, with one
// WARN; the monitor resolves only those, and its probes log in to at most
// 16 of them at once. The rows name instances inside the cluster's
// domain, all of them a listener that holds each connection 100 ms and
// counts how many it has open at once.
//
// Before the fix (checked by running this test on main) one probe round
// resolved all 400 names and opened about 400 connections at once.
func TestTopologyRowsBounded(t *testing.T) {
	trap, err := pgtest.StartTrap(pgtest.TrapConfig{Hold: 100 * time.Millisecond}) // well within FailureTimeout: no probe gives up
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := trap.Close(); err != nil {
			t.Error(err)
		}
	})
	const (
		domain = "abc123.us-east-1.rds.amazonaws.com"
		self   = "db-SELF0000000000000000000001"
		rows   = 400
	)
	conn := pgtest.Database(t, "trust_bounded_topology")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	port := strconv.Itoa(int(conn.Config().Port))
	_, trapPort, _ := net.SplitHostPort(trap.Addr())
	for _, q := range []string{
		"CREATE SCHEMA rds_tools",
		`CREATE FUNCTION rds_tools.show_topology(client text DEFAULT NULL) RETURNS TABLE (id text, endpoint text, port int)
			LANGUAGE sql AS $$ SELECT '` + self + `', 'mydb-1.` + domain + `', ` + port + `
			UNION ALL SELECT 'db-' || lpad(i::text, 26, '0'), 'mydb-' || i || '.` + domain + `', ` + trapPort + `
			FROM generate_series(2, ` + strconv.Itoa(rows) + `) i $$`,
		"CREATE FUNCTION rds_tools.dbi_resource_id() RETURNS text LANGUAGE sql AS $$ SELECT '" + self + "'::text $$",
		"CREATE FUNCTION rds_tools.multi_az_db_cluster_source_dbi_resource_id() RETURNS SETOF text LANGUAGE sql AS $$ SELECT 'x'::text WHERE false $$",
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var mu sync.Mutex
	lookups := map[string]int{}
	cfg, err := pgxpool.ParseConfig("postgres://postgres:" + poolPassword + "@mydb.cluster-" + domain + ":" + port + "/trust_bounded_topology?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.LookupFunc = func(_ context.Context, host string) ([]string, error) {
		mu.Lock()
		lookups[host]++
		mu.Unlock()
		if host == "mydb-1."+domain || host == "mydb.cluster-"+domain {
			return []string{conn.Config().Host}, nil
		}
		return []string{trap.Addr()}, nil
	}
	logs := &fakes.LogBuffer{}
	f := newFactory(t, holdfast.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	pool, err := f.NewPool(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	m := f.Failover(pool)
	if !waitFor(ctx, func() bool { return m.Status().Writer != "" }) {
		t.Fatal("the monitor never read the topology")
	}
	engine(m).Trouble() // a probe round: every instance at once
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for want := topology.MaxRows - 1; trap.Attempts() < want; { // every reader of the first 64 rows probed
		ch := trap.Changed()
		if trap.Attempts() >= want {
			break
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("%d probes reached the listener in 30 s, want %d", trap.Attempts(), want)
		}
	}
	if n := trap.MaxConcurrent(); n > topology.MaxConcurrent {
		t.Errorf("%d probe connections at once, want at most %d", n, topology.MaxConcurrent)
	}
	mu.Lock()
	resolved := 0
	for h := range lookups {
		if strings.HasPrefix(h, "mydb-") {
			resolved++
		}
	}
	mu.Unlock()
	if resolved > topology.MaxRows {
		t.Errorf("%d instance names resolved, want at most %d (the rows used)", resolved, topology.MaxRows)
	}
	if n := strings.Count(logs.String(), "more rows than holdfast uses"); n != 1 {
		t.Errorf("%d WARN lines for the cut; want one:\n%s", n, logs)
	}
}
