package failover

import "time"

// Event is one step of a Monitor's timeline (Status.Events), as
// Config.OnEvent receives it.
type Event struct {
	At time.Time `json:"at"`
	// Name is one of:
	//
	//	suspect           a sign of trouble: probing every FastInterval
	//	writer down       the writer neither answers nor writes: connects by
	//	                  the writer endpoint are held
	//	writer back       the same writer answers again
	//	new writer        another instance confirmed as the writer: routed
	//	                  there, connections to the old one cut
	//	DNS agrees        the writer endpoint resolves to the writer:
	//	                  routing normal
	//	instance left     an instance left the topology: connections to it
	//	                  cut
	//	reader down       a reader stopped answering: no new connection goes
	//	                  there, its connections are cut
	//	reader back       a reader down answers again: new connections go
	//	                  there again
	//	reader lagging    a reader's replica lag exceeds Readers.MaxLag: no
	//	                  new connection goes there, the reader pools retire
	//	                  theirs
	//	reader caught up  a lagging reader is back within MaxLag: new
	//	                  connections go there again
	//	region switchover an Aurora Global Database's writer moved to
	//	                  another Region (Region, FromRegion) after the old
	//	                  writer turned read-only: a managed switchover,
	//	                  nothing lost
	//	region failover   the writer moved to another Region after the old
	//	                  one stopped answering without turning read-only
	//	                  first: a failover with data loss; FromRegion's
	//	                  writes of about its last RPOLag (the promoted
	//	                  Region's last rpo_lag_in_msec seen) were not
	//	                  replicated and are lost
	//
	// Each event but "suspect" and the reader events keeps Monitor.Active
	// true for FastFor.
	Name   string `json:"event"`
	Server string `json:"server,omitempty"` // the server id it concerns
	// Region is the AWS Region of Server on an Aurora Global Database
	// (the new writer's, for a region switchover or failover); FromRegion
	// the Region the writer left; RPOLag, for a region failover, the
	// last rpo_lag_in_msec the monitor read for Region before the old
	// writer went down (0 when it read none).
	Region     string        `json:"region,omitempty"`
	FromRegion string        `json:"from_region,omitempty"`
	RPOLag     time.Duration `json:"rpo_lag,omitempty"`
}

// Status is a Monitor's state, for logs, readiness endpoints and
// dashboards.
type Status struct {
	Writer     string `json:"writer"` // server id; "" until the topology was read
	WriterAddr string `json:"writer_addr"`
	// WriterRegion is the writer's AWS Region on an Aurora Global
	// Database, "" on any other cluster.
	WriterRegion string `json:"writer_region,omitempty"`
	// OutOfHome: the writer is outside GlobalConfig.HomeRegion; with
	// OutOfHomeReadOnly the pools meant for writes are read-only (on the
	// home readers), with OutOfHomeHold they are held. Readiness warns
	// meanwhile (reason "writer-out-of-home").
	OutOfHome bool `json:"out_of_home,omitempty"`
	// Routing is "normal", "redirect" (the writer endpoint's connections
	// go to the writer's address while DNS lags), "held" (writer down,
	// none known) or "held+redirect".
	Routing string `json:"routing"`
	// Failovers counts the writer changes seen; Held, the connects that
	// were held and then released; MonitorConnects, the monitor's own
	// connections (its own and its probes').
	Failovers       int    `json:"failovers"`
	Held            int    `json:"held"`
	MonitorConnects int    `json:"monitor_connects"`
	Error           string `json:"error,omitempty"` // the last monitor error
	// Off says why failover routing is off, "" while it is on:
	// "no-topology" (the server has no topology function), "unreadable"
	// (the monitor's role may not read it: Error names the grant) or
	// "untrusted" (a function of the topology is owned by a role that is
	// neither a superuser nor rdsadmin, outside the rds_tools extension:
	// Error names it), and the monitor
	// looks again every RefreshInterval; "switchover" while a
	// blue/green switchover routes the cluster's pools (the monitor stands
	// down until it ends); "idle" while every pool on the cluster holds no
	// connection with holdfast.WithServerlessV2 (the monitor holds none
	// either, so that the instance may pause, until a pool connects).
	Off    string  `json:"off,omitempty"`
	Events []Event `json:"events,omitempty"`
}

