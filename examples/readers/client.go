package main

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/examples/harness"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/fakes/failovertest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// client is one pool under the workload.
type client struct {
	*harness.Client // Name: also its login role
	pool            *pgxpool.Pool

	mu     sync.Mutex
	served map[string]int // successful reads per server, so far
}

// newClient is the client name; each of its requests is a read on its
// pool (set before the workload starts), tried once.
func newClient(name string) *client {
	c := &client{Client: &harness.Client{Name: name}, served: map[string]int{}}
	c.Request = func(ctx context.Context, _ int, r *harness.Record) error {
		if err := c.pool.QueryRow(ctx, read).Scan(&r.Server); err != nil {
			return err
		}
		c.mu.Lock()
		c.served[r.Server]++
		c.mu.Unlock()
		return nil
	}
	return c
}

// servedSoFar returns a copy of c.served.
func (c *client) servedSoFar() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.served)
}

// read is the workload's query: it returns the server that answered.
const read = "SELECT aurora_db_instance_identifier()"

// classifier names errors that carry no SQLSTATE (holdfast's among them).
var classifier = classify.New(failover.Rule)

// errorKey is the SQLSTATE of err, else its class and reason.
func errorKey(err error) string { return harness.ErrorKey(classifier, err) }

// sampler samples the connections per reader per client, over one
// connection per reader of its own (user postgres, not counted).
type sampler struct {
	c       *failovertest.Cluster
	users   []string
	conns   map[string]*pgx.Conn
	mu      sync.Mutex
	samples []Sample
	downs   map[string]bool // readers crashed: not asked
}

func newSampler(c *failovertest.Cluster, clients []*client) *sampler {
	s := &sampler{c: c, conns: map[string]*pgx.Conn{}, downs: map[string]bool{}}
	for _, cl := range clients {
		s.users = append(s.users, cl.Name)
	}
	return s
}

// down marks reader id as down: it is not asked any more.
func (s *sampler) down(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.downs[id] = true
}

// last returns the last sample.
func (s *sampler) last() (Sample, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.samples) == 0 {
		return Sample{}, false
	}
	return s.samples[len(s.samples)-1], true
}

// run samples every interval until done is closed.
func (s *sampler) run(ctx context.Context, phase *atomic.Value, interval time.Duration, done <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		s.sample(ctx, phase.Load().(string))
		select {
		case <-done:
			return
		case <-t.C:
		}
	}
}

// countConns counts the pools' connections per role on a server: client
// backends of the clients' roles, but for holdfast's monitor connection
// (application_name holdfast-failover-monitor), which is not the pool's.
const countConns = `SELECT usename::text, count(*) FROM pg_stat_activity
	WHERE backend_type = 'client backend' AND usename = ANY($1)
	AND application_name IS DISTINCT FROM 'holdfast-failover-monitor' GROUP BY usename`

func (s *sampler) sample(ctx context.Context, phase string) {
	at := time.Now()
	sm := Sample{Phase: phase, Conns: map[string]map[string]int{}, at: at}
	for _, u := range s.users {
		sm.Conns[u] = map[string]int{}
	}
	s.mu.Lock()
	downs := maps.Clone(s.downs)
	s.mu.Unlock()
	for _, id := range s.c.Readers() {
		if downs[id] {
			continue
		}
		counts, err := s.count(ctx, id)
		if err != nil {
			continue
		}
		for _, u := range s.users {
			sm.Conns[u][id] = counts[u]
		}
	}
	s.mu.Lock()
	s.samples = append(s.samples, sm)
	s.mu.Unlock()
}

// count asks reader id for the users' connections.
func (s *sampler) count(ctx context.Context, id string) (map[string]int, error) {
	qctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	conn := s.conns[id]
	if conn == nil {
		var err error
		if conn, err = pgx.Connect(qctx, s.c.DSN(s.c.Addr(id), "connect_timeout=1")); err != nil {
			return nil, err
		}
		s.conns[id] = conn
	}
	out, err := countWith(qctx, conn, s.users)
	if err != nil {
		conn.Close(context.Background())
		delete(s.conns, id)
		return nil, err
	}
	return out, nil
}

// countWith runs countConns on conn.
func countWith(ctx context.Context, conn *pgx.Conn, users []string) (map[string]int, error) {
	rows, err := conn.Query(ctx, countConns, users)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	var u string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&u, &n}, func() error { out[u] = n; return nil })
	return out, err
}

// countOn counts the users' connections on reader id, over a connection
// of its own.
func countOn(ctx context.Context, c *failovertest.Cluster, id string, users []string) (map[string]int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.DSN(c.Addr(id), "connect_timeout=5"))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", id, err)
	}
	defer conn.Close(context.Background())
	return countWith(ctx, conn, users)
}

func (s *sampler) close() {
	for id, conn := range s.conns {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = conn.Close(ctx)
		cancel()
		delete(s.conns, id)
	}
}
