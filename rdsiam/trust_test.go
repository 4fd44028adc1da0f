package rdsiam_test

import (
	"context"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/fakes"
	"github.com/holdfast-db/holdfast/fakes/failovertest"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/rdsiam"
)

// TestNoTokenForForeignHost: with rdsiam.With and failover routing, a
// Multi-AZ topology row that names a host outside the cluster's domain
// gets no token: nothing connects there, and rdsiam would refuse to sign
// for it anyway (TestHostPasswordFunc). The listeners record what they
// receive, over sslmode=verify-full with certificates from a CA the
// client trusts; the canary, a forged row inside the domain, gets a token
// signed for its own name, which shows that the monitor's probe round ran.
//
// Before the fix (checked by running this test on main) the foreign
// listener received tokens signed for the cluster endpoint: valid there
// for 15 minutes.
func TestNoTokenForForeignHost(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers of its own: skipped with -short")
	}
	c := failovertest.StartTest(t, failovertest.Config{Engine: failovertest.MultiAZ, TLS: true, TTL: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const foreign = "mydb-2.attacker.example"
	_, domain, _ := strings.Cut(c.InstanceEndpoint(c.Writer()), ".")
	canaryHost := "canary-1." + domain
	trap := func(name string) (*pgtest.Trap, int) {
		tr, err := pgtest.StartTrap(pgtest.TrapConfig{Names: []string{name}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := tr.Close(); err != nil {
				t.Error(err)
			}
		})
		c.Resolver.Set(name, tr.Addr())
		_, p, _ := net.SplitHostPort(tr.Addr())
		port, _ := strconv.Atoi(p)
		return tr, port
	}
	attacker, ap := trap(foreign)
	canary, cp := trap(canaryHost)
	if err := c.ForgeRow(ctx, "mydb-2", foreign, ap); err != nil {
		t.Fatal(err)
	}
	if err := c.ForgeRow(ctx, "canary-1", canaryHost, cp); err != nil {
		t.Fatal(err)
	}

	cfg, err := c.PoolConfig(c.ClusterEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	attacker.Trust(cfg.ConnConfig)
	canary.Trust(cfg.ConnConfig)
	region := strings.Split(c.ClusterEndpoint, ".")[2]
	rc, err := rdsiam.ConfigFor(cfg, region, credentials.NewStaticCredentialsProvider(akid, secret, ""))
	if err != nil {
		t.Fatal(err)
	}
	logs := &fakes.LogBuffer{}
	f, err := holdfast.New(rdsiam.With(rc), holdfast.WithFailover(failover.Config{}),
		holdfast.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	pool, err := f.NewPool(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	m := f.Failover(pool)
	for ch := m.Changed(); m.Status().Writer == ""; ch = m.Changed() { // the channel before the status: no change missed
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatal("the monitor never read the topology")
		}
	}
	m.(interface{ Trouble() }).Trouble() // probe every instance
	for len(canary.Logins()) < 2 {       // the first probe round has ended
		select {
		case <-canary.Changed():
		case <-ctx.Done():
			t.Fatalf("the canary got %d logins, want 2: no probe round", len(canary.Logins()))
		}
	}
	if got, _ := parseToken(t, canary.Logins()[0].Password); got != canaryHost+":"+strconv.Itoa(int(cfg.ConnConfig.Port)) {
		t.Errorf("the canary's token is for %q, want its own name (the test's own check)", got)
	}
	if n := attacker.Attempts(); n != 0 {
		for _, l := range attacker.Logins() {
			host, _ := parseToken(t, l.Password)
			t.Errorf("the host outside the domain got a token for %s", host)
		}
		t.Errorf("the host outside the domain got %d connection attempts; want none", n)
	}
	if strings.Count(logs.String(), "outside the cluster's domain") != 1 {
		t.Errorf("want one WARN naming the row:\n%s", logs)
	}
}
