package failovermon

import (
	"time"

	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/internal/topology"
)

// maxEvents bounds the timeline a Status keeps (the newest).
const maxEvents = 64

func routingName(s *Snapshot) string {
	switch {
	case s.Down && s.Redirect:
		return "held+redirect"
	case s.Down:
		return "held"
	case s.Redirect:
		return "redirect"
	}
	return "normal"
}

// Status returns the monitor's state now.
func (m *Monitor) Status() failover.Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.status
	st.Events = append([]failover.Event(nil), m.status.Events...)
	if st.Routing == "" {
		st.Routing = "normal"
	}
	return st
}

func (m *Monitor) setStatus(f func(*failover.Status)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f(&m.status)
	if m.status.Error == "" {
		m.statusErr = nil
	}
	m.statusChanged()
}

// Err returns the error behind Status.Error, nil while Status.Error is
// "": for its classification (readiness serves the verdict, never the
// text).
func (m *Monitor) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.statusErr
}

// statusChanged wakes the waiters of Changed. m.mu is held.
func (m *Monitor) statusChanged() {
	close(m.statusCh)
	m.statusCh = make(chan struct{})
}

// Changed returns a channel that is closed at the next change of Status.
func (m *Monitor) Changed() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.statusCh
}

// Active reports whether a failover is under way or just happened: the
// routing is not normal, or the writer went down, changed or came back
// less than FastFor ago. Readiness answers Warn, not Fail, meanwhile.
func (m *Monitor) Active() bool {
	if !m.Snapshot().Normal() {
		return true
	}
	at := m.lastChange.Load()
	return at != 0 && time.Since(time.Unix(0, at)) < m.cfg.FastFor
}

func (m *Monitor) event(name, server string) {
	m.emit(m.eventOf(name, server, m.instances[server].region))
}

// eventOf is the event name of server, whose Region is region (told for
// an Aurora Global Database only).
func (m *Monitor) eventOf(name, server, region string) failover.Event {
	e := failover.Event{Name: name, Server: server}
	if m.engine == topology.EngineGlobal {
		e.Region = region
	}
	return e
}

// emit adds e, at now, to the timeline and gives it to Config.OnEvent.
func (m *Monitor) emit(e failover.Event) {
	e.At = time.Now()
	switch e.Name {
	case EventSuspect, EventReaderDown, EventReaderBack,
		EventReaderLagging, EventReaderCaughtUp:
		// not a change of the writer's routing: Active stays as it was
	default:
		m.lastChange.Store(e.At.UnixNano())
	}
	if m.cfg.OnEvent != nil {
		m.cfg.OnEvent(e)
	}
	m.setStatus(func(s *failover.Status) {
		s.Events = append(s.Events, e)
		if len(s.Events) > maxEvents {
			s.Events = append(s.Events[:0:0], s.Events[len(s.Events)-maxEvents:]...)
		}
	})
}
