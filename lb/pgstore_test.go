package lb_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast/lb"
	"github.com/holdfast-db/holdfast/lb/internal/pgtest"
)

func newStore(t *testing.T) (*lb.PGStore, *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store, err := lb.NewPGStore(ctx, pool)
	if err != nil {
		t.Fatalf("NewPGStore: %v", err)
	}
	return store, pool
}

// crash ends the database session of backend pid, as its process dying
// would, and returns once the backend has exited. pg_terminate_backend's
// own wait (its timeout argument) is not used: on a busy server it
// returned false within 0.3 s of a 10 s timeout (lb's CI run at 41f9dbe;
// PostgreSQL's wait loop counts 100 ms per wake of the caller's latch,
// however short the wake).
func crash(ctx context.Context, t *testing.T, pool *pgxpool.Pool, pid int32) {
	t.Helper()
	var sent bool
	if err := pool.QueryRow(ctx, "SELECT pg_terminate_backend($1)", pid).Scan(&sent); err != nil || !sent {
		t.Fatalf("pg_terminate_backend(%d): %v, %v", pid, sent, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for alive := true; alive; {
		if err := pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)", pid).Scan(&alive); err != nil {
			t.Fatalf("waiting for backend %d to exit: %v", pid, err)
		}
	}
}

func TestNewPGStoreIsIdempotentAndConcurrent(t *testing.T) {
	t.Parallel()
	_, pool := newStore(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := lb.NewPGStore(context.Background(), pool)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("NewPGStore: %v", err)
		}
	}
	if _, err := lb.NewPGStore(context.Background(), nil); !errors.Is(err, lb.ErrInvalidConfig) {
		t.Errorf("NewPGStore(nil) = %v", err)
	}
}

