package failover_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/fakes/failovertest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// BenchmarkReaderPaired measures Acquire + Release through a pool on the
// reader endpoint of a cluster of 3 real readers (fakes/failovertest) with
// reader routing on (least connections; its monitor running, its
// connections spread over the readers, nothing failing) against a plain
// pgxpool on the same endpoint, in short interleaved rounds. It reports
// the median per-round ratio (readers/plain) for the pool's own Acquire
// and for Factory.Acquire, and the allocations of the holdfast side:
//
//	HOLDFAST_REQUIRE_PG=1 go test -run '^$' -bench ReaderPaired -count 3 ./failover/
func BenchmarkReaderPaired(b *testing.B) {
	c := failovertest.StartTest(b, failovertest.Config{Replicas: 3})
	ctx := context.Background()
	cfg, err := c.PoolConfig(c.ReaderEndpoint)
	if err != nil {
		b.Fatal(err)
	}
	cfg.MinConns, cfg.MaxConns = 6, 6
	plainCfg := cfg.Copy()
	f, err := holdfast.New(holdfast.WithFailover(failover.Config{}))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(f.Close)
	hf, err := f.NewPool(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(hf.Close)
	plain, err := pgxpool.NewWithConfig(ctx, plainCfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(plain.Close)
	// Both pools hold their MinConns; holdfast's are on the readers.
	deadline := time.Now().Add(20 * time.Second)
	for plain.Stat().TotalConns() < 6 || hf.Stat().TotalConns() < 6 {
		if time.Now().After(deadline) {
			b.Fatalf("pools never filled: plain %d, holdfast %d", plain.Stat().TotalConns(), hf.Stat().TotalConns())
		}
		time.Sleep(10 * time.Millisecond)
	}
	readers := map[string]bool{}
	for _, id := range c.Readers() {
		readers[c.Addr(id)] = true
	}
	for _, pc := range hf.AcquireAllIdle(ctx) {
		if a := pc.Conn().PgConn().Conn().RemoteAddr().String(); !readers[a] {
			b.Fatalf("a holdfast connection to %s, not a reader (%v)", a, readers)
		}
		pc.Release()
	}

	acquires := []func() (*pgxpool.Conn, error){
		func() (*pgxpool.Conn, error) { return plain.Acquire(ctx) },
		func() (*pgxpool.Conn, error) { return hf.Acquire(ctx) },
		func() (*pgxpool.Conn, error) { return f.Acquire(ctx, hf) },
	}
	const n = 2000
	var pool, factory []float64
	round := 0
	for b.Loop() {
		var took [3]time.Duration
		for k := range 3 {
			i := (round + k) % 3
			start := time.Now()
			for range n {
				c, err := acquires[i]()
				if err != nil {
					b.Fatal(err)
				}
				c.Release()
			}
			took[i] = time.Since(start)
		}
		round++
		pool = append(pool, float64(took[1])/float64(took[0]))
		factory = append(factory, float64(took[2])/float64(took[0]))
	}
	b.ReportMetric(median(pool), "readers/plain")
	b.ReportMetric(median(factory), "factory-readers/plain")
	for i, name := range []string{"pool", "factory"} {
		acquire := acquires[i+1]
		allocs := testing.AllocsPerRun(1000, func() {
			c, err := acquire()
			if err != nil {
				b.Fatal(err)
			}
			c.Release()
		})
		b.ReportMetric(allocs, name+"-allocs/op")
	}
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
