package holdfast_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
)

// The benchmarks compare a pool built through the factory with a plain
// pgxpool on the same PostgreSQL, in the same run:
//
//	go test -run '^$' -bench . -benchmem -count 5 .
//
// Sub-benchmarks named plain and holdfast are the two sides of each ratio.

func benchPools(b *testing.B, maxConns int32) (plain, hf *pgxpool.Pool, f *holdfast.Factory) {
	b.Helper()
	dsn := pgtest.DSN(b) + "&sslmode=disable"
	mk := func(configure bool) *pgxpool.Pool {
		cfg, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			b.Fatal(err)
		}
		cfg.MaxConns = maxConns
		if configure {
			if err := f.Configure(cfg); err != nil {
				b.Fatal(err)
			}
		}
		p, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(p.Close)
		if err := p.Ping(context.Background()); err != nil {
			b.Fatal(err)
		}
		return p
	}
	var err error
	if f, err = holdfast.New(); err != nil {
		b.Fatal(err)
	}
	return mk(false), mk(true), f
}

// BenchmarkAcquireRelease is the hot path alone: Acquire and Release of an
// idle connection, nothing failing.
func BenchmarkAcquireRelease(b *testing.B) {
	plain, hf, f := benchPools(b, 4)
	ctx := context.Background()
	b.Run("plain", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c, err := plain.Acquire(ctx)
			if err != nil {
				b.Fatal(err)
			}
			c.Release()
		}
	})
	b.Run("holdfast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c, err := f.Acquire(ctx, hf)
			if err != nil {
				b.Fatal(err)
			}
			c.Release()
		}
	})
}

// BenchmarkAcquireSelect1 is Acquire + SELECT 1 + Release.
func BenchmarkAcquireSelect1(b *testing.B) {
	plain, hf, f := benchPools(b, 4)
	ctx := context.Background()
	run := func(b *testing.B, acquire func() (*pgxpool.Conn, error)) {
		b.ReportAllocs()
		var n int
		for b.Loop() {
			c, err := acquire()
			if err != nil {
				b.Fatal(err)
			}
			if err := c.QueryRow(ctx, "SELECT 1").Scan(&n); err != nil {
				b.Fatal(err)
			}
			c.Release()
		}
	}
	b.Run("plain", func(b *testing.B) { run(b, func() (*pgxpool.Conn, error) { return plain.Acquire(ctx) }) })
	b.Run("holdfast", func(b *testing.B) { run(b, func() (*pgxpool.Conn, error) { return f.Acquire(ctx, hf) }) })
}

// BenchmarkConnect is a fresh connection each iteration: the pool builds
// it (BeforeConnect, DialFunc, startup handshake) and the benchmark closes it.
func BenchmarkConnect(b *testing.B) {
	plain, hf, f := benchPools(b, 1)
	ctx := context.Background()
	run := func(b *testing.B, pool *pgxpool.Pool, acquire func() (*pgxpool.Conn, error)) {
		// Empty the pool so that every Acquire connects.
		c, err := acquire()
		if err != nil {
			b.Fatal(err)
		}
		_ = c.Hijack().Close(ctx)
		b.ReportAllocs()
		for b.Loop() {
			c, err := acquire()
			if err != nil {
				b.Fatal(err)
			}
			_ = c.Hijack().Close(ctx)
		}
	}
	b.Run("plain", func(b *testing.B) { run(b, plain, func() (*pgxpool.Conn, error) { return plain.Acquire(ctx) }) })
	b.Run("holdfast", func(b *testing.B) { run(b, hf, func() (*pgxpool.Conn, error) { return f.Acquire(ctx, hf) }) })
}
