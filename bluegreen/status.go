package bluegreen

import "time"

// Status is a point-in-time view of a [Router], for readiness endpoints and
// dashboards: the phase, the routing, the mapping, the timeline and the
// monitors. It is a value: later changes do not show in it
// ([Router.Changed] signals them). Its JSON form uses the tags below.
type Status struct {
	// ID is Config.ID.
	ID string `json:"id"`
	// Phase is the merged phase of the deployment (forward only during a
	// switchover).
	Phase Phase `json:"phase"`
	// Generation counts the switchovers that ended (completed, rolled back,
	// timed out); monitoring restarts with each.
	Generation uint64 `json:"generation"`
	// Engine is the metadata found (EngineAuto: none yet).
	Engine Engine `json:"engine"`
	// Stale is true after a switchover ended (completed, rolled back or
	// timed out) until both monitors have read a phase outside PREPARATION
	// to POST: until then such phases are ignored, so that a stuck status
	// or a lagging server does not start the switchover again.
	Stale bool `json:"stale,omitempty"`
	// Routing is the routing in force.
	Routing Routing `json:"routing"`
	// Mapping pairs each blue host with its green counterpart and their
	// addresses: the start snapshot during a switchover, the current
	// inventory otherwise.
	Mapping []Mapping `json:"mapping,omitempty"`
	// The DNS and topology events of the switchover under way, latched.
	BlueDNSUpdated       bool `json:"blue_dns_updated,omitempty"`
	GreenDNSRemoved      bool `json:"green_dns_removed,omitempty"`
	GreenTopologyChanged bool `json:"green_topology_changed,omitempty"`
	// SwitchoverDeadline is when the switchover timer expires; zero when no
	// switchover is under way.
	SwitchoverDeadline time.Time `json:"switchover_deadline,omitzero"`
	// Timeline lists the phase changes and events of this generation.
	Timeline []Event `json:"timeline,omitempty"`
	// LastSummary is the summary of the last switchover that ended.
	LastSummary *Summary `json:"last_summary,omitempty"`
	// Monitors describes the SOURCE (blue) and TARGET (green) monitors.
	Monitors []MonitorStatus `json:"monitors"`
	// Waiting is the number of connects, Acquires and statements held now.
	Waiting int64 `json:"waiting"`
	// Counters since the pool was configured: connections dropped (to the old blue instance),
	// connects rejected, waits that reached Config.ConnectTimeout.
	Dropped  int64 `json:"dropped"`
	Rejected int64 `json:"rejected"`
	TimedOut int64 `json:"timed_out"`
	// AliasedCerts counts the TLS handshakes, of the pool's connections and
	// the monitors', whose server certificate was valid not for the name
	// asked for but for its counterpart (see [Name]).
	AliasedCerts int64 `json:"aliased_certs"`
	// Closed is true once the factory stopped the Router (Factory.Close,
	// Factory.ClosePool): the routing is then back to plain host names.
	Closed bool `json:"closed,omitempty"`
}

