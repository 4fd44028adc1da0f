package bluegreen_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/fakes"
	fake "github.com/holdfast-db/holdfast/fakes/bluegreentest"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/internal/topology"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// poolPassword is the static password of the trust tests' pools (the
// simulator's servers trust the superuser and ignore it).
const poolPassword = "pool-secret-Kd3v"

// trap starts a pgtest.Trap serving TLS for name, resolved by the Env's
// DNS, closed when the test ends.
func trap(t *testing.T, env *fake.Env, name string) (*pgtest.Trap, int) {
	t.Helper()
	tr, err := pgtest.StartTrap(pgtest.TrapConfig{Names: []string{name}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tr.Close(); err != nil {
			t.Error(err)
		}
	})
	env.Resolver.Set(name, tr.Addr())
	_, p, _ := net.SplitHostPort(tr.Addr())
	port, _ := strconv.Atoi(p)
	return tr, port
}

// setRows writes rows on both servers.
func setRows(t *testing.T, d *fake.Deployment, rows []fake.Row) {
	t.Helper()
	for _, m := range []*fake.Metadata{d.Blue, d.Green} {
		if err := m.SetRows(testCtx(t), rows...); err != nil {
			t.Fatal(err)
		}
	}
}

// poisoned returns d's rows for status with the TARGET row of the
// endpoint named like replaced ("" the cluster endpoint: the deciding
// row) naming foreign on port instead.
func poisoned(d *fake.Deployment, status, replaced, foreign string, port int) []fake.Row {
	rows := d.Rows(status)
	for i, r := range rows {
		if r.Role == fake.RowRoleTarget && r.Endpoint == replaced {
			rows[i].Endpoint, rows[i].Port = foreign, port
		}
	}
	return rows
}

// read reports whether m is the report of a finished read of the
// monitor's server (rows, empty, absent, failed, no-connection): while a
// connection attempt or a query has not answered, the monitor reports
// "waiting" at the polling interval, with a LastPoll of its own, and
// several such reports can come before the first read ends (its TLS
// connect alone takes longer than three intervals on a loaded machine).
// A test that waits for polls counts these only.
func read(m bluegreen.MonitorStatus) bool {
	return !m.LastPoll.IsZero() && m.Observation != "waiting"
}

// trustConfig is a pool of the trust tests: the static password, a CA
// that signed the foreign host's certificate trusted as a public CA
// would be, and an application name that tells the pool's connections
// from the monitors'.
func trustConfig(tr *pgtest.Trap) func(*pgxpool.Config) {
	return func(pc *pgxpool.Config) {
		pc.ConnConfig.Password = poolPassword
		pc.ConnConfig.RuntimeParams["application_name"] = "trust-test-pool"
		tr.Trust(pc.ConnConfig)
	}
}

// TestMetadataRowOutsideDomain plays blue/green metadata whose TARGET
// (green) rows name a host outside the deployment's domain — the
// account and Region suffix of the blue names,
// "*.abcdefghijkl.us-east-1.rds.amazonaws.com" — against a listener that
// records connection attempts and passwords, serving a certificate for
// that name from a CA the client trusts, with sslmode=verify-full. No
// connection may reach it: not the green monitor's (it would follow the
// TARGET row to read green's metadata), not the pool's (in POST, routed
// to the green counterpart, whose name its certificate would have been
// accepted for, with its token).
//
// Before the fix (checked by running this test on main): "monitor" failed,
// the green monitor sending the static password to the listener on every
// poll with no switchover under way; "pool in POST" failed, the pool's new
// connection by the blue cluster endpoint going to the listener with the
// password (as well as the monitor's).
func TestMetadataRowOutsideDomain(t *testing.T) {
	if testing.Short() {
		t.Skip("plays blue/green deployments on real servers: skipped with -short")
	}
	env := startEnv(t)

	t.Run("monitor", func(t *testing.T) {
		t.Parallel()
		d := newDeployment(t, env, fake.Aurora)
		const foreign = "orders-green-abc123.attacker.example"
		tr, port := trap(t, env, foreign)
		// Green's only row names the foreign host.
		var rows []fake.Row
		for _, r := range poisoned(d, fake.StatusAvailable, d.Names.GreenCluster, foreign, port) {
			if r.Role == fake.RowRoleSource || r.Endpoint == foreign {
				rows = append(rows, r)
			}
		}
		setRows(t, d, rows)
		c := newClient(t, d, d.Names.Cluster, fastConfig(), trustConfig(tr))
		// Three reads of the green monitor, all of them after the rows were
		// written (the first reads them): on main, the second connects to
		// the foreign host.
		polls := map[time.Time]bool{}
		c.waitFor("three reads of the green monitor", func(s bluegreen.Status) bool {
			if m := s.Monitors[1]; read(m) {
				polls[m.LastPoll] = true
			}
			return len(polls) >= 3
		})
		if n := tr.Attempts(); n != 0 {
			t.Errorf("the host outside the domain got %d connection attempts, logins %+v; want none", n, tr.Logins())
		}
		if n := env.Resolver.Lookups(foreign); n != 0 {
			t.Errorf("the host outside the domain was resolved %d times; want never", n)
		}
		st := c.r.Status()
		if h := st.Monitors[1].Host; h != d.Names.Cluster {
			t.Errorf("the green monitor reads from %q; want the pool's host %s (no TARGET row left to follow)", h, d.Names.Cluster)
		}
		for _, m := range st.Mapping {
			if strings.Contains(m.Green, "attacker") {
				t.Errorf("mapping %+v names the host outside the domain", m)
			}
		}
		logs := c.logs.String()
		if n := strings.Count(logs, "metadata row outside the deployment's domain ignored"); n != 1 || !strings.Contains(logs, foreign) {
			// (Both monitors read both roles' rows: one line for the two.)
			t.Errorf("%d WARN lines for the row; want one, naming %s:\n%s", n, foreign, logs)
		}
		if strings.Contains(logs, poolPassword) {
			t.Errorf("the logs carry the pool's password:\n%s", logs)
		}
	})

	t.Run("pool in POST", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		d := newDeployment(t, env, fake.Aurora)
		// Shaped as a green writer cluster endpoint, the counterpart of the
		// pool's blue cluster endpoint.
		const foreign = "orders-green-abc123.cluster-abcdefghijkl.us-east-1.rds.attacker.example"
		tr, port := trap(t, env, foreign)
		c := newClient(t, d, d.Names.Cluster, fastConfig(), trustConfig(tr))
		// Written in turn, each after the phase before it is seen.
		phases := map[string]bluegreen.Phase{fake.StatusAvailable: bluegreen.Created, fake.StatusInitiated: bluegreen.Preparation,
			fake.StatusInProgress: bluegreen.InProgress, fake.StatusPostProcessing: bluegreen.Post}
		for _, status := range []string{fake.StatusAvailable, fake.StatusInitiated, fake.StatusInProgress, fake.StatusPostProcessing} {
			setRows(t, d, poisoned(d, status, d.Names.GreenCluster, foreign, port))
			c.waitPhase(phases[status])
		}
		c.pool.Reset() // the next Acquire makes a new connection, by the blue cluster endpoint
		conn, err := c.pool.Acquire(ctx)
		if err == nil {
			conn.Release()
		}
		for _, l := range tr.Logins() {
			if l.Application == "trust-test-pool" {
				t.Errorf("the pool's connection in POST went to the host outside the domain (Acquire: %v): %+v", err, l)
			}
		}
		if n := tr.Attempts(); n != 0 {
			t.Errorf("the host outside the domain got %d connection attempts (logins %+v); want none", n, tr.Logins())
		}
		// (With no green counterpart left, the connection goes by DNS, to
		// blue while its DNS has not moved, and is dropped there: err is
		// then pgxpool's. That is the routing's, not this test's concern.)
	})
}

