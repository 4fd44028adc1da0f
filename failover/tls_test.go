package failover_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/fakes/failovertest"
	"github.com/jackc/pgx/v5"
)

// passwordLog records what a host password function was asked, and what
// the pool's connections were, for TestFailoverTLSAndPasswordHosts.
type passwordLog struct {
	mu    sync.Mutex
	asks  []passwordAsk     // every call, in order
	pool  map[string]string // token → host, for the pool's connects (seen by its BeforeConnect)
	conns []connRecord      // the pool's connections, as made
}

type passwordAsk struct {
	host, token string
	at          time.Time
}

// connRecord is one connection of the pool, seen by its AfterConnect.
type connRecord struct {
	at                time.Time
	host, token, addr string // the config's host, its password, the socket's remote address
	tls               bool   // the connection is a *tls.Conn
	serverName        string // the name its certificate was verified for
	verified          bool   // the certificate chain was verified
}

// password is the factory's host password function: any password works
// on the simulator (trust authentication), so it returns a token of its
// own per call, which tells the calls apart.
func (l *passwordLog) password(ctx context.Context, host string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	tok := "token-" + strconv.Itoa(len(l.asks)+1)
	l.asks = append(l.asks, passwordAsk{host: host, token: tok, at: time.Now()})
	return tok, nil
}

// beforeConnect is the pool's BeforeConnect, which holdfast calls after it
// set the password: the token tells the pool's calls from the monitor's.
func (l *passwordLog) beforeConnect(_ context.Context, cc *pgx.ConnConfig) error {
	l.mu.Lock()
	l.pool[cc.Password] = cc.Host
	l.mu.Unlock()
	return nil
}

// afterConnect is the pool's AfterConnect: it records the connection's
// TLS state (no query: the hook runs on every connect).
func (l *passwordLog) afterConnect(_ context.Context, conn *pgx.Conn) error {
	cfg := conn.Config()
	r := connRecord{at: time.Now(), host: cfg.Host, token: cfg.Password, addr: conn.PgConn().Conn().RemoteAddr().String()}
	if tc, ok := conn.PgConn().Conn().(*tls.Conn); ok {
		st := tc.ConnectionState()
		r.tls, r.serverName, r.verified = true, st.ServerName, len(st.VerifiedChains) > 0
	}
	l.mu.Lock()
	l.conns = append(l.conns, r)
	l.mu.Unlock()
	return nil
}

