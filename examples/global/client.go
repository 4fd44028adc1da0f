package main

import (
	"context"
	"sync/atomic"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/examples/harness"
	"github.com/holdfast-db/holdfast/failover"
)

// table is the table both clients write, each its own range of ids
// (idBase), so that the simulator's audit of a failover (one table) tells
// whose rows were lost.
const table = "global_writes"

// ddl creates the table.
const ddl = `CREATE TABLE IF NOT EXISTS public.` + table + ` (
	id     bigint PRIMARY KEY,
	client text NOT NULL,
	worker integer NOT NULL
)`

// idBase is where each client's ids start (its first is idBase+1).
var idBase = map[string]int64{"pgxpool": 0, "holdfast": 1 << 40}

// owner is the client whose range id is in.
func owner(id int64) string {
	if id > idBase["holdfast"] {
		return "holdfast"
	}
	return "pgxpool"
}

// classifier names errors that carry no SQLSTATE (holdfast's failover
// errors among them).
var classifier = classify.New(failover.Rule)

// serverID is what the transaction asks to learn which server answered:
// Aurora's instance identifier, which every server of the simulator has.
const serverID = "SELECT aurora_db_instance_identifier()"

// newClient is a client of the workload that runs its transactions as w
// says (set before the workload starts): each request inserts a row with a
// new id of the client's range, asks the server's instance identifier (the
// server that answers, and at COMMIT acknowledges, the transaction) and
// commits; a request whose COMMIT's outcome is unknown is resolved by
// looking the id up on the writer (harness.Writer.Do).
func newClient(name string, w *harness.Writer) *harness.Client {
	target := "public." + table
	lookup := "SELECT EXISTS (SELECT 1 FROM " + target + " WHERE id = $1), aurora_db_instance_identifier()"
	var ids atomic.Int64
	ids.Store(idBase[name])
	return &harness.Client{Name: name, Writer: w, Request: func(ctx context.Context, worker int, r *harness.Record) error {
		r.ID = ids.Add(1)
		insert := w.Insert("INSERT INTO " + target + " (id, client, worker) VALUES ($1, $2, $3)")
		return w.Do(ctx, r, func(ctx context.Context, tx harness.Tx) error {
			if err := tx.Exec(ctx, insert, r.ID, name, worker); err != nil {
				return err
			}
			return tx.QueryRow(ctx, serverID).Scan(&r.Server)
		}, func(ctx context.Context, tx harness.Tx) (found bool, err error) {
			err = tx.QueryRow(ctx, lookup, r.ID).Scan(&found, &r.Server)
			return found, err
		})
	}}
}
