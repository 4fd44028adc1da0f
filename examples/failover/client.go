package main

import (
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

// classifier names errors that carry no SQLSTATE (holdfast's failover
// errors among them, and database/sql's driver.ErrBadConn).
var classifier = classify.New(failover.Rule, sqldb.Rule)

// newClient is a client of the workload that writes to its own table
// (harness.WriteClient).
func newClient(name string, w *harness.Writer) *harness.Client {
	return harness.WriteClient(name, tables[name], w)
}

// readinessLog is what the readiness samples saw.
type readinessLog struct {
	seen    map[readiness.Health]bool
	reasons map[string]bool
	changes []TimelineEvent // each change of the answer
}

// sample records the checker's answers (harness.SampleReadiness) until
// done is closed.
func (r *readinessLog) sample(c *readiness.Checker, done <-chan struct{}) {
	r.seen, r.reasons = map[readiness.Health]bool{}, map[string]bool{}
	last := ""
	harness.SampleReadiness(c, done, func(st readiness.Status, answer string) {
		r.seen[st.Health] = true
		if st.Health != readiness.Pass {
			r.reasons[st.Reason] = true
		}
		if answer != last {
			r.changes = append(r.changes, TimelineEvent{Source: "readiness", Event: answer, at: time.Now()})
			last = answer
		}
	})
}
