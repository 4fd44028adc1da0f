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
	//
	// Each event but "suspect" and the reader events keeps Monitor.Active
	// true for FastFor.
	Name   string `json:"event"`
	Server string `json:"server,omitempty"` // the server id it concerns
}

// Status is a Monitor's state, for logs, readiness endpoints and
// dashboards.
type Status struct {
	Writer     string `json:"writer"` // server id; "" until the topology was read
	WriterAddr string `json:"writer_addr"`
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
	// "no-topology" (the server has no topology function) or "unreadable"
	// (the monitor's role may not read it: Error names the grant), and
	// the monitor looks again every RefreshInterval; "switchover" while a
	// blue/green switchover routes the cluster's pools (the monitor stands
	// down until it ends).
	Off    string  `json:"off,omitempty"`
	Events []Event `json:"events,omitempty"`
}

// Monitor is the writer-failover monitor of one cluster, as
// holdfast.Factory.Failover returns it: what it knows, for logs,
// readiness endpoints and dashboards. It is safe for concurrent use.
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
