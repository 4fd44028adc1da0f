package bluegreen

// Router is the blue/green routing of one pool, as holdfast.Factory.BlueGreen
// returns it: its state for readiness endpoints and dashboards, and its
// changes. The factory builds, starts and stops it (Factory.Close,
// Factory.ClosePool); its methods are safe for concurrent use.
//
// The Router watches the deployment's status in the metadata RDS
// publishes, with two monitors: one for blue (SOURCE) and one for green
// (TARGET), each on its own connection outside the pool. They read
// pg_catalog.get_blue_green_fast_switchover_metadata(text) on Aurora,
// rds_tools.show_topology(text) on RDS, found by an existence check
// (to_regprocedure) and read with SELECT *, columns by name (version,
// endpoint, port, role, status; id optional), statuses and roles in any
// case. A function that is absent, zero rows, a failed query and an
// unknown status or version are kept apart ([MonitorStatus].Observation):
// only rows with a known status move the phase; an unknown version is read
// as 1.0 with a warning.
//
// Both monitors start on the pool's host when the pool first connects; the
// green one moves to the green endpoint once the metadata names it. They
// connect with a copy of the pool's connection config (credentials, TLS,
// dial function, resolver), through the factory's dial path and with the
// factory's password, without target_session_attrs (green is read-only
// before the switch), without the pool's tracer and hooks, with
// application_name "holdfast-bluegreen-monitor" and their own connect and
// query timeouts. They poll at the intervals of [Config], and read their
// server on a goroutine of their own: while a connect or a query has not
// answered, a monitor keeps resolving its role's hosts at the polling
// interval, so that "Blue DNS updated" is seen, and held traffic released,
// about HighInterval plus the resolver's TTL after DNS moves, not when the
// connect gives up.
//
// On Aurora they also read the cluster's topology, as the AWS wrappers do:
// SELECT server_id, session_id FROM aurora_replica_status(), on the role's
// own server (absent: nothing is read, and nothing fails). Each server_id
// is an instance endpoint, named after the role's cluster endpoint
// (mydb.cluster-abc.us-east-1.rds.amazonaws.com gives
// <server_id>.abc.us-east-1.rds.amazonaws.com), and session_id
// MASTER_SESSION_ID marks the writer. The instances join the inventory
// with the metadata's endpoints, so a pool on an instance endpoint is
// routed even when the metadata lists only the cluster endpoints, and
// connections that the reader endpoint led to any blue reader are dropped.
// On RDS the metadata rows are the topology already; endpoints that are not
// RDS-shaped (your own CNAMEs) give no instance names, and the Router logs
// it once.
//
// The monitors resolve every blue and green endpoint through the pool's
// resolver, which is how they see DNS move. When PREPARATION is first
// seen, the hosts and their addresses are frozen as the start snapshot; it
// is completed while PREPARATION lasts but never overwritten. Against it
// the Router detects, and latches with a timestamp, "Blue DNS updated",
// "Green DNS removed" and "Green topology changed" ([Event]). [Routing]
// says what the Router then does with the pool's connections, phase by
// phase, and [Name] which names a connection authenticates.
//
// # What the monitors trust
//
// The configuration (the pool's config, the factory's options) and the
// CAs its TLS configuration trusts; not the metadata's rows. A row's
// endpoint is used — a monitor connects to it, the pool is routed to it,
// its name is accepted in a certificate or given a password or token —
// only when it lies in the deployment's domain: the account and Region
// suffix of the pool's hosts, the blue names, which green's and the
// -old1 names share ("*.abc123.us-east-1.rds.amazonaws.com"), or a host
// the configuration names (the pool's own, the endpoint that
// failover.Config.Aliases gives a name of your own). Any other row is
// ignored, with one WARN naming it: verify-full alone would not stop a
// row naming a host that holds a certificate for its own name from a
// public CA. A pool on a name of your own or an IP address, with no alias,
// has no such domain, and its blue/green routing ignores every row. The
// metadata function is used only when a superuser or rdsadmin owns it, or
// it belongs to the rds_tools extension, as RDS's own do: one that a
// database owner created is read as absent (routing off, one WARN). A poll uses at most 64 rows per role; the
// monitors' statements name every function and operator with its schema.
//
// # Differences from the AWS Go wrapper
//
// Its defects, reproduced against the wrapper's own source, are absent
// here: a rejected connection fails at once instead of spinning a core; a
// held connection honours its timeout; PREPARATION and IN_PROGRESS poll at
// HighInterval, not 1 s; a DNS change during IN_PROGRESS does not overwrite
// the start snapshot; the switchover timer runs on its own; a rollback is
// never inferred from a missing or failed read nor from blue; monitors
// restart after a switchover; monitors have timeouts and drop
// target_session_attrs; the routing is published immutably, never mutated
// under readers; an IAM token is issued for the name the server answers
// to, never for an address (the Go wrapper's branch is inverted from
// JDBC's).
type Router interface {
	// Status returns the Router's state now. It takes the Router's lock
	// briefly; it is not meant for the hot path.
	Status() Status
	// Changed returns a channel that is closed at the next change of
	// Status: a metadata poll, a phase or routing change, a caller
	// starting or ending a wait, the Router's close. Read Status again
	// after it is closed, and call Changed again for the next change.
	Changed() <-chan struct{}
	// LastSummary returns the summary of the last switchover that ended
	// (completed, rolled back or timed out), and false if none has.
	LastSummary() (Summary, bool)
}