// Routing describes the routing in force. It is an immutable snapshot
// swapped atomically when the state changes; the pool's hooks read it with
// one atomic load, and do nothing else while no switchover is under way.
// Phase by phase:
//
//	| phase                  | new connection to a blue name           | to a green name                      | Acquire, statements        |
//	|------------------------|-----------------------------------------|--------------------------------------|----------------------------|
//	| NOT_CREATED, CREATED   | as asked                                | as asked                             | as asked                   |
//	| PREPARATION            | blue start address                      | as asked                             | as asked                   |
//	| IN_PROGRESS            | held                                    | held                                 | held; blue conns dropped   |
//	| POST                   | green address of the corresponding node | green address, then rejected once    | as asked; blue conns       |
//	|                        | (held until it is known), as asked once | green took the blue names, as asked  | dropped                    |
//	|                        | blue DNS points at green                | once green DNS is removed             |                            |
//	| COMPLETED              | as POST until blue DNS is updated and green DNS removed, then as asked                                             |
//
// Addresses are pinned through the connection's LookupFunc only: the host
// name stays the one asked for, and TLS with sslmode=verify-full verifies
// the certificate against it, or against the names of the server it was
// routed to ([Name]). The corresponding node is chosen by role and sorted
// name: writer cluster endpoint to writer cluster endpoint, reader to
// reader, blue writer instance to green writer instance (the writer is the
// topology's, else the instance at the cluster endpoint's address), blue
// readers to green readers round robin.
//
// New connections are held in the pool's BeforeConnect (which pgxpool runs
// without the caller's cancellation), Acquire in PrepareConn, statements
// on acquired connections in the query tracer (also batches, CopyFrom and
// Prepare). Connections to the old blue instance are dropped when
// IN_PROGRESS begins: idle ones are closed at once (the Router learns its
// pool at the pool's first Acquire), others are destroyed when next
// acquired, and a statement on one in use fails with a [*DroppedError]. A
// held caller wakes when the routing changes, never on a poll, and waits
// at most Config.ConnectTimeout (30 s) and its context: then it fails with
// a [*SuspendError]. Nothing was sent, so it is Transient, but
// holdfast.Factory.Acquire does not wait it out a second time: the bound
// is the caller's whole wait. A rejected connection fails at once with a
// [*RejectError].
//
// IN_PROGRESS is released early when blue DNS already points at green. A
// switchover timer (SwitchoverTimeout, 180 s from PREPARATION) ends the
// switchover whatever the metadata says, from a timer of its own rather
// than on the next change; after it a status stuck in IN_PROGRESS routes
// nothing. A rollback is recognised only when the green monitor reads an
// earlier phase than before, before COMPLETED, in two reads in a row (one
// server whose copy of the metadata trails the others' is not a rollback),
// never from an absent, empty or failed read.
type Routing struct {
	// Normal is true when nothing is intercepted: every Acquire and
	// connect costs one atomic load.
	Normal bool `json:"normal"`
	// Phase is the phase the routing follows (COMPLETED routes as POST until
	// DNS has caught up; IN_PROGRESS as POST once blue DNS was updated).
	Phase Phase `json:"phase"`
	// Routes lists the action per host name or address, sorted by host.
	Routes []Route `json:"routes,omitempty"`
	// SuspendQueries is true in IN_PROGRESS: Acquire and statements on
	// acquired connections wait.
	SuspendQueries bool `json:"suspend_queries"`
	// DropAddrs lists the blue addresses whose connections are dropped.
	DropAddrs []string `json:"drop_addrs,omitempty"`
	// Names lists the host names that lead to a server answering to other
	// names (POST, and a while after a completed switchover), sorted by
	// host; they apply even when Normal is true.
	Names []Name `json:"names,omitempty"`
	// NamesUntil is when Names stop applying (after a completed
	// switchover); zero while they follow the switchover under way.
	NamesUntil time.Time `json:"names_until,omitzero"`
}

