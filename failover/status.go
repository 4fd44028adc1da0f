package failover

import "time"

// The events of a Monitor's timeline.
const (
	EventSuspect        = "suspect"          // a sign of trouble: probing every FastInterval
	EventWriterDown     = "writer down"      // the writer neither answers nor writes; connects by the writer endpoint held
	EventWriterBack     = "writer back"      // the same writer answers again
	EventNewWriter      = "new writer"       // another instance confirmed as the writer: routed there
	EventDNSAgrees      = "DNS agrees"       // the writer endpoint resolves to the writer: routing normal
	EventLeft           = "instance left"    // an instance left the topology: connections to it cut
	EventReaderDown     = "reader down"      // a reader stopped answering: no new connection goes there, its connections are cut
	EventReaderBack     = "reader back"      // a reader down answers again: new connections go there again
	EventReaderLagging  = "reader lagging"   // a reader's replica lag exceeds Readers.MaxLag: no new connection goes there, the reader pools retire theirs
	EventReaderCaughtUp = "reader caught up" // a lagging reader is back within MaxLag: new connections go there again
)

// Event is one step of a Monitor's timeline.
type Event struct {
	At     time.Time `json:"at"`
	Name   string    `json:"event"`
	Server string    `json:"server,omitempty"` // the server id it concerns
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
	// (the monitor's role may not read it: Error names the grant). The
	// monitor looks again every RefreshInterval.
	Off    string  `json:"off,omitempty"`
	Events []Event `json:"events,omitempty"`
}

// Healthy reports whether a writer is known and reachable as far as the
// monitor knows (routing normal or redirecting to it).
func (s Status) Healthy() bool {
	return s.Writer != "" && s.Routing != "held" && s.Routing != "held+redirect"
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
