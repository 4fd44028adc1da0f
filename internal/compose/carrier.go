package compose

import (
	"context"

	"github.com/holdfast-db/holdfast/internal/pgxtrace"
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
	pgxtrace.Set // the composed tracer
	c            *Composition
	owner        *O
}

// poolCarrier is a carrier whose composed tracers trace acquires, or
// whose layers are told of Acquires (Layer.AcquireStart); releaseCarrier
// one whose composed tracers trace releases too (pgxpool calls a
// ReleaseTracer on every Release: installed only when needed).
type poolCarrier[O any] struct {
	carrier[O]
	attach  bool // learn the pool at its first Acquire
	hooks   acquireHooks
	start1  func(context.Context, *pgxpool.Pool) context.Context // the one AcquireStart, when there is one
	end1    func(context.Context)                                // the one AcquireEnd, when there is one
	acquire pgxpool.AcquireTracer
	release pgxpool.ReleaseTracer
}

// newCarrier returns the carrier of c whose composed tracer is t; attach:
// it learns the pool at its first Acquire; acq: the layers' Acquire hooks.
func newCarrier[O any](c *Composition, owner *O, t pgx.QueryTracer, attach bool, acq acquireHooks) pgx.QueryTracer {
	base := carrier[O]{Set: pgxtrace.Split(t), c: c, owner: owner}
	var acquire pgxpool.AcquireTracer
	var release pgxpool.ReleaseTracer
	if t != nil {
		acquire, _ = t.(pgxpool.AcquireTracer)
		release, _ = t.(pgxpool.ReleaseTracer)
	}
	pc := poolCarrier[O]{carrier: base, attach: attach, hooks: acq, acquire: acquire, release: release}
	if len(acq.start) == 1 {
		pc.start1 = acq.start[0]
	}
	if len(acq.end) == 1 {
		pc.end1 = acq.end[0]
	}
	switch {
	case release != nil:
		return &releaseCarrier[O]{pc}
	case attach || acquire != nil || len(acq.start)+len(acq.end) > 0:
		return &pc
	}
	return &base
}

// releaseCarrier is a poolCarrier that traces releases.
type releaseCarrier[O any] struct{ poolCarrier[O] }

func (t *poolCarrier[O]) TraceAcquireStart(ctx context.Context, pool *pgxpool.Pool, d pgxpool.TraceAcquireStartData) context.Context {
	if t.attach && t.c.pool.Load() == nil {
		t.c.Attach(pool)
	}
	if t.start1 != nil && t.hooks.on.Load() != 0 {
		ctx = t.start1(ctx, pool)
	} else if len(t.hooks.start) > 1 && t.hooks.on.Load() != 0 {
		for _, h := range t.hooks.start {
			ctx = h(ctx, pool)
		}
	}
	if t.acquire != nil {
		return t.acquire.TraceAcquireStart(ctx, pool, d)
	}
	return ctx
}

func (t *poolCarrier[O]) TraceAcquireEnd(ctx context.Context, pool *pgxpool.Pool, d pgxpool.TraceAcquireEndData) {
	if t.end1 != nil && t.hooks.on.Load() != 0 {
		t.end1(ctx)
	} else if len(t.hooks.end) > 1 && t.hooks.on.Load() != 0 {
		for _, h := range t.hooks.end {
			h(ctx)
		}
	}
	if t.acquire != nil {
		t.acquire.TraceAcquireEnd(ctx, pool, d)
	}
}

func (t *releaseCarrier[O]) TraceRelease(pool *pgxpool.Pool, d pgxpool.TraceReleaseData) {
	t.release.TraceRelease(pool, d)
}