// TestUntrustedMetadataFunction: a role that owns the application's
// database but is not a superuser creates rds_tools.show_topology, RDS's
// blue/green metadata function, naming a green endpoint of its choice —
// here one inside the deployment's domain, whose DNS leads to a listener
// that records connection attempts and passwords. A metadata function no
// superuser (nor rdsadmin) owns is not trusted: the monitors read it as
// absent (routing off, one WARN), and connect to nothing but the pool's
// host.
//
// Before the fix (checked by running this test on main) the green monitor
// followed the TARGET row and sent the pool's password to the listener.
func TestUntrustedMetadataFunction(t *testing.T) {
	ctx := testCtx(t)
	const (
		role   = "bg_trust_db_owner"
		db     = "bg_trust_untrusted_metadata"
		domain = "abc123.us-east-1.rds.amazonaws.com"
		blue   = "mydb." + domain
		green  = "mydb-green-abc123." + domain
	)
	tr, err := pgtest.StartTrap(pgtest.TrapConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tr.Close(); err != nil {
			t.Error(err)
		}
	})
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
	_, trapPort, _ := net.SplitHostPort(tr.Addr())
	port := strconv.Itoa(int(base.Port))
	for _, q := range []string{
		"CREATE SCHEMA rds_tools",
		`CREATE FUNCTION rds_tools.show_topology(client text) RETURNS TABLE (id bigint, endpoint text, port int, role text, status text, version text)
			LANGUAGE sql AS $$ VALUES (1::bigint, '` + blue + `', ` + port + `, 'BLUE_GREEN_DEPLOYMENT_SOURCE', 'AVAILABLE', '1.0'),
			(2::bigint, '` + green + `', ` + trapPort + `, 'BLUE_GREEN_DEPLOYMENT_TARGET', 'AVAILABLE', '1.0') $$`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	logs := &fakes.LogBuffer{}
	cfg := fastConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	f, err := holdfast.New(holdfast.WithBlueGreen(cfg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	pc, err := pgxpool.ParseConfig("postgres://" + role + ":" + poolPassword + "@" + blue + ":" + port + "/" + db + "?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	pc.ConnConfig.LookupFunc = func(_ context.Context, host string) ([]string, error) {
		if host == green {
			return []string{tr.Addr()}, nil
		}
		return []string{base.Host}, nil
	}
	pool, err := f.NewPool(ctx, pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	r := f.BlueGreen(pool)
	// Three reads of the green monitor, up to a status where both monitors
	// have read (not "waiting"), or the trap reached.
	polls := map[time.Time]bool{}
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	var st bluegreen.Status
	for {
		rch, tch := r.Changed(), tr.Changed()
		st = r.Status()
		if m := st.Monitors[1]; read(m) {
			polls[m.LastPoll] = true
		}
		if len(tr.Logins()) > 0 || len(polls) >= 3 && read(st.Monitors[0]) && read(st.Monitors[1]) {
			break
		}
		select {
		case <-rch:
		case <-tch:
		case <-deadline.C:
			t.Fatalf("the green monitor did not read three times in 30 s: %+v", st)
		}
	}
	if n := tr.Attempts(); n != 0 {
		t.Errorf("the host the untrusted function named got %d connection attempts, logins %+v; want none", n, tr.Logins())
	}
	for _, m := range st.Monitors {
		if m.Observation != "absent" || m.Host != blue {
			t.Errorf("monitor %s: observation %q on %q; want absent, on the pool's host", m.Role, m.Observation, m.Host)
		}
	}
	if n := strings.Count(logs.String(), "metadata function not trusted"); n != 1 || !strings.Contains(logs.String(), role) {
		t.Errorf("%d WARN lines; want one, naming the owner %s:\n%s", n, role, logs)
	}
	if strings.Contains(logs.String(), poolPassword) {
		t.Errorf("the logs carry the pool's password:\n%s", logs)
	}
}

// TestMetadataRowsBounded: metadata of 3,000 TARGET rows, each naming a
// host inside the deployment's domain, is used up to its first 64 rows
// per role, with one WARN: a monitor's poll resolves at most
// those, not 3,000 names.
//
// Before the fix (checked by running this test on main) every poll
// resolved all 3,000 names.
func TestMetadataRowsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("plays blue/green deployments on real servers: skipped with -short")
	}
	env := startEnv(t)
	d := newDeployment(t, env, fake.Aurora)
	const n = 3000
	rows := d.Rows(fake.StatusAvailable)
	var extra []string
	for i := range n {
		h := "flood-" + strconv.Itoa(i) + ".abcdefghijkl.us-east-1.rds.amazonaws.com"
		extra = append(extra, h)
		rows = append(rows, fake.Row{Endpoint: h, Port: d.Env.Blue.Port, Role: fake.RowRoleTarget, Status: fake.StatusAvailable})
	}
	setRows(t, d, rows)
	c := newClient(t, d, d.Names.Cluster, fastConfig())
	polls := [2]map[time.Time]bool{{}, {}}
	c.waitFor("three reads of each monitor", func(s bluegreen.Status) bool {
		for i, m := range s.Monitors {
			if read(m) {
				polls[i][m.LastPoll] = true
			}
		}
		return len(polls[0]) >= 3 && len(polls[1]) >= 3
	})
	resolved, beyond := 0, 0
	for i, h := range extra {
		if env.Resolver.Lookups(h) > 0 {
			resolved++
			if i >= topology.MaxRows {
				beyond++
			}
		}
	}
	if resolved > topology.MaxRows || beyond > 0 {
		t.Errorf("%d of the %d rows' names resolved (%d beyond the first %d); want at most %d", resolved, n, beyond, topology.MaxRows, topology.MaxRows)
	}
	if got := strings.Count(c.logs.String(), "more rows of a role than holdfast uses"); got != 1 {
		t.Errorf("%d WARN lines for the cut; want one:\n%s", got, c.logs)
	}
	if st := c.r.Status(); st.Phase != bluegreen.Created {
		t.Errorf("phase %v, want CREATED", st.Phase)
	}
}

// TestMonitorErrorsRedacted: a monitor's failed poll is logged at DEBUG
// and reported in Status with the error's text cleaned by holdfast's
// redactor, as every other error text: here a password function's error
// that quotes the pool's static password.
//
// Before the fix (checked by running this test on main) the DEBUG line
// and Status.Monitors[].Error carried the password.
func TestMonitorErrorsRedacted(t *testing.T) {
	ctx := testCtx(t)
	const static = "static-pw-Xh42Lm"
	logs := &fakes.LogBuffer{}
	cfg := fastConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	failing := func(context.Context, string) (string, error) {
		return "", errors.New("token service refused the request signed with " + static)
	}
	f, err := holdfast.New(holdfast.WithBlueGreen(cfg), holdfast.WithPasswordFunc(failing))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	pc, err := pgxpool.ParseConfig(pgtest.DSN(t) + "&password=" + static)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Configure(pc); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if c, err := pool.Acquire(ctx); err == nil { // starts the monitors; fails with the password function
		c.Release()
		t.Fatal("Acquire succeeded with a failing password function")
	}
	r := f.BlueGreen(pool)
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		ch := r.Changed()
		st := r.Status()
		if st.Monitors[0].Error != "" && st.Monitors[1].Error != "" && strings.Count(logs.String(), "monitor poll failed") >= 2 {
			for _, m := range st.Monitors {
				if strings.Contains(m.Error, static) || !strings.Contains(m.Error, "[redacted]") {
					t.Errorf("Status.Monitors[%s].Error = %q; want the password redacted", m.Role, m.Error)
				}
			}
			break
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("no failed poll in 30 s: %+v", st)
		}
	}
	if l := logs.String(); strings.Contains(l, static) || !strings.Contains(l, "[redacted]") {
		t.Errorf("the monitor's DEBUG lines carry the password, or nothing redacted:\n%s", l)
	}
}
