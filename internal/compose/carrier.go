package compose

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// carrier is the pool config's tracer: it carries the composition and
// its owner (OwnerOf finds it by a type switch) and forwards to the composed tracers. pgx's
// connections never call it (BeforeConnect gives each the composed
// tracers themselves); pgxpool calls the pool-level methods of
// poolCarrier, installed only when a composed tracer has them, so that a
// pool without one pays nothing on Acquire and Release.
type carrier[O any] struct {
	c       *Composition
	owner   *O
	query   pgx.QueryTracer
	batch   pgx.BatchTracer
	copy    pgx.CopyFromTracer
	prepare pgx.PrepareTracer
	connect pgx.ConnectTracer
}

// poolCarrier is a carrier whose composed tracers trace acquires or
// releases.
type poolCarrier[O any] struct {
	carrier[O]
	attach  bool // learn the pool at its first Acquire
	acquire pgxpool.AcquireTracer
	release pgxpool.ReleaseTracer
}

// newCarrier returns the carrier of c whose composed tracer is t; attach:
// it learns the pool at its first Acquire.
func newCarrier[O any](c *Composition, owner *O, t pgx.QueryTracer, attach bool) pgx.QueryTracer {
	base := carrier[O]{c: c, owner: owner, query: t}
	var acquire pgxpool.AcquireTracer
	var release pgxpool.ReleaseTracer
	if t != nil {
		base.batch, _ = t.(pgx.BatchTracer)
		base.copy, _ = t.(pgx.CopyFromTracer)
		base.prepare, _ = t.(pgx.PrepareTracer)
		base.connect, _ = t.(pgx.ConnectTracer)
		acquire, _ = t.(pgxpool.AcquireTracer)
		release, _ = t.(pgxpool.ReleaseTracer)
	}
	if attach || acquire != nil || release != nil {
		return &poolCarrier[O]{carrier: base, attach: attach, acquire: acquire, release: release}
	}
	return &base
}

func (t *carrier[O]) TraceQueryStart(ctx context.Context, c *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if t.query != nil {
		return t.query.TraceQueryStart(ctx, c, d)
	}
	return ctx
}

func (t *carrier[O]) TraceQueryEnd(ctx context.Context, c *pgx.Conn, d pgx.TraceQueryEndData) {
	if t.query != nil {
		t.query.TraceQueryEnd(ctx, c, d)
	}
}

func (t *carrier[O]) TraceBatchStart(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	if t.batch != nil {
		return t.batch.TraceBatchStart(ctx, c, d)
	}
	return ctx
}

func (t *carrier[O]) TraceBatchQuery(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchQueryData) {
	if t.batch != nil {
		t.batch.TraceBatchQuery(ctx, c, d)
	}
}

func (t *carrier[O]) TraceBatchEnd(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchEndData) {
	if t.batch != nil {
		t.batch.TraceBatchEnd(ctx, c, d)
	}
}

func (t *carrier[O]) TraceCopyFromStart(ctx context.Context, c *pgx.Conn, d pgx.TraceCopyFromStartData) context.Context {
	if t.copy != nil {
		return t.copy.TraceCopyFromStart(ctx, c, d)
	}
	return ctx
}

func (t *carrier[O]) TraceCopyFromEnd(ctx context.Context, c *pgx.Conn, d pgx.TraceCopyFromEndData) {
	if t.copy != nil {
		t.copy.TraceCopyFromEnd(ctx, c, d)
	}
}

func (t *carrier[O]) TracePrepareStart(ctx context.Context, c *pgx.Conn, d pgx.TracePrepareStartData) context.Context {
	if t.prepare != nil {
		return t.prepare.TracePrepareStart(ctx, c, d)
	}
	return ctx
}

func (t *carrier[O]) TracePrepareEnd(ctx context.Context, c *pgx.Conn, d pgx.TracePrepareEndData) {
	if t.prepare != nil {
		t.prepare.TracePrepareEnd(ctx, c, d)
	}
}

func (t *carrier[O]) TraceConnectStart(ctx context.Context, d pgx.TraceConnectStartData) context.Context {
	if t.connect != nil {
		return t.connect.TraceConnectStart(ctx, d)
	}
	return ctx
}

func (t *carrier[O]) TraceConnectEnd(ctx context.Context, d pgx.TraceConnectEndData) {
	if t.connect != nil {
		t.connect.TraceConnectEnd(ctx, d)
	}
}

func (t *poolCarrier[O]) TraceAcquireStart(ctx context.Context, pool *pgxpool.Pool, d pgxpool.TraceAcquireStartData) context.Context {
	if t.attach && t.c.pool.Load() == nil {
		t.c.Attach(pool)
	}
	if t.acquire != nil {
		return t.acquire.TraceAcquireStart(ctx, pool, d)
	}
	return ctx
}

func (t *poolCarrier[O]) TraceAcquireEnd(ctx context.Context, pool *pgxpool.Pool, d pgxpool.TraceAcquireEndData) {
	if t.acquire != nil {
		t.acquire.TraceAcquireEnd(ctx, pool, d)
	}
}

func (t *poolCarrier[O]) TraceRelease(pool *pgxpool.Pool, d pgxpool.TraceReleaseData) {
	if t.release != nil {
		t.release.TraceRelease(pool, d)
	}
}
