package failovermon

import (
	"context"
	"fmt"
	"net"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/internal/topology"
)

// TestDialFailsPruned: the monitor's record of hosts whose dials failed
// (its backoff) keeps only the topology's current instances: a topology
// whose instances keep changing, each failing its dial, leaves no more
// than its last instances. Before the fix (checked on main) every host
// that ever failed stayed, 200 here.
func TestDialFailsPruned(t *testing.T) {
	t.Parallel()
	cc, err := pgx.ParseConfig("postgres://u@mydb.cluster-abc123.us-east-1.rds.amazonaws.com:5432/db")
	if err != nil {
		t.Fatal(err)
	}
	cc.LookupFunc = func(context.Context, string) ([]string, error) { return nil, &net.DNSError{IsNotFound: true} }
	m, err := New(cc, failover.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for i := range 200 {
		id := fmt.Sprintf("mydb-%d", i)
		m.learn(context.Background(), []topology.Row{{ServerID: "mydb-w", Writer: true}, {ServerID: id}})
		m.noteDial(m.instances[id].host, false)
	}
	m.mu.Lock()
	n := len(m.dialFails)
	m.mu.Unlock()
	if n > 2 {
		t.Errorf("%d failing hosts remembered after 200 topologies, want at most the last one's 2", n)
	}
}
