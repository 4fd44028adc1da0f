package main

import (
	"context"
	"sync/atomic"

	"github.com/holdfast-db/holdfast/examples/harness"
)

// tables are the clients' tables: each client writes its own, so that the
// audit is per client.
var tables = map[string]string{"pgxpool": "outage_pgxpool", "holdfast": "outage_holdfast"}

// ddl creates a client's table.
const ddl = `CREATE TABLE IF NOT EXISTS public.%s (id bigint PRIMARY KEY, worker integer NOT NULL)`

// newClient is a client of the workload that runs its transactions as w
// says: each request inserts a row with a new id into the client's table
// and commits; a request whose COMMIT's outcome is unknown is resolved by
// looking the id up (harness.Writer.Do).
func newClient(name string, w *harness.Writer) *harness.Client {
	table := "public." + tables[name]
	insert := w.Insert("INSERT INTO " + table + " (id, worker) VALUES ($1, $2)")
	lookup := "SELECT EXISTS (SELECT 1 FROM " + table + " WHERE id = $1)"
	var ids atomic.Int64
	return &harness.Client{Name: name, Writer: w, Request: func(ctx context.Context, worker int, r *harness.Record) error {
		r.ID = ids.Add(1)
		return w.Do(ctx, r, func(ctx context.Context, tx harness.Tx) error {
			return tx.Exec(ctx, insert, r.ID, worker)
		}, func(ctx context.Context, tx harness.Tx) (found bool, err error) {
			err = tx.QueryRow(ctx, lookup, r.ID).Scan(&found)
			return found, err
		})
	}}
}
