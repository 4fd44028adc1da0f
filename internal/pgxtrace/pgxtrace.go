// Package pgxtrace is the one implementation of pgx's connection tracer
// interfaces in holdfast: a tracer taken apart into the interfaces it
// implements, whose calls it forwards, with hooks around every statement.
// The pool config's carrier (internal/compose), the telemetry of each
// connection (internal/obs) and the blue/green statement gate
// (internal/bgroute) are each a Set.
package pgxtrace

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// Kind is the kind of a statement: what pgx traces it as.
type Kind int

// The kinds of statements.
const (
	Query Kind = iota
	Batch
	CopyFrom
	Prepare
	Kinds // how many kinds there are
)

// Hooks is called around every statement a Set traces: StatementStart
// after the Set's own tracer's start, StatementEnd before its end (err:
// the statement's error).
type Hooks interface {
	StatementStart(ctx context.Context, c *pgx.Conn, k Kind) context.Context
	StatementEnd(ctx context.Context, c *pgx.Conn, k Kind, err error)
}

// Tracer is every tracer interface of a pgx connection: what a Set
// implements.
type Tracer interface {
	pgx.QueryTracer
	pgx.BatchTracer
	pgx.CopyFromTracer
	pgx.PrepareTracer
	pgx.ConnectTracer
}

// Set is a pgx tracer: it forwards each call to the tracer it holds for
// that interface, if any, and calls Hooks, if set, around statements. Its
// zero value traces nothing.
type Set struct {
	Query    pgx.QueryTracer
	Batch    pgx.BatchTracer
	CopyFrom pgx.CopyFromTracer
	Prepare  pgx.PrepareTracer
	Connect  pgx.ConnectTracer
	Hooks    Hooks
}

// Split returns the Set that forwards to t (nil: to nothing): t as each
// interface it implements.
func Split(t pgx.QueryTracer) Set {
	s := Set{Query: t}
	if t != nil {
		s.Batch, _ = t.(pgx.BatchTracer)
		s.CopyFrom, _ = t.(pgx.CopyFromTracer)
		s.Prepare, _ = t.(pgx.PrepareTracer)
		s.Connect, _ = t.(pgx.ConnectTracer)
	}
	return s
}

func (s *Set) start(ctx context.Context, c *pgx.Conn, k Kind) context.Context {
	if s.Hooks != nil {
		return s.Hooks.StatementStart(ctx, c, k)
	}
	return ctx
}

func (s *Set) end(ctx context.Context, c *pgx.Conn, k Kind, err error) {
	if s.Hooks != nil {
		s.Hooks.StatementEnd(ctx, c, k, err)
	}
}

func (s *Set) TraceQueryStart(ctx context.Context, c *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if s.Query != nil {
		ctx = s.Query.TraceQueryStart(ctx, c, d)
	}
	return s.start(ctx, c, Query)
}

func (s *Set) TraceQueryEnd(ctx context.Context, c *pgx.Conn, d pgx.TraceQueryEndData) {
	s.end(ctx, c, Query, d.Err)
	if s.Query != nil {
		s.Query.TraceQueryEnd(ctx, c, d)
	}
}

func (s *Set) TraceBatchStart(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	if s.Batch != nil {
		ctx = s.Batch.TraceBatchStart(ctx, c, d)
	}
	return s.start(ctx, c, Batch)
}

func (s *Set) TraceBatchQuery(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchQueryData) {
	if s.Batch != nil {
		s.Batch.TraceBatchQuery(ctx, c, d)
	}
}

func (s *Set) TraceBatchEnd(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchEndData) {
	s.end(ctx, c, Batch, d.Err)
	if s.Batch != nil {
		s.Batch.TraceBatchEnd(ctx, c, d)
	}
}

func (s *Set) TraceCopyFromStart(ctx context.Context, c *pgx.Conn, d pgx.TraceCopyFromStartData) context.Context {
	if s.CopyFrom != nil {
		ctx = s.CopyFrom.TraceCopyFromStart(ctx, c, d)
	}
	return s.start(ctx, c, CopyFrom)
}

func (s *Set) TraceCopyFromEnd(ctx context.Context, c *pgx.Conn, d pgx.TraceCopyFromEndData) {
	s.end(ctx, c, CopyFrom, d.Err)
	if s.CopyFrom != nil {
		s.CopyFrom.TraceCopyFromEnd(ctx, c, d)
	}
}

func (s *Set) TracePrepareStart(ctx context.Context, c *pgx.Conn, d pgx.TracePrepareStartData) context.Context {
	if s.Prepare != nil {
		ctx = s.Prepare.TracePrepareStart(ctx, c, d)
	}
	return s.start(ctx, c, Prepare)
}

func (s *Set) TracePrepareEnd(ctx context.Context, c *pgx.Conn, d pgx.TracePrepareEndData) {
	s.end(ctx, c, Prepare, d.Err)
	if s.Prepare != nil {
		s.Prepare.TracePrepareEnd(ctx, c, d)
	}
}

func (s *Set) TraceConnectStart(ctx context.Context, d pgx.TraceConnectStartData) context.Context {
	if s.Connect != nil {
		return s.Connect.TraceConnectStart(ctx, d)
	}
	return ctx
}

func (s *Set) TraceConnectEnd(ctx context.Context, d pgx.TraceConnectEndData) {
	if s.Connect != nil {
		s.Connect.TraceConnectEnd(ctx, d)
	}
}

var _ Tracer = (*Set)(nil)
