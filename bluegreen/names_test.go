package bluegreen_test

import (
	"context"
	"errors"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/bluegreen"
	fake "github.com/holdfast-db/holdfast/fakes/bluegreentest"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/retry"
	"github.com/jackc/pgx/v5/pgxpool"
)

// signer records the hosts tokens are issued for and issues them as the
// simulator checks them.
type signer struct {
	port int
	mu   sync.Mutex
	log  []string
}

func (s *signer) sign(_ context.Context, host string) (string, error) {
	s.mu.Lock()
	s.log = append(s.log, host)
	s.mu.Unlock()
	return fake.IAMToken(net.JoinHostPort(host, strconv.Itoa(s.port)), fake.DefaultRegion, "app"), nil
}

// since returns the hosts signed for from mark on.
func (s *signer) since(mark int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log[mark:])
}

func (s *signer) mark() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.log)
}

// TestNamesThroughSwitchover plays a switchover step by step on servers
// that check IAM tokens by host and present per-node certificates, with
// two holdfast pools (WithHostPasswordFunc), one of Factory.NewPool and
// one of Factory.Configure and pgxpool.NewWithConfig, each of its own
// factory, both with sslmode=verify-full by the blue cluster name: the
// token is issued for the name the server answers to (the green name in
// POST until the rename, then the blue name; the retry after a 28000 for
// the other one), and green's certificate is accepted for the green
// counterpart until it carries the blue names.
func TestNamesThroughSwitchover(t *testing.T) {
	if testing.Short() {
		t.Skip("plays a blue/green switchover on real servers: skipped with -short")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env, err := fake.Start(ctx, fake.Config{TLS: true, NodeCerts: true, IAM: true})
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
	d, err := env.NewDeployment(ctx, fake.DeploymentConfig{Name: "names"})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.CreateRole(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	set(t, d, fake.StatusAvailable)
	n := d.Names
	at := map[string]string{env.Blue.ListenAddr: "blue", env.Green.ListenAddr: "green"}

	// The holdfast pool.
	hs := &signer{port: env.Blue.Port}
	p := retry.Default()
	p.InitialInterval, p.MaxInterval = time.Millisecond, 5*time.Millisecond
	f, err := holdfast.New(holdfast.WithBlueGreen(fastConfig()), holdfast.WithPasswordFunc(hs.sign),
		holdfast.WithRetryPolicy(p), holdfast.WithStartupPolicy(p), holdfast.WithRetryBudget(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := d.RolePoolConfig(n.Cluster, "app")
	if err != nil {
		t.Fatal(err)
	}
	pool, err := f.NewPool(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	r := f.BlueGreen(pool)

	// The pool of Configure and pgxpool.NewWithConfig, on a factory of
	// its own (and a signer of its own, which its monitors use too).
	ns := &signer{port: env.Blue.Port}
	nf, err := holdfast.New(holdfast.WithBlueGreen(fastConfig()), holdfast.WithPasswordFunc(ns.sign),
		holdfast.WithRetryPolicy(p), holdfast.WithStartupPolicy(p), holdfast.WithRetryBudget(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer nf.Close()
	ncfg, err := d.RolePoolConfig(n.Cluster, "app")
	if err != nil {
		t.Fatal(err)
	}
	if err := nf.Configure(ncfg); err != nil {
		t.Fatal(err)
	}
	npool, err := pgxpool.NewWithConfig(ctx, ncfg)
	if err != nil {
		t.Fatal(err)
	}
	defer npool.Close()
	if err := npool.Ping(ctx); err != nil { // its first connection starts its monitors
		t.Fatal(err)
	}
	nr := nf.BlueGreen(npool)

	// connect opens a new connection of pool and returns the server it
	// reached.
	connect := func(what string, pool *pgxpool.Pool) string {
		t.Helper()
		idle := pool.AcquireAllIdle(ctx)
		defer func() {
			for _, c := range idle {
				c.Release()
			}
		}()
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		defer func() {
			_ = c.Conn().Close(ctx) // the pool destroys it: the next step has room for a new one
			c.Release()
		}()
		var addr string
		if err := c.QueryRow(ctx, "SELECT host(inet_server_addr()) || ':' || inet_server_port()").Scan(&addr); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return at[addr]
	}
	step := func(what, server string, want []string) {
		t.Helper()
		for _, p := range []struct {
			name string
			pool *pgxpool.Pool
			s    *signer
		}{{"NewPool", pool, hs}, {"Configure", npool, ns}} {
			m := p.s.mark()
			if got := connect(what+" ("+p.name+")", p.pool); got != server {
				t.Errorf("%s (%s): reached %s, want %s", what, p.name, got, server)
			}
			// Compact: a monitor that reconnects meanwhile signs for the
			// same name.
			if got := slices.Compact(p.s.since(m)); !slices.Equal(got, want) {
				t.Errorf("%s (%s): tokens for %q, want %q", what, p.name, got, want)
			}
		}
	}
	waitFor := func(what string, cond func(bluegreen.Status) bool) {
		t.Helper()
		for _, r := range []bluegreen.Router{r, nr} {
			c := &client{t: t, r: r}
			c.waitFor(what, cond)
		}
	}
	waitFor("CREATED and mapped", func(s bluegreen.Status) bool {
		return s.Phase == bluegreen.Created && len(s.Mapping) > 0 && s.Mapping[0].GreenAddr != "" &&
			s.Monitors[1].Connected && s.Monitors[1].Host == n.GreenCluster
	})
	step("CREATED", "blue", []string{n.Cluster})

	set(t, d, fake.StatusInitiated)
	waitFor("PREPARATION", func(s bluegreen.Status) bool { return s.Phase == bluegreen.Preparation })
	step("PREPARATION", "blue", []string{n.Cluster})
	set(t, d, fake.StatusInProgress)
	waitFor("IN_PROGRESS", func(s bluegreen.Status) bool { return s.Phase == bluegreen.InProgress })
	set(t, d, fake.StatusPostProcessing)
	waitFor("POST", func(s bluegreen.Status) bool { return s.Phase == bluegreen.Post })

	// POST, before the rename: the blue name leads to green, which answers
	// to the green name and presents a certificate for the green names.
	aliased := r.Status().AliasedCerts
	step("POST", "green", []string{n.GreenCluster})
	if got := r.Status().AliasedCerts; got <= aliased {
		t.Errorf("AliasedCerts %d after a connection verified against green's certificate, want more than %d", got, aliased)
	}
	st := r.Status()
	if i := slices.IndexFunc(st.Routing.Names, func(nm bluegreen.Name) bool { return nm.Host == n.Cluster }); i < 0 ||
		!slices.Equal(st.Routing.Names[i].Auth, []string{n.GreenCluster, n.Cluster}) {
		t.Errorf("Status.Routing.Names = %+v, want %s: auth [%s %s]", st.Routing.Names, n.Cluster, n.GreenCluster, n.Cluster)
	}

	// The servers are renamed before the metadata shows it: the token for
	// the green name is refused (28000), the one retry signs for the blue
	// name.
	d.RenameServers()
	step("POST, servers renamed, metadata not yet", "green", []string{n.GreenCluster, n.Cluster})

	// The metadata shows the rename: the blue name first.
	if err := d.Rename(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor("green topology changed", func(s bluegreen.Status) bool { return s.GreenTopologyChanged })
	step("POST, renamed", "green", []string{n.Cluster})

	// DNS moves, COMPLETED: the switchover ends, the routing returns to
	// plain host names, but green's certificate still lacks the blue
	// names: it is accepted for the green counterpart (the lingering
	// names) until it is renewed.
	d.SwapDNS()
	d.RemoveGreenDNS()
	set(t, d, fake.StatusCompleted)
	waitFor("the switchover's end", func(s bluegreen.Status) bool { return s.LastSummary != nil })
	if st := r.Status(); len(st.Routing.Names) == 0 || st.Routing.NamesUntil.IsZero() {
		t.Errorf("after COMPLETED: Routing.Names %+v until %v, want the blue names kept for a while", st.Routing.Names, st.Routing.NamesUntil)
	}
	aliased = r.Status().AliasedCerts
	step("after COMPLETED, certificates not renewed", "green", []string{n.Cluster})
	if got := r.Status().AliasedCerts; got <= aliased {
		t.Errorf("AliasedCerts %d after COMPLETED with green's old certificate, want more than %d", got, aliased)
	}
	d.RenewCertificates()
	aliased = r.Status().AliasedCerts
	step("certificates renewed", "green", []string{n.Cluster})
	if got := r.Status().AliasedCerts; got != aliased {
		t.Errorf("AliasedCerts %d after the renewal, want %d (green's certificate carries the blue names)", got, aliased)
	}
}
