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
// poolCarrier, installed only when a composed tracer has them or a layer
// has Acquire hooks, so that a pool without either pays nothing on
// Acquire and Release.
type carrier[O any] struct {
	pgxtrace.Set // the composed tracer
	c            *Composition
	owner        *O
}

// poolCarrier is the carrier of a pool whose composed tracers trace
// acquires, or whose layers are told of Acquires (Layer.AcquireStart), or
// that learns its pool at its first Acquire; releaseCarrier one whose
// composed tracers trace releases too (pgxpool calls a ReleaseTracer on
// every Release: installed only when needed). They are not generic, so
// that pgxpool's call on every Acquire is a plain method's; owner is the
// *O of the composition's owner, for OwnerOf.
type poolCarrier struct {
	pgxtrace.Set
	c       *Composition
	owner   any
	quiet   bool // no attach, no composed acquire tracer: only the hooks, while their switch is on
	attach  bool // learn the pool at its first Acquire
	hooks   acquireHooks
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
	pc := poolCarrier{Set: base.Set, c: c, owner: owner, quiet: !attach && acquire == nil,
		attach: attach, hooks: acq, acquire: acquire, release: release}
	switch {
	case release != nil:
		return &releaseCarrier{pc}
	case attach || acquire != nil || len(acq.start) > 0:
		return &pc
	}
	return &base
}

// releaseCarrier is a poolCarrier that traces releases.
type releaseCarrier struct{ poolCarrier }

func (t *poolCarrier) TraceAcquireStart(ctx context.Context, pool *pgxpool.Pool, d pgxpool.TraceAcquireStartData) context.Context {
	on := t.hooks.on.Load() != 0
	if t.quiet && !on {
		return ctx
	}
	if t.attach && t.c.pool.Load() == nil {
		t.c.Attach(pool)
	}
	if on {
		for _, h := range t.hooks.start {
			ctx = h(ctx, pool)
		}
	}
	if t.acquire != nil {
		return t.acquire.TraceAcquireStart(ctx, pool, d)
	}
	return ctx
}

func (t *poolCarrier) TraceAcquireEnd(ctx context.Context, pool *pgxpool.Pool, d pgxpool.TraceAcquireEndData) {
	if t.hooks.on.Load() != 0 {
		for _, h := range t.hooks.end {
			h(ctx)
		}
	}
	if t.acquire != nil {
		t.acquire.TraceAcquireEnd(ctx, pool, d)
	}
}

func (t *releaseCarrier) TraceRelease(pool *pgxpool.Pool, d pgxpool.TraceReleaseData) {
	t.release.TraceRelease(pool, d)
}

// TracesAcquire reports whether t, a pool config's tracer, calls a
// tracer on Acquire beyond the layers' Acquire hooks (which run only
// while their switch is on): a composed tracer that traces Acquires
// (telemetry's), or a pool learned at its first Acquire.
func TracesAcquire(t pgx.QueryTracer) bool {
	switch c := t.(type) {
	case *poolCarrier:
		return !c.quiet
	case *releaseCarrier:
		return !c.quiet
	}
	_, ok := t.(pgxpool.AcquireTracer)
	return ok
}
