package outagetest_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast/fakes/outagetest"
)

// req is one request of a load: when it ran, the row it wrote and how it
// ended (acknowledged when err is nil).
type req struct {
	start, end time.Time
	id         int64
	err        error
}

// load writes ids 1, 2, … into table t through a plain pool, one request
// at a time, each with its own deadline, every 20 ms, until stop. It is
// the control: what an application on plain pgxpool sees.
type load struct {
	mu      sync.Mutex
	reqs    []req
	changed chan struct{} // closed at each request's end
	stop    func()
}

func startLoad(t *testing.T, pool *pgxpool.Pool, deadline time.Duration) *load {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{changed: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for id := int64(1); ; id++ {
			r := req{start: time.Now(), id: id}
			rctx, rcancel := context.WithTimeout(ctx, deadline)
			_, r.err = pool.Exec(rctx, "INSERT INTO t VALUES ($1)", id)
			rcancel()
			r.end = time.Now()
			if ctx.Err() != nil {
				return // cut by stop: not a request of the test
			}
			l.mu.Lock()
			l.reqs = append(l.reqs, r)
			close(l.changed)
			l.changed = make(chan struct{})
			l.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	var once sync.Once
	l.stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(l.stop)
	return l
}

// startWriting starts a load and returns once it wrote 3 rows.
func startWriting(t *testing.T, pool *pgxpool.Pool, deadline time.Duration) *load {
	t.Helper()
	l := startLoad(t, pool, deadline)
	waitUntil(t, 10*time.Second, "3 writes acknowledged", l.Changed, func() bool { return len(l.acked()) >= 3 })
	return l
}

// Changed returns a channel closed at the next request's end.
func (l *load) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

// requests returns the requests so far.
func (l *load) requests() []req {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]req(nil), l.reqs...)
}

// acked returns the ids of the acknowledged writes.
func (l *load) acked() []int64 {
	var ids []int64
	for _, r := range l.requests() {
		if r.err == nil {
			ids = append(ids, r.id)
		}
	}
	return ids
}

// firstOK returns the end of the first acknowledged request started at
// or after t.
func (l *load) firstOK(t time.Time) (time.Time, bool) {
	for _, r := range l.requests() {
		if r.err == nil && !r.start.Before(t) {
			return r.end, true
		}
	}
	return time.Time{}, false
}

// started returns the requests started in [a, b).
func (l *load) started(a, b time.Time) []req {
	var out []req
	for _, r := range l.requests() {
		if !r.start.Before(a) && r.start.Before(b) {
			out = append(out, r)
		}
	}
	return out
}

// kinds counts requests by how they ended: "ok", a SQLSTATE, "timeout"
// (the deadline ended a request that hung), or another error's text.
func kinds(reqs []req) map[string]int {
	out := map[string]int{}
	for _, r := range reqs {
		out[kind(r.err)]++
	}
	return out
}

func kind(err error) string {
	var pe *pgconn.PgError
	var ne net.Error
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &pe):
		return pe.Code
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		s = s[i+2:]
	}
	return s
}

// waitUntil waits until cond holds, checking it at each close of the
// channel changed returns, for d at most.
func waitUntil(t *testing.T, d time.Duration, what string, changed func() <-chan struct{}, cond func() bool) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		ch := changed()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-timer.C:
			t.Fatalf("%s: not within %v", what, d)
		}
	}
}

// poll is waitUntil's changed for a condition that notifies nothing: it
// fires every 10 ms.
func poll() <-chan struct{} {
	c := make(chan struct{})
	time.AfterFunc(10*time.Millisecond, func() { close(c) })
	return c
}

// timeline logs events relative to began.
func timeline(t *testing.T, began time.Time, events []outagetest.Event) {
	t.Helper()
	for _, e := range events {
		t.Logf("%6.2fs  %-28s %s", e.At.Sub(began).Seconds(), e.Name, e.Server)
	}
}

// connect connects with cfg (a PoolConfig's, for its LookupFunc).
func connect(ctx context.Context, t *testing.T, cfg *pgxpool.Config) *pgx.Conn {
	t.Helper()
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// refused asserts that connecting with dsn fails with SQLSTATE code.
func refused(ctx context.Context, t *testing.T, dsn, code string) {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err == nil {
		conn.Close(context.Background())
		t.Fatalf("connected to %s; want %s", dsn, code)
	}
	if got := kind(err); got != code {
		t.Fatalf("connecting to %s: %v; want %s", dsn, err, code)
	}
}

// pool builds a plain pool from cfg; the test's cleanup closes it.
func pool(t *testing.T, cfg *pgxpool.Config) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// missing returns the acknowledged ids that are not in committed.
func missing(acked, committed []int64) []int64 {
	sort.Slice(committed, func(i, j int) bool { return committed[i] < committed[j] })
	var out []int64
	for _, id := range acked {
		if i := sort.Search(len(committed), func(i int) bool { return committed[i] >= id }); i == len(committed) || committed[i] != id {
			out = append(out, id)
		}
	}
	return out
}

func ms(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }
