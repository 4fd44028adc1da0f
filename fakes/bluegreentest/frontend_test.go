package bluegreentest_test

import (
	"context"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	fake "github.com/holdfast-db/holdfast/fakes/bluegreentest"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestNodeCertsAndIAM checks the front ends of an Env with NodeCerts and
// IAM against real clients: each server presents a certificate for the
// names it carries, renewed only when the deployment says so, and takes
// an IAM token only when it is signed for a name it answers to at that
// moment; the superuser needs none, and cancel requests get through.
func TestNodeCertsAndIAM(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a blue/green deployment of real servers: skipped with -short")
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
	d, err := env.NewDeployment(ctx, fake.DeploymentConfig{Name: "certs"})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.CreateRole(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	n := d.Names
	port := strconv.Itoa(env.Blue.Port)
	token := func(host string) string {
		return fake.IAMToken(net.JoinHostPort(host, port), fake.DefaultRegion, "app")
	}

	// connect connects as user by host with password, verify-full, and
	// returns the server it reached ("blue", "green") or the error.
	connect := func(host, user, password string) (string, error) {
		cfg, err := pgx.ParseConfig(d.DSN(host))
		if err != nil {
			t.Fatal(err)
		}
		cfg.User, cfg.Password = user, password
		cfg.LookupFunc, cfg.DialFunc = env.Resolver.Lookup, env.Dial
		c, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			return "", err
		}
		defer c.Close(context.Background())
		var addr string
		if err := c.QueryRow(ctx, "SELECT host(inet_server_addr()) || ':' || inet_server_port()").Scan(&addr); err != nil {
			return "", err
		}
		switch addr {
		case env.Blue.ListenAddr:
			return "blue", nil
		case env.Green.ListenAddr:
			return "green", nil
		}
		return addr, nil
	}
	type step struct {
		host, user, password string
		want                 string // the server reached, or "28000", or "x509"
	}
	check := func(when string, steps []step) {
		t.Helper()
		for _, s := range steps {
			got, err := connect(s.host, s.user, s.password)
			var hn x509.HostnameError
			switch {
			case errors.As(err, &hn):
				got = "x509"
			case err != nil && sqlstate(err) == "28000":
				got = "28000"
			case err != nil:
				got = err.Error()
			}
			if got != s.want {
				t.Errorf("%s: %s by %s: got %q, want %q", when, s.user, s.host, got, s.want)
			}
		}
	}

	check("before the switchover", []step{
		{n.Cluster, "app", token(n.Cluster), "blue"},
		{n.Instance, "app", token(n.Instance), "blue"},
		{n.GreenCluster, "app", token(n.GreenCluster), "green"},
		{n.Cluster, "app", token(n.GreenCluster), "28000"}, // blue does not answer to green names
		{n.Cluster, "app", token(n.Cluster + ".evil.example"), "28000"},
		{n.Cluster, "app", "secret", "28000"},
		{n.Cluster, "app", fake.IAMToken(net.JoinHostPort(n.Cluster, "1"), fake.DefaultRegion, "app"), "28000"}, // another port
		{n.Cluster, "app", fake.IAMToken(net.JoinHostPort(n.Cluster, port), "eu-west-1", "app"), "28000"},       // another region
		{n.Cluster, "postgres", "", "blue"},                                                                     // the superuser needs no token
	})

	// Blue names lead to green before green takes them: green refuses the
	// blue-name token and its certificate lacks the blue names.
	d.SwapDNS()
	check("DNS swapped, not renamed", []step{
		{n.Cluster, "app", token(n.Cluster), "x509"},
		{n.GreenCluster, "app", token(n.GreenCluster), "green"},
	})
	cfgNoVerify := func(host, password string) error {
		cfg, err := pgx.ParseConfig(strings.Replace(d.DSN(host), "verify-full", "verify-ca", 1))
		if err != nil {
			t.Fatal(err)
		}
		cfg.User, cfg.Password = "app", password
		cfg.LookupFunc, cfg.DialFunc = env.Resolver.Lookup, env.Dial
		c, err := pgx.ConnectConfig(ctx, cfg)
		if err == nil {
			c.Close(context.Background())
		}
		return err
	}
	if err := cfgNoVerify(n.Cluster, token(n.Cluster)); sqlstate(err) != "28000" {
		t.Errorf("blue-name token to green before the rename (verify-ca): %v, want 28000", err)
	}
	if err := cfgNoVerify(n.Cluster, token(n.GreenCluster)); err != nil {
		t.Errorf("green-name token to green by the blue name before the rename (verify-ca): %v", err)
	}

	// Renamed: green answers to the blue names, old blue to the -old1
	// names; the certificates still carry the old names.
	if err := d.Rename(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cfgNoVerify(n.Cluster, token(n.Cluster)); err != nil {
		t.Errorf("blue-name token to green after the rename (verify-ca): %v", err)
	}
	if err := cfgNoVerify(n.Cluster, token(n.GreenCluster)); sqlstate(err) != "28000" {
		t.Errorf("green-name token to green after the rename (verify-ca): %v, want 28000", err)
	}
	check("renamed, certificates not renewed", []step{
		{n.Cluster, "app", token(n.Cluster), "x509"},
		{n.GreenCluster, "app", token(n.GreenCluster), "28000"},
		{n.OldCluster, "app", token(n.OldCluster), "x509"},
	})

	d.RenewCertificates()
	check("certificates renewed", []step{
		{n.Cluster, "app", token(n.Cluster), "green"},
		{n.Instance, "app", token(n.Instance), "green"},
		{n.OldCluster, "app", token(n.OldCluster), "blue"},
		{n.GreenCluster, "app", token(n.GreenCluster), "x509"},
	})

	// A cancel request reaches the server through the front end.
	cfg, err := pgx.ParseConfig(d.DSN(n.Cluster))
	if err != nil {
		t.Fatal(err)
	}
	cfg.User, cfg.Password = "app", token(n.Cluster)
	cfg.LookupFunc, cfg.DialFunc = env.Resolver.Lookup, env.Dial
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	qctx, qcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer qcancel()
	start := time.Now()
	_, err = c.Exec(qctx, "SELECT pg_sleep(20)")
	if took := time.Since(start); err == nil || took > 10*time.Second {
		t.Errorf("pg_sleep(20) with a 200ms context: %v after %v, want a canceled query at once", err, took)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code != "57014" {
		t.Errorf("canceled query: %v, want 57014", err)
	}
	// pgx sends the cancel request and closes the connection on a
	// goroutine of its own: wait for it before the servers go.
	start = time.Now()
	select {
	case <-c.PgConn().CleanupDone():
	case <-time.After(20 * time.Second):
		t.Fatal("pgx's cancel request through the front end did not end")
	}
	t.Logf("cancel request and close took %v", time.Since(start))
}

// TestScenarioNeedsEnv: the iam and node-certs scenarios refuse an Env
// that cannot show what they are about.
func TestScenarioNeedsEnv(t *testing.T) {
	t.Parallel()
	d := fake.Deployment{Env: &fake.Env{}} // no servers needed: refused before any step
	for _, s := range []fake.Scenario{fake.ScenarioIAM, fake.ScenarioNodeCerts} {
		if _, err := d.Switchover(context.Background(), fake.SwitchoverConfig{Scenario: s}); err == nil || !strings.Contains(err.Error(), "needs an Env") {
			t.Errorf("%s on a plain Env: %v, want an error", s, err)
		}
	}
}
