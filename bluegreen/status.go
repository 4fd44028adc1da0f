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
	// Counters since New: connections dropped (to the old blue instance),
	// connects rejected, waits that reached Config.ConnectTimeout.
	Dropped  int64 `json:"dropped"`
	Rejected int64 `json:"rejected"`
	TimedOut int64 `json:"timed_out"`
	// Closed is true after Close.
	Closed bool `json:"closed,omitempty"`
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
	Role Role `json:"role"`
	// Host is the host it reads from, Addr the address it is connected to.
	Host      string `json:"host"`
	Addr      string `json:"addr,omitempty"`
	Connected bool   `json:"connected"`
	// Observation is what the last poll found: "rows", "empty", "absent"
	// (no metadata function), "failed" (the query failed) or
	// "no-connection".
	Observation string `json:"observation,omitempty"`
	// Phase and Status are what the role's row said (Status as written).
	Phase    Phase     `json:"phase"`
	Status   string    `json:"status,omitempty"`
	LastPoll time.Time `json:"last_poll,omitzero"`
	Error    string    `json:"error,omitempty"`
	// Connects counts the connections the monitor has opened since New.
	Connects int `json:"connects"`
}

// Status returns the Router's current state. It takes the Router's lock
// briefly; it is not meant for the hot path.
func (r *Router) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.st
	s := Status{
		ID:                   r.cfg.ID,
		Phase:                st.phase,
		Generation:           st.gen,
		Engine:               st.engine,
		Stale:                st.stale,
		Routing:              r.snap.Load().describe(),
		Mapping:              st.mappings(),
		BlueDNSUpdated:       st.blueDNSUpdated,
		GreenDNSRemoved:      st.greenDNSRemoved,
		GreenTopologyChanged: st.greenTopologyChanged,
		Timeline:             append([]Event(nil), st.timeline...),
		Monitors:             []MonitorStatus{r.mons[RoleSource], r.mons[RoleTarget]},
		Waiting:              r.waiting.Load(),
		Dropped:              r.dropped.Load(),
		Rejected:             r.rejected.Load(),
		TimedOut:             r.timedOut.Load(),
		Closed:               r.closed,
	}
	if st.frozen {
		s.SwitchoverDeadline = st.deadline
	}
	if r.last != nil {
		l := *r.last
		s.LastSummary = &l
	}
	return s
}
