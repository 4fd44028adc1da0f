package outagetest_test

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/fakes/outagetest"
)

// A DNS-only Multi-AZ DB instance, with TLS, against plain pgxpool as the
// control: the shape (no topology function, a standby refused with 57P03,
// verify-full by the endpoint name), a failover in which the old
// primary's address goes silent (a dial times out, it is not refused),
// the pool's requests fail or hang from the silence until its cached DNS
// answer moves, then go through again; every acknowledged write is on
// the new primary; the old primary rejoins as the standby, and a second
// failover goes back.
func TestMultiAZFailover(t *testing.T) {
	t.Parallel()
	const ttl = 200 * time.Millisecond
	began := time.Now()
	m := outagetest.StartMultiAZTest(t, outagetest.MultiAZConfig{TTL: ttl, TLS: true})
	t.Logf("MEASURED start, with TLS: %s", ms(time.Since(began)))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first, standby := m.Primary(), m.Standby()
	if ids := m.ServerIDs(); !slices.Equal(ids, []string{"us-east-1a", "us-east-1b"}) || first != ids[0] || standby != ids[1] {
		t.Fatalf("servers %v, primary %s, standby %s", ids, first, standby)
	}
	if m.Endpoint != "orders.abcdefghijkl.us-east-1.rds.amazonaws.com" {
		t.Errorf("Endpoint %s", m.Endpoint)
	}
	refused(ctx, t, m.DSN(m.Addr(standby), "connect_timeout=5"), "57P03")

	cfg, err := m.PoolConfig(m.Endpoint, "connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	if tc := cfg.ConnConfig.TLSConfig; tc == nil || tc.ServerName != m.Endpoint || tc.InsecureSkipVerify {
		t.Fatalf("PoolConfig: TLS %+v; want verify-full of %s", tc, m.Endpoint)
	}
	admin := connect(ctx, t, cfg)
	var ssl, recovering, aurora, rdsTools bool
	if err := admin.QueryRow(ctx, `SELECT s.ssl, pg_is_in_recovery(), to_regproc('aurora_replica_status') IS NOT NULL,
		to_regnamespace('rds_tools') IS NOT NULL FROM pg_stat_ssl s WHERE s.pid = pg_backend_pid()`).Scan(&ssl, &recovering, &aurora, &rdsTools); err != nil {
		t.Fatal(err)
	}
	if !ssl || recovering || aurora || rdsTools {
		t.Fatalf("endpoint: ssl %v, in recovery %v, aurora_replica_status %v, rds_tools %v; want TLS to a primary without topology", ssl, recovering, aurora, rdsTools)
	}
	if _, err := admin.Exec(ctx, "CREATE TABLE t (id bigint PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}

	l := startWriting(t, pool(t, cfg), 500*time.Millisecond)

	events := make(chan outagetest.Event, 16)
	type result struct {
		res outagetest.Result
		err error
	}
	done := make(chan result, 1)
	began = time.Now()
	go func() {
		res, err := m.Failover(ctx, outagetest.FailoverScenario{Detect: 300 * time.Millisecond, DNSLag: time.Second, Rejoin: true,
			OnEvent: func(e outagetest.Event) { events <- e }})
		done <- result{res, err}
	}()
	select {
	case e := <-events:
		if e.Name != outagetest.EventSilent || e.Server != first {
			t.Fatalf("first event %+v; want %s of %s", e, outagetest.EventSilent, first)
		}
	case r := <-done:
		t.Fatalf("failover ended before its first event: %v", r.err)
	}
	// The old primary's address drops a new connection's SYN: the dial
	// times out, it is not refused.
	dialed := time.Now()
	if c, err := net.DialTimeout("tcp", m.Addr(first), 300*time.Millisecond); kind(err) != "timeout" {
		if c != nil {
			c.Close()
		}
		t.Errorf("dial to the silent primary: %v; want a timeout", err)
	}
	t.Logf("MEASURED a dial to the silent address: timeout after %s", ms(time.Since(dialed)))
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	res := r.res
	timeline(t, began, res.Events)
	silent, _ := res.At(outagetest.EventSilent)
	moved, ok := res.At(outagetest.EventDNS)
	if !ok || res.OldPrimary != first || res.NewPrimary != standby || m.Primary() != standby {
		t.Fatalf("failover %+v; primary now %s", res, m.Primary())
	}
	waitUntil(t, ttl+10*time.Second, "a write acknowledged after the DNS moved", l.Changed, func() bool {
		_, ok := l.firstOK(moved)
		return ok
	})
	back, _ := l.firstOK(moved)
	l.stop()

	// The control bites: no request started between the silence and the
	// DNS move went through, and they failed or hung.
	during := l.started(silent, moved)
	k := kinds(during)
	t.Logf("MEASURED plain pgxpool, %d requests from the silence to the DNS move: %v; first acknowledged %s after the move (TTL %s)",
		len(during), k, ms(back.Sub(moved)), ms(ttl))
	if k["ok"] != 0 || len(during) == 0 {
		t.Errorf("requests between the silence and the DNS move: %v; want all failed", k)
	}
	if k["timeout"] == 0 {
		t.Errorf("requests between the silence and the DNS move: %v; want some that hung until their deadline", k)
	}
	if d := back.Sub(moved); d > ttl+3*time.Second {
		t.Errorf("first write %v after the DNS move; want within the cache's TTL (%v) and a few requests", d, ttl)
	}

	committed, err := m.CommittedIDs(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if lost := missing(l.acked(), committed); len(lost) > 0 {
		t.Errorf("acknowledged writes missing on %s: %v", standby, lost)
	}
	t.Logf("%d writes acknowledged, %d rows on %s", len(l.acked()), len(committed), standby)

	// Rejoined: the old primary is the standby, not readable, its address
	// answering again.
	if m.Standby() != first {
		t.Fatalf("standby %q, want %s", m.Standby(), first)
	}
	refused(ctx, t, m.DSN(m.Addr(first), "connect_timeout=5"), "57P03")

	// A second failover goes back, every acknowledged write kept.
	res2, err := m.Failover(ctx, outagetest.FailoverScenario{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Primary() != first || res2.NewPrimary != first {
		t.Fatalf("after failing back: primary %s, result %+v", m.Primary(), res2)
	}
	if got := m.Resolver.Addrs(m.Endpoint); !slices.Equal(got, []string{m.Addr(first)}) {
		t.Errorf("endpoint resolves to %v after failing back, want %s", got, m.Addr(first))
	}
	committed, err = m.CommittedIDs(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if lost := missing(l.acked(), committed); len(lost) > 0 {
		t.Errorf("acknowledged writes missing on %s after failing back: %v", first, lost)
	}
	if _, err := m.Failover(ctx, outagetest.FailoverScenario{}); err == nil {
		t.Error("a failover without a standby succeeded")
	}
}
