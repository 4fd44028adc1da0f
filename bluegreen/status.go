package bluegreen

import "time"

// Status is a point-in-time view of a Router, for readiness endpoints and
// dashboards. It is a value: later changes do not show in it. Its JSON
// form uses the tags below.
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
	// asked for but for its counterpart (see the package documentation,
	// "Names").
	AliasedCerts int64 `json:"aliased_certs"`
	// Closed is true after Close.
	Closed bool `json:"closed,omitempty"`
}

// Routing describes the routing in force.
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
// reaches: Auth are the names its password or token is issued for, in
// order ([AuthHosts]), Cert the names the server's certificate may be
// valid for, the name asked for first.
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
	// hosts and reports them).
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
