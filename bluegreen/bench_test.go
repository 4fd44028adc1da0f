package bluegreen_test

import (
	"context"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The benchmarks compare a plain pgxpool with a pool of a holdfast factory
// with blue/green routing and no switchover under way (the shared test
// server has no metadata: NOT_CREATED), on the same PostgreSQL, in the same
// run:
//
//	go test -run '^$' -bench . -benchmem -count 5 ./bluegreen/
//
// Sub-benchmarks named plain and bluegreen are the two sides of each ratio.

func benchPools(b *testing.B) (plain, bg *pgxpool.Pool) {
	b.Helper()
	ctx := context.Background()
	mk := func(route bool) *pgxpool.Pool {
		cfg := plainConfig(b)
		if !route {
			p, err := pgxpool.NewWithConfig(ctx, cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(p.Close)
			if err := p.Ping(ctx); err != nil {
				b.Fatal(err)
			}
			return p
		}
		c := quietConfig()
		c.BaselineInterval = time.Hour // no poll during the measurement
		f, err := holdfast.New(holdfast.WithBlueGreen(c))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(f.Close)
		p, err := f.NewPool(ctx, cfg) // makes the first connection
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(p.Close)
		waitAbsent(b, f.BlueGreen(p))
		return p
	}
	return mk(false), mk(true)
}

// BenchmarkAcquireRelease is the hot path alone: Acquire and Release of an
// idle connection.
func BenchmarkAcquireRelease(b *testing.B) {
	plain, bg := benchPools(b)
	ctx := context.Background()
	run := func(p *pgxpool.Pool) func(*testing.B) {
		return func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c, err := p.Acquire(ctx)
				if err != nil {
					b.Fatal(err)
				}
				c.Release()
			}
		}
	}
	b.Run("plain", run(plain))
	b.Run("bluegreen", run(bg))
}

// BenchmarkAcquireSelect1 is Acquire + SELECT 1 + Release: the query
// tracer is on this path too.
func BenchmarkAcquireSelect1(b *testing.B) {
	plain, bg := benchPools(b)
	ctx := context.Background()
	run := func(p *pgxpool.Pool) func(*testing.B) {
		return func(b *testing.B) {
			b.ReportAllocs()
			var n int
			for b.Loop() {
				c, err := p.Acquire(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := c.QueryRow(ctx, "SELECT 1").Scan(&n); err != nil {
					b.Fatal(err)
				}
				c.Release()
			}
		}
	}
	b.Run("plain", run(plain))
	b.Run("bluegreen", run(bg))
}