// Name says how a new connection by Host authenticates the server it
// reaches when that server answers to other names than Host.
//
// In POST a blue name leads to green, by the routing's substitution or,
// once blue DNS is updated, by DNS; but green answers to its green names
// until it takes the blue names, and RDS renews its node certificate for
// the blue names only some time after that rename, sometimes after
// SWITCHOVER_COMPLETED. So a connection by a blue name that reaches green
// would present an IAM token green refuses (SQLSTATE 28000), and fail
// sslmode=verify-full. For each host name that leads to green, the
// routing knows the server's names: green node g (the counterpart of blue
// name b) answers to g until the metadata shows the rename ("Green
// topology changed"), then to g without "-green-xxxxxx" (normally b), as
// the AWS JDBC wrapper assumes (its PR #1642).
//
// Tokens. Auth are the names the connection's password or token is issued
// for, in order: in POST the green name, then the blue name (the blue
// name first once the metadata shows the rename). The factory's password
// function for a host (holdfast.WithHostPasswordFunc, rdsiam.With) is told
// the first; after a 28000 its one retry with a fresh token is issued for
// the second, which covers the moment between the rename and the next
// poll. The green monitor's connection gets a token for its green name,
// then for the blue name after the rename; a monitor whose connection was
// refused with 28000 tries the other name at its next connect, and a
// monitor that reads old blue by a blue name after the rename issues its
// token for the -old1 name. Before POST (and with no switchover) there are
// no names: the token is for the connection's host.
//
// Certificates. Cert are the names the server's certificate may be valid
// for, the name asked for first. For sslmode=verify-full, a connection by
// a name that leads to green accepts the server's certificate when it is
// valid for the name asked for, or for the green name the routing
// substituted, or for that green name's blue name; never for any other
// name, and always with the whole chain verified. It is done on the
// connection's own tls.Config (pgxpool's per-connection copy, changed in
// place so that pgx still finds the client certificate of sslcert), with
// InsecureSkipVerify set and the verification crypto/tls would do (chain
// to RootCAs, time, server authentication) done in VerifyConnection
// followed by the name check, then the config's own VerifyConnection. A
// config that verifies no host name (verify-ca, require) is left alone.
// It applies in POST, to the pool's connections and the monitors', and for
// SwitchoverTimeout (180 s) after a completed switchover to the blue names,
// which DNS then sends to green whose certificate may still lack them
// (Routing.NamesUntil). [Status].AliasedCerts counts the handshakes it
// accepted for a counterpart name. The counterpart is learned from the
// metadata read over the same verified TLS from the deployment's own
// servers: a server that can present a valid certificate for the green
// name is the green instance.
type Name struct {
	Host string   `json:"host"`
	Auth []string `json:"auth"`
	Cert []string `json:"cert"`
}

// Route is what the routing does with a new connection to one host.
type Route struct {
	Host string `json:"host"`
	// Action is one of:
	//   - "substitute": connect to Addr instead of resolving the host name
	//     (TLS still verifies the host name);
	//   - "suspend": hold the connection until the switchover moves on
	//     (IN_PROGRESS), at most Config.ConnectTimeout;
	//   - "suspend-until-found": hold it until the green counterpart of this
	//     blue host has an address (POST), at most Config.ConnectTimeout;
	//   - "reject": fail it at once with a *RejectError (a green host name
	//     during POST, once green has taken the blue names).
	Action string `json:"action"`
	Addr   string `json:"addr,omitempty"` // for "substitute": "ip" or "ip:port"
}

// Mapping pairs a blue host with its green counterpart.
type Mapping struct {
	Blue      string `json:"blue"`
	BlueAddr  string `json:"blue_addr,omitempty"`
	Green     string `json:"green,omitempty"` // "" when no counterpart is known
	GreenAddr string `json:"green_addr,omitempty"`
}

// MonitorStatus describes one monitor after its last poll.
type MonitorStatus struct {
	// Role is "SOURCE" (blue, Status.Monitors[0]) or "TARGET" (green,
	// Status.Monitors[1]).
	Role string `json:"role"`
	// Host is the host it reads from, Addr the address it is connected to.
	Host      string `json:"host"`
	Addr      string `json:"addr,omitempty"`
	Connected bool   `json:"connected"`
	// Observation is what the last poll found: "rows", "empty", "absent"
	// (no metadata function), "failed" (the query failed),
	// "no-connection", or "waiting" (a connection attempt or a query has
	// not answered yet; meanwhile the monitor still resolves its role's
	// hosts and reports them); "idle" while its pool holds no connection
	// with holdfast.WithServerlessV2 (neither does the monitor).
	Observation string `json:"observation,omitempty"`
	// Topology is true when the monitor reads its cluster's topology
	// (Aurora's aurora_replica_status()) on its connection: the instance
	// endpoints it lists join the inventory.
	Topology bool `json:"topology,omitempty"`
	// Phase and Status are what the role's row said (Status as written).
	Phase    Phase     `json:"phase"`
	Status   string    `json:"status,omitempty"`
	LastPoll time.Time `json:"last_poll,omitzero"`
	Error    string    `json:"error,omitempty"`
	// Connects counts the connections the monitor has opened.
	Connects int `json:"connects"`
}
