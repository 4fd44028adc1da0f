package failovertest_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/holdfast-db/holdfast/fakes/failovertest"
	"github.com/holdfast-db/holdfast/internal/topology"
)

// With Engine MultiAZ every server publishes an RDS Multi-AZ DB cluster's
// rds_tools, and nothing of Aurora's: before and after failovers, package
// topology reads the writer the simulator knows on every server, and each
// server's own id and writability.
func TestMultiAZTopology(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := failovertest.StartTest(t, failovertest.Config{Engine: failovertest.MultiAZ, Replicas: 2, TTL: -1})
	ids := c.ServerIDs()
	first := ids[0]
	if c.Engine() != failovertest.MultiAZ {
		t.Fatalf("Engine() = %q", c.Engine())
	}
	seen := map[string]string{}
	for _, id := range ids {
		rid := c.ResourceID(id)
		if len(rid) != len("db-")+26 || rid[:3] != "db-" || seen[rid] != "" {
			t.Fatalf("ResourceID(%s) = %q (ids so far %v)", id, rid, seen)
		}
		seen[rid] = id
	}

	steps := []struct {
		name string
		s    *failovertest.Scenario // played before the checks; nil: none
	}{
		{name: "started"},
		{name: "after a graceful failover", s: &failovertest.Scenario{Kind: failovertest.Graceful, Rejoin: true}},
		{name: "after a graceful failover back", s: &failovertest.Scenario{Kind: failovertest.Graceful, Rejoin: true, Target: first}},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			before := c.Writer()
			if step.s != nil {
				res, err := c.Failover(ctx, *step.s)
				if err != nil {
					t.Fatal(err)
				}
				if res.NewWriter == before || res.NewWriter != c.Writer() {
					t.Fatalf("failover from %s to %s; Writer() = %s", before, res.NewWriter, c.Writer())
				}
				if step.s.Target != "" && res.NewWriter != step.s.Target {
					t.Fatalf("failover to %s, want %s", res.NewWriter, step.s.Target)
				}
			}
			writer := c.Writer()
			for _, id := range ids {
				checkMultiAZServer(ctx, t, c, id, writer)
			}
		})
	}
}

// checkMultiAZServer checks what server id says through package topology:
// Multi-AZ detected, every server listed once with its resource id and
// instance endpoint, writer marked, its own id and writability.
func checkMultiAZServer(ctx context.Context, t *testing.T, c *failovertest.Cluster, id, writer string) {
	t.Helper()
	conn, err := pgx.Connect(ctx, c.DSN(c.Addr(id), "connect_timeout=5"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())

	if e, err := topology.Detect(ctx, conn); err != nil || e != topology.EngineMultiAZ {
		t.Errorf("%s: Detect = %v, %v; want %v", id, e, err, topology.EngineMultiAZ)
	}
	rows, bad, err := topology.Read(ctx, conn, topology.EngineMultiAZ)
	if err != nil || len(bad) != 0 {
		t.Fatalf("%s: Read: %v (set aside %v)", id, err, bad)
	}
	var listed, writers []string
	for _, r := range rows {
		listed = append(listed, r.ServerID)
		if r.Writer {
			writers = append(writers, r.ServerID)
		}
		if r.ResourceID != c.ResourceID(r.ServerID) || r.Endpoint != c.InstanceEndpoint(r.ServerID) || r.Port != failovertest.TopologyPort {
			t.Errorf("%s: row %+v; want resource id %s, endpoint %s, port %d", id, r,
				c.ResourceID(r.ServerID), c.InstanceEndpoint(r.ServerID), failovertest.TopologyPort)
		}
	}
	if !slices.Equal(listed, c.ServerIDs()) {
		t.Errorf("%s: lists %v, want %v", id, listed, c.ServerIDs())
	}
	if !slices.Equal(writers, []string{writer}) {
		t.Errorf("%s: writers %v, want %s", id, writers, writer)
	}
	self, writable, err := topology.Self(ctx, conn, topology.EngineMultiAZ)
	if err != nil || self != id || writable != (id == writer) {
		t.Errorf("%s: Self = %q, %v, %v; want %q, %v", id, self, writable, err, id, id == writer)
	}
	// The simulator's own reading agrees.
	topo, err := c.Topology(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(topo, func(r failovertest.Replica) bool {
		return r.Writer != (r.ServerID == writer) || r.ResourceID != c.ResourceID(r.ServerID)
	}) {
		t.Errorf("%s: Topology = %+v, want writer %s", id, topo, writer)
	}
	if len(topo) != len(rows) {
		t.Errorf("%s: Topology lists %d servers, Read %d", id, len(topo), len(rows))
	}
}
