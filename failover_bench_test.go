package holdfast_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
)

// failoverPools returns a plain pgxpool and a holdfast pool with
// WithFailover on the same server, which publishes a one-instance Aurora
// topology (the writer "bench-1"); the holdfast pool's monitor has read it.
func failoverPools(b *testing.B) (plain, hf *pgxpool.Pool, f *holdfast.Factory) {
	b.Helper()
	ctx := context.Background()
	dsn := pgtest.DSN(b) + "&sslmode=disable"
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{
		`CREATE OR REPLACE FUNCTION pg_catalog.aurora_replica_status()
			RETURNS TABLE (server_id text, session_id text, last_update_timestamp timestamptz) LANGUAGE sql AS
			$$ SELECT 'bench-1'::text, 'MASTER_SESSION_ID'::text, now() $$`,
		`CREATE OR REPLACE FUNCTION pg_catalog.aurora_db_instance_identifier() RETURNS text LANGUAGE sql AS $$ SELECT 'bench-1'::text $$`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		b.Fatal(err)
	}
	// The pool's host is a writer cluster endpoint; every name leads to
	// the test server.
	addr := net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port)))
	cfg.ConnConfig.Host = "bench.cluster-abcdefghijkl.us-east-1.rds.amazonaws.com"
	cfg.ConnConfig.LookupFunc = func(_ context.Context, host string) ([]string, error) {
		if strings.HasSuffix(host, ".rds.amazonaws.com") {
			return []string{addr}, nil
		}
		return net.DefaultResolver.LookupHost(ctx, host)
	}
	cfg.MaxConns = 4
	plainCfg := cfg.Copy()
	if f, err = holdfast.New(holdfast.WithFailover(failover.Config{})); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(f.Close)
	if hf, err = f.NewPool(ctx, cfg); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(hf.Close)
	if plain, err = pgxpool.NewWithConfig(ctx, plainCfg); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(plain.Close)
	if err := plain.Ping(ctx); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for f.Failover(hf).Status().Writer != "bench-1" {
		if time.Now().After(deadline) {
			b.Fatalf("the monitor never read the topology: %+v", f.Failover(hf).Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return plain, hf, f
}

// BenchmarkFailoverPaired measures Acquire + Release through a pool with
// failover routing on (its monitor running, nothing failing) against plain
// pgxpool, in short interleaved rounds, and reports the median per-round
// ratio (failover/plain) and the allocations of the holdfast side:
//
//	go test -run '^$' -bench FailoverPaired -count 3 .
func BenchmarkFailoverPaired(b *testing.B) {
	plain, hf, f := failoverPools(b)
	ctx := context.Background()
	acquires := []func() (*pgxpool.Conn, error){
		func() (*pgxpool.Conn, error) { return plain.Acquire(ctx) },
		func() (*pgxpool.Conn, error) { return f.Acquire(ctx, hf) },
	}
	const n = 2000
	var ratios []float64
	var total [2]time.Duration
	round := 0
	for b.Loop() {
		var took [2]time.Duration
		for k := range 2 {
			i := (round + k) % 2
			start := time.Now()
			for range n {
				c, err := acquires[i]()
				if err != nil {
					b.Fatal(err)
				}
				c.Release()
			}
			took[i] = time.Since(start)
			total[i] += took[i]
		}
		round++
		ratios = append(ratios, float64(took[1])/float64(took[0]))
	}
	ops := float64(round * n)
	b.ReportMetric(median(ratios), "failover/plain")
	b.ReportMetric(float64(total[0].Nanoseconds())/ops, "plain-ns/op")
	b.ReportMetric(float64(total[1].Nanoseconds())/ops, "failover-ns/op")
	allocs := testing.AllocsPerRun(1000, func() {
		c, err := f.Acquire(ctx, hf)
		if err != nil {
			b.Fatal(err)
		}
		c.Release()
	})
	b.ReportMetric(allocs, "failover-allocs/op")
}
