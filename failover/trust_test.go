package failover_test

import (
	"context"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/fakes"
	"github.com/holdfast-db/holdfast/fakes/failovertest"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
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
