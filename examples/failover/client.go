package main

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/examples/harness"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/readiness"
	"github.com/holdfast-db/holdfast/sqldb"
)

// tables are the clients' tables: each client writes its own, so that the
// audit is per client.
var tables = map[string]string{"pgxpool": "writes_pgxpool", "holdfast": "writes_holdfast", "database/sql": "writes_sql"}

// ddl creates a client's table.
const ddl = `CREATE TABLE IF NOT EXISTS public.%s (
	id     bigint PRIMARY KEY,
	worker integer NOT NULL,
	at     timestamptz NOT NULL DEFAULT now()
)`

// classifier names errors that carry no SQLSTATE (holdfast's failover
// errors among them, and database/sql's driver.ErrBadConn).
var classifier = classify.New(failover.Rule, sqldb.Rule)

// newClient is a client of the workload that runs its transactions as w
// says (set before the workload starts): each request inserts a row with
// a new id into the client's table, reads it back with the address of the
// server answering (which instance answered, and at COMMIT acknowledged,
// the transaction) and commits; a request whose COMMIT's outcome is
// unknown is resolved by looking the id up on the writer
// (harness.Writer.Do).
func newClient(name string, w *harness.Writer) *harness.Client {
	table := "public." + tables[name]
	const server = "host(inet_server_addr()) || ':' || inet_server_port()"
	readBack := "SELECT " + server + " FROM " + table + " WHERE id = $1"
	lookup := "SELECT EXISTS (SELECT 1 FROM " + table + " WHERE id = $1), " + server
	var ids atomic.Int64
	return &harness.Client{Name: name, Writer: w, Request: func(ctx context.Context, worker int, r *harness.Record) error {
		r.ID = ids.Add(1)
		insert := w.Insert("INSERT INTO " + table + " (id, worker) VALUES ($1, $2)")
		return w.Do(ctx, r, func(ctx context.Context, tx harness.Tx) error {
			if err := tx.Exec(ctx, insert, r.ID, worker); err != nil {
				return err
			}
			return tx.QueryRow(ctx, readBack, r.ID).Scan(&r.Server)
		}, func(ctx context.Context, tx harness.Tx) (found bool, err error) {
			err = tx.QueryRow(ctx, lookup, r.ID).Scan(&found, &r.Server)
			return found, err
		})
	}}
}

// readinessLog is what the readiness samples saw.
type readinessLog struct {
	seen    map[readiness.Health]bool
	reasons map[string]bool
	changes []TimelineEvent // each change of the answer
}

// sample asks the checker every 100 ms, as a prober would (a check runs
// at most once per CheckInterval; in between, the cached result is
// answered), until done is closed.
func (r *readinessLog) sample(c *readiness.Checker, done <-chan struct{}) {
	r.seen, r.reasons = map[readiness.Health]bool{}, map[string]bool{}
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	last := ""
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		st := c.Check(ctx)
		cancel()
		r.seen[st.Health] = true
		answer := string(st.Health)
		if st.Health != readiness.Pass {
			r.reasons[st.Reason] = true
			answer += " (" + st.Reason + ")"
		}
		if answer != last {
			r.changes = append(r.changes, TimelineEvent{Source: "readiness", Event: answer, at: time.Now()})
			last = answer
		}
		select {
		case <-done:
			return
		case <-t.C:
		}
	}
}