// tlsServer returns whether q's connection is TLS as the server sees it
// (pg_stat_ssl), and the id of the server.
func tlsServer(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (bool, string, error) {
	var on bool
	var id string
	err := q.QueryRow(ctx, "SELECT s.ssl, aurora_db_instance_identifier() FROM pg_stat_ssl s WHERE s.pid = pg_backend_pid()").Scan(&on, &id)
	return on, id, err
}

// TestFailoverTLSAndPasswordHosts plays a writer crash on a cluster that
// serves TLS, under a write workload through a holdfast pool on the
// cluster endpoint that verifies it (sslmode=verify-full) and gets its
// password from a host password function. Connections by the writer
// endpoint are dialed to the new writer's address while DNS lags: they
// must still verify the certificate for the cluster endpoint's name, and
// still ask the password for that name, never for an address. The
// monitor's own connections go to the instance endpoints, and ask for
// those names. A control shows that verification is on: the new writer's
// address with a name its certificate does not carry fails.
func TestFailoverTLSAndPasswordHosts(t *testing.T) {
	c := failovertest.StartTest(t, failovertest.Config{TTL: time.Second, TLS: true})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	log := &passwordLog{pool: map[string]string{}}
	f, err := holdfast.New(holdfast.WithFailover(failover.Config{}), holdfast.WithRetryPolicy(policy),
		holdfast.WithPasswordFunc(log.password))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := c.PoolConfig(c.ClusterEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	if tc := cfg.ConnConfig.TLSConfig; tc == nil || tc.InsecureSkipVerify || tc.ServerName != c.ClusterEndpoint {
		t.Fatalf("the cluster's pool config does not verify %s: %+v", c.ClusterEndpoint, tc)
	}
	cfg.BeforeConnect, cfg.AfterConnect = log.beforeConnect, log.afterConnect
	pool, err := f.NewPool(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "CREATE TABLE orders (id bigint PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	first := c.Writer()
	if on, id, err := tlsServer(ctx, pool); err != nil || !on || id != first {
		t.Fatalf("pool on the cluster endpoint: TLS %v on %q, %v; want TLS on %s", on, id, err, first)
	}
	m := f.Failover(pool)
	if m == nil {
		t.Fatal("Factory.Failover: no monitor for the pool")
	}
	w := &writer{errs: map[string]int{}}
	wctx, wcancel := context.WithCancel(ctx)
	wg := w.run(wctx, pool, "orders", 4)
	defer func() { wcancel(); wg.Wait() }()
	if !w.steady(ctx, m) {
		t.Fatal("the monitor never read the topology")
	}

	start := time.Now()
	res, err := c.Failover(ctx, failovertest.Scenario{Kind: failovertest.Crash, Detect: 300 * time.Millisecond,
		DNSLag: 3 * time.Second, Rejoin: true})
	if err != nil {
		t.Fatal(err)
	}
	promoted, _ := res.At(failovertest.EventPromoted)
	moved, _ := res.At(failovertest.EventDNS)
	if !waitFor(ctx, func() bool { _, ok := w.firstAckAfter(promoted.Add(500 * time.Millisecond)); return ok }) {
		t.Fatal("no write went through after the failover")
	}
	wcancel()
	wg.Wait()

	st := m.Status()
	logTimeline(t, start, res, st)
	t.Logf("%d writes acknowledged, %d failed %v; monitor connections %d", len(w.acked), w.failed, w.errs, st.MonitorConnects)

	// Writes resumed long before DNS moved: over connections dialed to
	// the new writer's address, which verified the certificate for the
	// cluster endpoint (the pool accepts no other).
	resumed, ok := w.firstAckAfter(promoted)
	t.Logf("writes resumed %v after the promotion, %v before the DNS move", resumed.Sub(promoted), moved.Sub(resumed))
	if !ok || resumed.Sub(promoted) > 1500*time.Millisecond {
		t.Errorf("writes resumed %v after the promotion; want within 1.5 s", resumed.Sub(promoted))
	}
	if l := lost(ctx, t, c, "orders", w.acked); len(l) > 0 {
		t.Errorf("%d acknowledged writes lost: %v", len(l), l)
	}

	// Every connection the pool made is TLS, verified for the cluster
	// endpoint; some reached the new writer's address while the DNS still
	// named the old one.
	newAddr := c.Addr(res.NewWriter)
	log.mu.Lock()
	conns := append([]connRecord(nil), log.conns...)
	asks := append([]passwordAsk(nil), log.asks...)
	poolTokens := make(map[string]string, len(log.pool))
	for k, v := range log.pool {
		poolTokens[k] = v
	}
	log.mu.Unlock()
	redirected := 0
	for _, r := range conns {
		if !r.tls || !r.verified || r.serverName != c.ClusterEndpoint || r.host != c.ClusterEndpoint {
			t.Errorf("pool connection to %s at %v: host %q, TLS %v, verified %v for %q; want TLS verified for %s",
				r.addr, r.at.Sub(start), r.host, r.tls, r.verified, r.serverName, c.ClusterEndpoint)
		}
		if _, ok := poolTokens[r.token]; !ok {
			t.Errorf("pool connection to %s at %v: its password %q was not issued for the pool's connect", r.addr, r.at.Sub(start), r.token)
		}
		if r.addr == newAddr && r.at.After(promoted) && r.at.Before(moved) {
			redirected++
		}
	}
	if redirected == 0 {
		t.Errorf("no pool connection reached the new writer (%s) between the promotion and the DNS move: %d connections in all", newAddr, len(conns))
	}
	t.Logf("%d pool connections, %d of them redirected to %s while DNS lagged", len(conns), redirected, newAddr)

	// The password was asked for names only: the cluster endpoint for the
	// pool's connections, whatever address they were dialed to; the
	// instance endpoints (and the cluster endpoint, for its first
	// connection) for the monitor's.
	names := map[string]bool{c.ClusterEndpoint: true}
	for _, id := range c.ServerIDs() {
		names[c.InstanceEndpoint(id)] = true
	}
	monitorAsked := map[string]int{}
	poolAsks, poolInLag := 0, 0
	for _, a := range asks {
		if _, _, err := net.SplitHostPort(a.host); err == nil || net.ParseIP(a.host) != nil {
			t.Errorf("password asked for an address, %q, at %v", a.host, a.at.Sub(start))
			continue
		}
		if !names[a.host] {
			t.Errorf("password asked for %q, neither the cluster endpoint nor an instance endpoint", a.host)
		}
		if host, ok := poolTokens[a.token]; ok {
			poolAsks++
			if a.host != c.ClusterEndpoint || host != c.ClusterEndpoint {
				t.Errorf("pool connect (host %q) asked the password for %q; want %s", host, a.host, c.ClusterEndpoint)
			}
			if a.at.After(promoted) && a.at.Before(moved) {
				poolInLag++
			}
			continue
		}
		monitorAsked[a.host]++
	}
	t.Logf("password asks: %d by the pool (%d during the DNS lag), by the monitor %v", poolAsks, poolInLag, monitorAsked)
	if poolAsks < len(conns) {
		t.Errorf("%d password asks by the pool for %d connections", poolAsks, len(conns))
	}
	// (Asks during the lag are not required: a connect held in its dial
	// while the writer was down asked before the promotion, for the same
	// name; every redirected connection's password was checked above.)
	for _, id := range []string{res.OldWriter, res.NewWriter} {
		if monitorAsked[c.InstanceEndpoint(id)] == 0 {
			t.Errorf("the monitor never asked the password for %s's instance endpoint %s: %v", id, c.InstanceEndpoint(id), monitorAsked)
		}
	}
	// A host that does not answer is dialed, and its token fetched, about
	// once a second, not at every probe (100 ms): the old writer was
	// down for the whole run from the crash to its return as a reader.
	if back, ok := res.At(failovertest.EventBackAsReader); ok {
		down, _ := res.At(failovertest.EventWriterDown)
		if n, most := monitorAsked[c.InstanceEndpoint(res.OldWriter)], int(back.Sub(down).Seconds())+8; n > most {
			t.Errorf("the monitor asked the password for the down writer %d times in %v, want at most %d (about one a second)",
				n, back.Sub(down).Round(time.Millisecond), most)
		}
	}

	// Every connection the pool holds now, and a fresh one, is TLS as the
	// server sees it, on the new writer.
	for _, ic := range pool.AcquireAllIdle(ctx) {
		on, id, err := tlsServer(ctx, ic)
		if err != nil || !on || id != res.NewWriter {
			t.Errorf("idle pool connection: TLS %v on %q, %v; want TLS on %s", on, id, err, res.NewWriter)
		}
		ic.Release()
	}
	pool.Reset()
	if on, id, err := tlsServer(ctx, pool); err != nil || !on || id != res.NewWriter {
		t.Errorf("fresh pool connection: TLS %v on %q, %v; want TLS on %s", on, id, err, res.NewWriter)
	}

	// The control: verification is on. The new writer's address, verified
	// for the cluster endpoint's name, connects (what a redirected dial
	// does); verified for a name the certificate does not carry, it fails.
	host, port, err := net.SplitHostPort(newAddr)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.ParseUint(port, 10, 16)
	other := "other" + strings.TrimPrefix(c.ClusterEndpoint, strings.SplitN(c.ClusterEndpoint, ".", 2)[0])
	for _, name := range []string{c.ClusterEndpoint, other} {
		cc, err := c.PoolConfig(c.ClusterEndpoint, "connect_timeout=5")
		if err != nil {
			t.Fatal(err)
		}
		conf := cc.ConnConfig
		conf.Host, conf.Port = host, uint16(p)
		conf.LookupFunc = func(context.Context, string) ([]string, error) { return []string{host}, nil }
		conf.TLSConfig.ServerName = name
		conn, err := pgx.ConnectConfig(ctx, conf)
		if err == nil {
			conn.Close(context.Background())
		}
		var he x509.HostnameError
		switch {
		case name == c.ClusterEndpoint && err != nil:
			t.Errorf("control: %s verified on %s: %v", name, newAddr, err)
		case name != c.ClusterEndpoint && !errors.As(err, &he):
			t.Errorf("control: %s, not in the certificate, verified on %s: %v; want an x509.HostnameError", name, newAddr, err)
		}
	}
}
