package failovertest

import (
	"strconv"
	"syscall"
	"time"

	"github.com/holdfast-db/holdfast/fakes/internal/pgnode"
)

// node is one PostgreSQL server of the cluster (a pgnode.Node: a data
// directory at a fixed address, whose role changes) and what the cluster
// knows of it.
type node struct {
	*pgnode.Node
	// resourceID is its dbi resource id (rds_tools.dbi_resource_id()),
	// "db-" and 26 characters.
	resourceID string
	// Guarded by Cluster.mu: a reader crashed or hung by the test (still
	// in the topology), and the apply delay of a lagging reader (SetLag).
	crashed, hung bool
	lag           time.Duration
}

func newNode(id, resourceID, host, bin string, cred *syscall.Credential) *node {
	n := &node{Node: &pgnode.Node{ID: id, Host: host, Bin: bin, Cred: cred}, resourceID: resourceID}
	n.Conf = n.settings
	return n
}

// settings are the postgresql.conf settings of a node: pgnode's, and its
// ids, which the topology functions read.
func (n *node) settings(syncStandby bool) map[string]string {
	s := pgnode.Settings(syncStandby)
	s["holdfast.server_id"] = n.ID
	s["holdfast.dbi_resource_id"] = n.resourceID
	if n.lag > 0 {
		// A lagging reader (Cluster.SetLag): it receives and flushes WAL at
		// once, so it still acknowledges commits, and applies each commit
		// lag after the writer made it; a promotion applies the rest at
		// once.
		s["recovery_min_apply_delay"] = strconv.FormatInt(n.lag.Milliseconds(), 10) + "ms"
	}
	return s
}
