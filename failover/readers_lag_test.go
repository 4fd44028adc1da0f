package failover_test

import (
	"context"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/fakes/failovertest"
)

// eventAt returns when m's timeline last recorded name for server, or
// the zero time.
func eventAt(m failover.Monitor, name, server string) time.Time {
	var at time.Time
	for _, e := range m.Status().Events {
		if e.Name == name && e.Server == server {
			at = e.At
		}
	}
	return at
}

// TestReaderLagRetires: a reader that starts lagging beyond MaxLag under a
// read load serves no read that started after the monitor read its lag
// (the pool's connections to it are retired: idle ones closed, busy ones
// destroyed when next acquired), and no read fails; once it catches up,
// the pool's connections come back to it.
func TestReaderLagRetires(t *testing.T) {
	c := failovertest.StartTest(t, failovertest.Config{Replicas: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := newFactory(t, holdfast.WithFailover(failover.Config{RefreshInterval: 200 * time.Millisecond,
		Readers: failover.ReaderConfig{MaxLag: time.Second}}))
	readerUsers(ctx, t, c, "lag")
	cfg, err := c.PoolConfig(c.ReaderEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.User = "lag"
	cfg.MinConns, cfg.MaxConns = 6, 6
	// A connection retired in use is destroyed when next acquired; pgxpool
	// dials a replacement when the load needs one, or at its health check,
	// which restores MinConns: short here, 1 min by default.
	cfg.HealthCheckPeriod = 500 * time.Millisecond
	pool, err := f.NewPool(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	openAtOnce(ctx, t, pool, 6)
	m := f.Failover(pool)
	readers := c.Readers()
	lagging, fresh := readers[0], readers[1]
	lagAddr, freshAddr := c.Addr(lagging), c.Addr(fresh)

	var r timedReads
	wctx, stop := context.WithCancel(ctx)
	wg := r.run(wctx, pool, 4, 5*time.Second)
	defer func() { stop(); wg.Wait() }()
	// 4 workers busy on 3 + 3 connections: both readers serve reads.
	if !waitFor(ctx, func() bool { got := r.after(time.Time{}); return got[lagAddr] > 20 && got[freshAddr] > 20 }) {
		t.Fatalf("reads per reader before the lag %v: want both readers serving", r.after(time.Time{}))
	}

	setAt := time.Now()
	if err := c.SetLag(ctx, lagging, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	var seen time.Time
	if !waitFor(ctx, func() bool { seen = eventAt(m, "reader lagging", lagging); return !seen.IsZero() }) {
		t.Fatalf("no %q event for %s: %+v", "reader lagging", lagging, m.Status().Events)
	}
	// The retirement runs on the monitor's goroutine right after the
	// event: a read that started 50 ms later found no connection there.
	cut := seen.Add(50 * time.Millisecond)
	total := func(m map[string]int) (n int) {
		for _, k := range m {
			n += k
		}
		return n
	}
	if !waitFor(ctx, func() bool { return total(r.after(cut)) >= 200 }) {
		t.Fatal("the reads stopped after the lag")
	}
	got := r.after(cut)
	n := total(got)
	t.Logf("lag set, event %v later; %d reads after it: %v", seen.Sub(setAt).Round(time.Millisecond), n, got)
	if got[lagAddr] != 0 {
		t.Errorf("%d of %d reads that started after the lag was read were served by the lagging %s", got[lagAddr], n, lagging)
	}
	for _, pc := range pool.AcquireAllIdle(ctx) {
		if a := pc.Conn().PgConn().Conn().RemoteAddr().String(); a == lagAddr {
			t.Errorf("an idle connection to the lagging %s stays in the pool", lagging)
		}
		pc.Release()
	}

	// It catches up: the pool's connections come back to it.
	if err := c.SetLag(ctx, lagging, 0); err != nil {
		t.Fatal(err)
	}
	if !waitFor(ctx, func() bool { return !eventAt(m, "reader caught up", lagging).IsZero() }) {
		t.Fatalf("no %q event for %s", "reader caught up", lagging)
	}
	// Its share of the pool's connections (3 of 6) comes back. (Which
	// connections serve the reads is pgxpool's choice: the one released
	// last.)
	var n2 int
	if !waitFor(ctx, func() bool { n2 = poolConnsOn(ctx, t, c, lagging, "lag"); return n2 >= 3 }) {
		t.Errorf("the caught-up %s holds %d of the pool's connections, want its share, 3", lagging, n2)
	}
	t.Logf("caught up: %s holds %d of the pool's connections %v after the event", lagging, n2, time.Since(eventAt(m, "reader caught up", lagging)).Round(time.Millisecond))
	stop()
	wg.Wait()
	if fails := r.failures(); len(fails) > 0 {
		t.Errorf("%d reads failed: %v", len(fails), fails)
	}
}
