package outagetest_test

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast/fakes/outagetest"
)

// since counts how the requests of l started at or after t ended.
func since(l *load, t time.Time) map[string]int {
	return kinds(l.started(t, time.Now().Add(time.Hour)))
}

// demoteHeld creates table t, writes through pl (startWriting), demotes
// p's primary with the name held on it, and returns once a write was
// refused with 25006.
func demoteHeld(ctx context.Context, t *testing.T, p *outagetest.Pair, pl *pgxpool.Pool) (*load, outagetest.Result) {
	t.Helper()
	if _, err := pl.Exec(ctx, "CREATE TABLE t (id bigint PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	l := startWriting(t, pl, time.Second)
	res, err := p.Demote(ctx, outagetest.DemoteScenario{Hold: true})
	if err != nil {
		t.Fatal(err)
	}
	rejoined, _ := res.At(outagetest.EventRejoined)
	waitUntil(t, 10*time.Second, "a write refused with 25006", l.Changed, func() bool { return since(l, rejoined)["25006"] > 0 })
	return l, res
}

// A primary behind a DNS name demoted to a read-only standby, the name
// held on it, against plain pgxpool as the control: the pool's
// connection dies with 57P01, it connects again by the name to the
// demoted server and its writes fail with 25006 (reads go through); once
// the name moved and the pool's cached answer expired, the pool keeps
// that connection and its writes keep failing, while a new pool writes on
// the new primary. A second demote, with the name moving after a lag,
// switches back.
func TestDemoteName(t *testing.T) {
	t.Parallel()
	const ttl = 100 * time.Millisecond
	began := time.Now()
	p := outagetest.StartPairTest(t, outagetest.PairConfig{TTL: ttl})
	t.Logf("MEASURED start: %s", ms(time.Since(began)))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first, second := p.Primary(), p.Standby()
	if ids := p.ServerIDs(); !slices.Equal(ids, []string{"pg-1", "pg-2"}) || first != "pg-1" || second != "pg-2" || p.VIP != "" {
		t.Fatalf("servers %v, primary %s, standby %s, VIP %q", ids, first, second, p.VIP)
	}
	cfg, err := p.PoolConfig(p.Name, "connect_timeout=1", "pool_max_conns=1")
	if err != nil {
		t.Fatal(err)
	}
	pl := pool(t, cfg)
	began = time.Now()
	l, res := demoteHeld(ctx, t, p, pl)
	timeline(t, began, res.Events)
	if res.OldPrimary != first || res.NewPrimary != second || p.Primary() != second || p.Standby() != first {
		t.Fatalf("demote %+v; primary %s, standby %s", res, p.Primary(), p.Standby())
	}
	if _, ok := res.At(outagetest.EventDNS); ok {
		t.Fatal("the name moved with Hold")
	}
	var recovering bool
	if err := pl.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&recovering); err != nil || !recovering {
		t.Errorf("read through the pool: in recovery %v, %v; want a read on the demoted standby", recovering, err)
	}

	ev := p.MoveName()
	if ev.Name != outagetest.EventDNS || ev.Server != second {
		t.Fatalf("MoveName: %+v", ev)
	}
	// Once the pool's cached answer names the new primary, the pool
	// still writes on its connection to the demoted server.
	waitUntil(t, 5*time.Second, "the cached answer names the new primary", poll, func() bool {
		a, err := p.Cache.Lookup(ctx, p.Name)
		return err == nil && slices.Equal(a, []string{p.Addr(second)})
	})
	expired := time.Now()
	waitUntil(t, 10*time.Second, "10 writes after the cache expired", l.Changed, func() bool { return len(l.started(expired, time.Now().Add(time.Hour))) >= 10 })
	l.stop()
	all := l.started(began, time.Now())
	after := since(l, expired)
	t.Logf("MEASURED plain pgxpool: from the demote on %v; after the name moved and the cache expired %v", kinds(all), after)
	if after["25006"] != 10 || len(after) != 1 {
		t.Errorf("writes after the name moved: %v; want every one refused with 25006 (the pool keeps its connection)", after)
	}
	k := kinds(all)
	if k["57P01"]+k["57P03"] == 0 {
		t.Logf("no 57P01 seen (the pool pinged its idle connection first): %v", k)
	}
	fresh := pool(t, cfg)
	if _, err := fresh.Exec(ctx, "INSERT INTO t VALUES (-1)"); err != nil {
		t.Fatalf("a new pool's write: %v", err)
	}
	committed, err := p.CommittedIDs(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if lost := missing(l.acked(), committed); len(lost) > 0 {
		t.Errorf("acknowledged writes missing on %s: %v", second, lost)
	}

	// Back, the name moving 300 ms after the promotion.
	began = time.Now()
	res, err = p.Demote(ctx, outagetest.DemoteScenario{NameLag: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	timeline(t, began, res.Events)
	promoted, _ := res.At(outagetest.EventPromoted)
	moved, ok := res.At(outagetest.EventDNS)
	if !ok || moved.Sub(promoted) < 300*time.Millisecond || p.Primary() != first {
		t.Fatalf("demote back: %+v; primary %s", res, p.Primary())
	}
	if got := p.Resolver.Addrs(p.Name); !slices.Equal(got, []string{p.Addr(first)}) {
		t.Errorf("name resolves to %v, want %s", got, p.Addr(first))
	}
	committed, err = p.CommittedIDs(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if lost := missing(append(l.acked(), -1), committed); len(lost) > 0 {
		t.Errorf("acknowledged writes missing on %s: %v", first, lost)
	}
}

// The VIP flavour, on 127.0.0.1 alone: the name resolves to the VIP; while it leads to the
// demoted server (held), plain pgxpool's writes fail with 25006; when it
// moves, it resets the pool's connection to the demoted server, and the
// pool, connecting again through the VIP, writes on the new primary:
// a plain pool recovers after one failed request.
func TestDemoteVIP(t *testing.T) {
	t.Parallel()
	began := time.Now()
	// 192.0.2.1 (TEST-NET-1) is not a local address: every server and the
	// VIP listen on 127.0.0.1, each on a port of its own.
	p := outagetest.StartPairTest(t, outagetest.PairConfig{VIP: true, TTL: -1, PrimaryHost: "192.0.2.1"})
	t.Logf("MEASURED start, with a VIP: %s", ms(time.Since(began)))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if got := p.Resolver.Addrs(p.Name); p.VIP == "" || !slices.Equal(got, []string{p.VIP}) {
		t.Fatalf("name resolves to %v, VIP %q", got, p.VIP)
	}
	for _, a := range []string{p.VIP, p.Addr("pg-1"), p.Addr("pg-2")} {
		if host, _, _ := net.SplitHostPort(a); !p.SingleIP || host != "127.0.0.1" {
			t.Fatalf("SingleIP %v, address %s; want 127.0.0.1 for all", p.SingleIP, a)
		}
	}
	cfg, err := p.PoolConfig(p.Name, "connect_timeout=1", "pool_max_conns=1")
	if err != nil {
		t.Fatal(err)
	}
	began = time.Now()
	l, res := demoteHeld(ctx, t, p, pool(t, cfg))
	ev := p.MoveName()
	if ev.Name != outagetest.EventVIP {
		t.Fatalf("MoveName: %+v", ev)
	}
	timeline(t, began, append(res.Events, ev))
	waitUntil(t, 10*time.Second, "a write acknowledged after the VIP moved", l.Changed, func() bool {
		_, ok := l.firstOK(ev.At)
		return ok
	})
	back, _ := l.firstOK(ev.At)
	waitUntil(t, 10*time.Second, "5 more writes", l.Changed, func() bool { return len(l.started(back, time.Now().Add(time.Hour))) >= 5 })
	l.stop()
	after := since(l, ev.At)
	t.Logf("MEASURED plain pgxpool through the VIP: from the demote on %v; after the VIP moved %v, first write %s after it",
		kinds(l.started(began, time.Now())), after, ms(back.Sub(ev.At)))
	if after["25006"] > 1 || len(after) > 2 || after["ok"] < 5 {
		t.Errorf("writes after the VIP moved: %v; want at most one failure, then writes", after)
	}
	committed, err := p.CommittedIDs(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if lost := missing(l.acked(), committed); len(lost) > 0 {
		t.Errorf("acknowledged writes missing: %v", lost)
	}
}