// Monitor is the writer-failover monitor of one cluster, as
// holdfast.Factory.Failover returns it: what it knows, for logs,
// readiness endpoints and dashboards. It is safe for concurrent use.
//
// The monitor, shared by the factory's pools on the cluster, runs on one
// goroutine that starts with the first connection and that Factory.Close
// (or ClosePool of the last pool on it) joins. It connects with a copy of the first pool's config
// (application_name "holdfast-failover-monitor"), keeps a connection on
// the writer, pings it every HeartbeatInterval and reads the topology:
// Aurora's pg_catalog.aurora_replica_status() and
// aurora_db_instance_identifier(), or an RDS Multi-AZ DB cluster's
// rds_tools.show_topology, rds_tools.dbi_resource_id() and
// rds_tools.multi_az_db_cluster_source_dbi_resource_id(); on an Aurora
// Global Database, aurora_global_db_instance_status() and
// aurora_global_db_status() (GlobalConfig), its heartbeat reading the
// latter. A server is the writer only when it also says so
// (pg_is_in_recovery(), transaction_read_only) — on a global cluster,
// when it takes writes, which a promoted instance does before the global
// status names it. From the first sign of trouble — a failed ping,
// a pool's network error, 57P01/57P02/57P03, a 25006 by the writer
// endpoint, a refused connect — it probes every instance in parallel every
// FastInterval; a probe that does not answer is abandoned at once (no
// cancel request, no 15 s drain against a hung server), and a host whose
// dial fails is dialed again after FastInterval, doubling up to once a
// second (about one dial and one password or token fetch a second). A
// suspicion alone changes no routing: only a writer confirmed down holds
// new connects, and only another instance confirmed as the writer moves
// traffic. On two loaded cores the defaults raised no false failover in
// the tests.
//
// A monitor that cannot read the topology — a role without EXECUTE on
// aurora_replica_status() or USAGE on the schema rds_tools, a server
// without the functions, functions that a role other than a superuser or
// rdsadmin owns — turns routing off: it says why once at WARN
// (naming the grant it needs), sets Status.Off and Status.Error, and looks
// again every RefreshInterval (TestTopologyUnreadable: one monitor
// connection in 5 s). A monitor whose first connection, to the pool's
// host, does not answer (a service started during a failover, the writer
// endpoint's DNS still on the dead writer) reads the topology by the
// cluster's other endpoint and writes within milliseconds of the promotion
// instead of after DNS (TestStartDuringFailover: 62 ms, plain pgxpool
// 4.9 s with a 4 s DNS lag).
//
// What the monitor trusts: the configuration (the pool's host,
// Config.Aliases, Config.InstanceTemplate) and the CAs the pool's TLS
// configuration trusts; not the topology's rows. An instance the topology
// names is resolved, probed, routed to or given a password or token only
// when its endpoint lies in the cluster's domain: the instance domain of
// the pool's endpoint (its account and Region suffix,
// "*.abc123.us-east-1.rds.amazonaws.com") or the template's ("?.domain").
// A row naming any other host (rds_tools.show_topology lists endpoints) is
// dropped, with one WARN naming it; an Aurora row carries only a server
// id, which must be an instance identifier. The topology functions are
// used only when a superuser or rdsadmin owns them, or they belong to the
// rds_tools extension, as RDS's and Aurora's own do: a function that a
// database owner created is not trusted, and routing is off (Status.Off
// "untrusted", one WARN) as when the functions do not exist. A read uses
// at most 64 rows, and a probe round logs in to at most 16 instances at
// once.
type Monitor interface {
	// Status returns the monitor's state now.
	Status() Status
	// Active reports whether a failover is under way or just happened:
	// the routing is not normal, or the writer went down, changed or came
	// back less than FastFor ago. Readiness answers Warn, not Fail,
	// meanwhile.
	Active() bool
	// Changed returns a channel that is closed at the next change of
	// Status. Read Status again after it is closed, and call Changed
	// again for the next change.
	Changed() <-chan struct{}
}
