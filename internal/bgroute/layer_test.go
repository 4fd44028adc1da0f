package bgroute

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/internal/bgroute/meta"
	"github.com/holdfast-db/holdfast/internal/compose"
	"github.com/holdfast-db/holdfast/internal/obs"
	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// holdfast's telemetry recorder is an Observer.
var _ Observer = (*obs.BlueGreen)(nil)

// handle is a connection's handle that records the names it is told.
type handle struct{ auth []string }

func (*handle) Server() string                { return "" }
func (*handle) MadeAt() time.Time             { return time.Time{} }
func (*handle) Abort(func(error) error) bool  { return false }
func (h *handle) SetAuthHosts(hosts []string) { h.auth = hosts }
func (*handle) MarkCommit(bool)               {}
func (*handle) Unread() bool                  { return false }

// With no switchover under way the layer's BeforeConnect costs an atomic
// load: no allocation, no change to the connection's config, no names.
// (TestHotPathAllocations, in package bluegreen, measures the rest of the
// hot path through a factory: Acquire, PrepareConn, the tracer.)
func TestBeforeConnectHotPath(t *testing.T) {
	h := newHarness(t, bluegreen.Config{})
	h.set(meta.StatusAvailable) // CREATED: routing normal
	h.r.startOnce.Do(func() {}) // the harness plays the monitors
	before := h.r.Layer().BeforeConnect
	ctx := context.Background()
	cc, err := pgx.ParseConfig("postgres://u@" + blueC + ":5432/db")
	if err != nil {
		t.Fatal(err)
	}
	c := &handle{}
	var nexts int
	next := func(context.Context, compose.Conn, *pgx.ConnConfig) error { nexts++; return nil }
	if n := testing.AllocsPerRun(200, func() {
		if err := before(ctx, c, cc, next); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("BeforeConnect allocates %v", n)
	}
	if nexts == 0 || c.auth != nil {
		t.Errorf("BeforeConnect ran next %d times, told names %q; want it run, and no names", nexts, c.auth)
	}
	if cc.Host != blueC || cc.LookupFunc == nil {
		t.Error("BeforeConnect changed the connection config with no switchover under way")
	}
}
