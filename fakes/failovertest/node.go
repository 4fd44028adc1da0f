package failovertest

import (
	"strconv"
	"strings"
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
	// A Global's server: its Region, the other servers of its Region (the
	// standbys its commits wait for while it is the writer), and whether
	// it refuses writes as a primary (a switchover's first step). Set
	// before it starts; readOnly changes under Global.op.
	region   string
	peers    []string
	readOnly bool
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
	if n.region != "" {
		n.globalSettings(s, syncStandby)
	}
	if n.lag > 0 {
		// A lagging reader (Cluster.SetLag): it receives and flushes WAL at
		// once, so it still acknowledges commits, and applies each commit
		// lag after the writer made it; a promotion applies the rest at
		// once.
		s["recovery_min_apply_delay"] = strconv.FormatInt(n.lag.Milliseconds(), 10) + "ms"
	}
	return s
}

// globalSettings adds a Global's server's settings to s: its Region, read
// by the topology functions; its id as cluster_name, which names its WAL
// receiver (application_name) in its upstream's pg_stat_replication; its
// commits, as the writer, waiting for a standby of its own Region only
// (the other Region's is asynchronous); hot standby feedback, as Aurora's
// readers give it; and, during a switchover, no writes.
func (n *node) globalSettings(s map[string]string, syncStandby bool) {
	s["holdfast.aws_region"] = n.region
	s["cluster_name"] = n.ID
	s["rds.extensions"] = "aurora_stat_utils"
	s["hot_standby_feedback"] = "on"
	s["synchronous_standby_names"] = ""
	if syncStandby && len(n.peers) > 0 {
		quoted := make([]string, len(n.peers))
		for i, p := range n.peers {
			quoted[i] = strconv.Quote(p)
		}
		s["synchronous_standby_names"] = "ANY 1 (" + strings.Join(quoted, ", ") + ")"
	}
	if n.readOnly {
		s["default_transaction_read_only"] = "on"
	}
}