func TestLockRefusesASecondOwnerNamingTheHolder(t *testing.T) {
	t.Parallel()
	store, _ := newStore(t)
	ctx := context.Background()
	before := time.Now().Add(-time.Minute)
	group := uniq("lock-refuse")
	a, err := store.Lock(ctx, group, "alice")
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	h := a.Holder()
	if h.Owner != "alice" || h.Group != group || h.PID == 0 || h.Since.Before(before) {
		t.Errorf("holder = %+v", h)
	}
	_, err = store.Lock(ctx, group, "bob")
	var le *lb.LockedError
	if !errors.As(err, &le) || !errors.Is(err, lb.ErrLocked) {
		t.Fatalf("second Lock = %v, want *LockedError", err)
	}
	if le.Holder.Owner != "alice" || le.Holder.PID != h.PID || !le.Holder.Since.Equal(h.Since) {
		t.Errorf("refusal names %+v, want %+v", le.Holder, h)
	}
	if !strings.Contains(err.Error(), `group "`+group+`" is locked by alice@`) {
		t.Errorf("error = %q", err)
	}
	// The same owner from another session is refused too: the lock is
	// per session, not per name.
	if _, err := store.Lock(ctx, group, "alice"); !errors.Is(err, lb.ErrLocked) {
		t.Errorf("Lock by the same owner elsewhere = %v, want ErrLocked", err)
	}
	got, err := store.Holder(ctx, group)
	if err != nil || got == nil || got.Owner != "alice" {
		t.Errorf("Holder = %+v, %v", got, err)
	}
	if err := a.Check(ctx); err != nil {
		t.Errorf("Check = %v", err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := a.Release(ctx); err != nil {
		t.Errorf("second Release = %v", err)
	}
	if err := a.Check(ctx); !errors.Is(err, lb.ErrLockLost) {
		t.Errorf("Check after Release = %v, want ErrLockLost", err)
	}
	if got, err := store.Holder(ctx, group); err != nil || got != nil {
		t.Errorf("Holder after release = %+v, %v; want none", got, err)
	}
	b, err := store.Lock(ctx, group, "bob")
	if err != nil {
		t.Fatalf("Lock after release: %v", err)
	}
	defer b.Release(ctx)
	// Other groups are independent.
	c, err := store.Lock(ctx, uniq("lock-refuse-other"), "carol")
	if err != nil {
		t.Fatalf("Lock of another group: %v", err)
	}
	defer c.Release(ctx)
}

func TestLockIsFreedWhenTheHolderCrashes(t *testing.T) {
	t.Parallel()
	store, pool := newStore(t)
	ctx := context.Background()
	group := uniq("lock-refuse")
	a, err := store.Lock(ctx, group, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Lock(ctx, group, "bob"); !errors.Is(err, lb.ErrLocked) {
		t.Fatalf("Lock while held = %v", err)
	}
	// The holder's process dies: its database session ends.
	crash(ctx, t, pool, a.Holder().PID)
	// The dead holder's row is still there but no longer counts.
	var rows int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM holdfast_lb_lock WHERE group_name = $1", group).Scan(&rows); err != nil || rows != 1 {
		t.Fatalf("lock rows = %d, %v", rows, err)
	}
	h, err := store.Holder(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if h != nil {
		t.Fatalf("Holder after the crash = %+v, want none", h)
	}
	b, err := store.Lock(ctx, group, "bob")
	if err != nil {
		t.Fatalf("Lock after the holder crashed: %v", err)
	}
	defer b.Release(ctx)
	if h, _ := store.Holder(ctx, group); h == nil || h.Owner != "bob" {
		t.Errorf("Holder = %+v, want bob", h)
	}
	// The crashed lease knows it lost the lock (fencing), and releasing it
	// is harmless.
	if err := a.Check(ctx); !errors.Is(err, lb.ErrLockLost) {
		t.Errorf("Check of the dead lease = %v, want ErrLockLost", err)
	}
	if err := a.Release(ctx); err != nil {
		t.Errorf("Release of the dead lease = %v", err)
	}
	if h, _ := store.Holder(ctx, group); h == nil || h.Owner != "bob" {
		t.Errorf("Holder after the dead lease's release = %+v, want still bob", h)
	}
}

func TestLockValidates(t *testing.T) {
	t.Parallel()
	store, _ := newStore(t)
	if _, err := store.Lock(context.Background(), "", "alice"); !errors.Is(err, lb.ErrInvalidConfig) {
		t.Errorf("Lock with no group = %v", err)
	}
	if _, err := store.Lock(context.Background(), "g", ""); !errors.Is(err, lb.ErrInvalidConfig) {
		t.Errorf("Lock with no owner = %v", err)
	}
}

func TestAuditRecordRoundTrip(t *testing.T) {
	t.Parallel()
	store, _ := newStore(t)
	ctx := context.Background()
	start := time.Now().Truncate(time.Microsecond)
	group := uniq("audit-rt")
	e := &lb.Entry{Started: start, Operator: "alice", Host: "ci-7", Action: lb.ActionDrain, Group: group, Nodes: []string{"f5 web/web-1:80"}, Result: lb.ResultRunning}
	if err := store.Record(ctx, e); err != nil || e.ID == 0 {
		t.Fatalf("Record = %v, id %d", err, e.ID)
	}
	e.Result, e.Duration, e.Error = lb.ResultNotDrained, 1500*time.Millisecond, "lb: f5 web/web-1:80 not drained"
	e.Members = []lb.MemberRecord{{Balancer: "f5", Member: "web/web-1:80", Before: "enabled", After: "forced-offline", ConnsBefore: 9, FirstConns: 5, ConnsAfter: 2, Polls: 12, Changed: true, Error: "not drained"}}
	if err := store.Record(ctx, e); err != nil {
		t.Fatal(err)
	}
	got, err := store.Entries(ctx, group, 10)
	if err != nil || len(got) != 1 {
		t.Fatalf("Entries = %d, %v; want 1 (the update must not insert)", len(got), err)
	}
	g := got[0]
	if g.ID != e.ID || !g.Started.Equal(start) || g.Duration != e.Duration || g.Operator != "alice" || g.Host != "ci-7" ||
		g.Action != lb.ActionDrain || g.Result != lb.ResultNotDrained || g.Error != e.Error || len(g.Nodes) != 1 ||
		len(g.Members) != 1 || g.Members[0] != e.Members[0] {
		t.Errorf("entry = %+v\nwant    %+v", g, *e)
	}
	bad := &lb.Entry{ID: 1 << 40, Result: lb.ResultOK}
	if err := store.Record(ctx, bad); !errors.Is(err, lb.ErrStore) {
		t.Errorf("Record of an unknown id = %v, want ErrStore", err)
	}
}
