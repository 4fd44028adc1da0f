package failovertest_test

import (
	"context"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/fakes/failovertest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// querier is a pool or a connection.
type querier interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}

// tlsServer returns whether q's connection is TLS (pg_stat_ssl) and the id
// of the server it reaches.
func tlsServer(ctx context.Context, q querier) (bool, string, error) {
	var on bool
	var id string
	err := q.QueryRow(ctx, "SELECT s.ssl, aurora_db_instance_identifier() FROM pg_stat_ssl s WHERE s.pid = pg_backend_pid()").Scan(&on, &id)
	return on, id, err
}

// With Config.TLS every server presents the cluster's certificate: a pool
// on the cluster endpoint connects with verify-full to the writer before a
// graceful failover with Rejoin, and to the new writer after it; every
// endpoint name verifies on the server it leads to, before and after, the
// old writer rejoined from a fresh base backup too; the new writer's
// address verifies for the cluster endpoint's name (what a dial redirected
// while DNS lags needs) and fails for a name the certificate does not
// carry.
func TestTLS(t *testing.T) {
	c := failovertest.StartTest(t, failovertest.Config{TLS: true, TTL: 100 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if c.CAFile == "" {
		t.Fatal("CAFile is empty with Config.TLS")
	}
	if _, err := os.Stat(c.CAFile); err != nil {
		t.Fatal(err)
	}
	if dsn := c.DSN(c.Addr(c.Writer())); !strings.Contains(dsn, "sslmode=disable") {
		t.Errorf("DSN of an address %q: want sslmode=disable", dsn)
	}
	cfg, err := c.PoolConfig(c.ClusterEndpoint, "connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	if tc := cfg.ConnConfig.TLSConfig; tc == nil || tc.InsecureSkipVerify || tc.ServerName != c.ClusterEndpoint || tc.RootCAs == nil ||
		len(cfg.ConnConfig.Fallbacks) != 0 {
		t.Fatalf("PoolConfig(cluster endpoint): TLS %+v, %d fallbacks; want verify-full of %s against CAFile", tc, len(cfg.ConnConfig.Fallbacks), c.ClusterEndpoint)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	// names checks each endpoint name on a connection of its own, resolved
	// without a cache: TLS verified for the name, on the server it leads to.
	names := func(when string, readers []string) {
		t.Helper()
		want := map[string][]string{c.ClusterEndpoint: {c.Writer()}, c.ReaderEndpoint: readers}
		for _, id := range c.ServerIDs() {
			want[c.InstanceEndpoint(id)] = []string{id}
		}
		for name, ids := range want {
			cfg, err := c.PoolConfig(name, "connect_timeout=5")
			if err != nil {
				t.Fatal(err)
			}
			cfg.ConnConfig.LookupFunc = c.Resolver.Lookup
			conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
			if err != nil {
				t.Errorf("%s: %s: %v", when, name, err)
				continue
			}
			on, id, err := tlsServer(ctx, conn)
			conn.Close(context.Background())
			if err != nil || !on || !strings.Contains(strings.Join(ids, " "), id) {
				t.Errorf("%s: %s: TLS %v on %q, %v; want TLS on %v", when, name, on, id, err, ids)
			}
		}
	}

	first := c.Writer()
	if on, id, err := tlsServer(ctx, pool); err != nil || !on || id != first {
		t.Fatalf("pool on the cluster endpoint: TLS %v on %q, %v; want TLS on %s", on, id, err, first)
	}
	names("before", []string{c.ServerIDs()[1]})
	if _, err := pool.Exec(ctx, "CREATE TABLE t (id bigint PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}

	res, err := c.Failover(ctx, failovertest.Scenario{Kind: failovertest.Graceful, Detect: 100 * time.Millisecond,
		DNSLag: 200 * time.Millisecond, Rejoin: true})
	if err != nil {
		t.Fatal(err)
	}
	// The pool's connections to the old writer were closed by its shutdown;
	// it connects again once its cache (100 ms) has the new answer.
	var on bool
	var id string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if on, id, err = tlsServer(ctx, pool); err == nil && id == res.NewWriter {
			break
		}
	}
	if err != nil || !on || id != res.NewWriter {
		t.Fatalf("pool on the cluster endpoint after the failover: TLS %v on %q, %v; want TLS on %s", on, id, err, res.NewWriter)
	}
	if _, err := pool.Exec(ctx, "INSERT INTO t VALUES (1)"); err != nil {
		t.Errorf("write through the pool after the failover: %v", err)
	}
	names("after", []string{res.OldWriter})

	// A connection to the new writer's address that verifies the cluster
	// endpoint's name, as one redirected at dial time does, succeeds; the
	// same with a name the certificate does not carry fails verification.
	host, port, err := net.SplitHostPort(c.Addr(res.NewWriter))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.ParseUint(port, 10, 16)
	for _, tt := range []struct {
		name string
		ok   bool
	}{{c.ClusterEndpoint, true}, {"other.cluster-" + strings.SplitN(c.ClusterEndpoint, ".cluster-", 2)[1], false}} {
		cfg, err := c.PoolConfig(c.ClusterEndpoint, "connect_timeout=5")
		if err != nil {
			t.Fatal(err)
		}
		cc := cfg.ConnConfig
		cc.Host, cc.Port = host, uint16(p)
		cc.LookupFunc = func(context.Context, string) ([]string, error) { return []string{host}, nil }
		cc.TLSConfig.ServerName = tt.name
		conn, err := pgx.ConnectConfig(ctx, cc)
		if tt.ok {
			if err != nil {
				t.Errorf("%s verified on %s: %v", tt.name, c.Addr(res.NewWriter), err)
				continue
			}
			on, id, err := tlsServer(ctx, conn)
			conn.Close(context.Background())
			if err != nil || !on || id != res.NewWriter {
				t.Errorf("%s on %s: TLS %v on %q, %v", tt.name, c.Addr(res.NewWriter), on, id, err)
			}
			continue
		}
		var he x509.HostnameError
		if err == nil {
			conn.Close(context.Background())
		}
		if !errors.As(err, &he) {
			t.Errorf("%s, not in the certificate, on %s: %v; want an x509.HostnameError", tt.name, c.Addr(res.NewWriter), err)
		}
	}

	// A reader added at run time presents a certificate of its own, from
	// the same CA, naming its instance endpoint as well.
	added, err := c.AddReader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	names("reader added", c.Readers())
	if !slices.Contains(c.Readers(), added) {
		t.Errorf("Readers() = %v, without %s", c.Readers(), added)
	}
}
