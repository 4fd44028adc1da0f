package pgxtrace

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5"
)

// log records the calls of a tracer and of hooks, in order.
type log struct{ calls []string }

// queryTracer implements only pgx.QueryTracer.
type queryTracer struct{ l *log }

func (t queryTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	t.l.calls = append(t.l.calls, "query start")
	return ctx
}

func (t queryTracer) TraceQueryEnd(_ context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	t.l.calls = append(t.l.calls, "query end")
}

type hooks struct{ l *log }

func (h hooks) StatementStart(ctx context.Context, _ *pgx.Conn, k Kind) context.Context {
	h.l.calls = append(h.l.calls, "hook start", []string{"query", "batch", "copy", "prepare"}[k])
	return ctx
}

func (h hooks) StatementEnd(_ context.Context, _ *pgx.Conn, k Kind, err error) {
	h.l.calls = append(h.l.calls, "hook end", []string{"query", "batch", "copy", "prepare"}[k], err.Error())
}

func TestSet(t *testing.T) {
	l := &log{}
	s := Split(queryTracer{l})
	if s.Query == nil || s.Batch != nil || s.CopyFrom != nil || s.Prepare != nil || s.Connect != nil {
		t.Fatalf("Split = %+v: want only Query", s)
	}
	s.Hooks = hooks{l}
	ctx := context.Background()
	fail := errors.New("boom")
	s.TraceQueryStart(ctx, nil, pgx.TraceQueryStartData{})
	s.TraceQueryEnd(ctx, nil, pgx.TraceQueryEndData{Err: fail})
	s.TraceBatchStart(ctx, nil, pgx.TraceBatchStartData{})
	s.TraceBatchQuery(ctx, nil, pgx.TraceBatchQueryData{})
	s.TraceBatchEnd(ctx, nil, pgx.TraceBatchEndData{Err: fail})
	s.TraceCopyFromStart(ctx, nil, pgx.TraceCopyFromStartData{})
	s.TraceCopyFromEnd(ctx, nil, pgx.TraceCopyFromEndData{Err: fail})
	s.TracePrepareStart(ctx, nil, pgx.TracePrepareStartData{})
	s.TracePrepareEnd(ctx, nil, pgx.TracePrepareEndData{Err: fail})
	s.TraceConnectStart(ctx, pgx.TraceConnectStartData{})
	s.TraceConnectEnd(ctx, pgx.TraceConnectEndData{})
	want := []string{
		"query start", "hook start", "query", // the tracer first, then the hooks
		"hook end", "query", "boom", "query end", // the hooks first, then the tracer
		"hook start", "batch", "hook end", "batch", "boom",
		"hook start", "copy", "hook end", "copy", "boom",
		"hook start", "prepare", "hook end", "prepare", "boom",
	}
	if !reflect.DeepEqual(l.calls, want) {
		t.Errorf("calls:\n%q\nwant:\n%q", l.calls, want)
	}

	var zero Set // forwards nothing, calls nothing
	if got := zero.TraceQueryStart(ctx, nil, pgx.TraceQueryStartData{}); got != ctx {
		t.Errorf("zero Set: TraceQueryStart changed the context")
	}
	zero.TraceQueryEnd(ctx, nil, pgx.TraceQueryEndData{})
	if s := Split(nil); s != (Set{}) {
		t.Errorf("Split(nil) = %+v, want the zero Set", s)
	}
}
