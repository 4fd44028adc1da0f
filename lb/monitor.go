package lb

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"
)

// MonitorConfig configures [NewMonitor].
type MonitorConfig struct {
	// Balancers by name, used by the Monitor alone: their sessions stay
	// open between reads, so they must not be shared with a [Controller],
	// whose requests log in and out. Required.
	Balancers map[string]Balancer
	// Groups of targets by name. Required.
	Groups map[string][]Target
	// Locker tells the lock holders; nil leaves GroupStatus.Holder nil.
	Locker Locker
	// Concurrency is how many members are read at once (>= 0; 0 means
	// DefaultConcurrency).
	Concurrency int
	// KeepAliveEvery is how often an open session is kept alive
	// ([Balancer.KeepAlive]) before a read. 0 means DefaultKeepAliveEvery.
	KeepAliveEvery time.Duration
	// Metrics, if not nil, records the members by phase and the failed
	// API calls (see [MeterName]).
	Metrics *Metrics
}

// Monitor reads the status of groups through balancer sessions it keeps
// open, for a console that reads every group every few seconds: it logs
// in to a balancer at the first read that needs it, keeps the session
// alive, logs in again after a session error, and logs out at Close.
// Reads are not audited and take no lock. It is safe for concurrent use.
type Monitor struct {
	cfg     MonitorConfig
	metrics *Metrics

	mu       sync.RWMutex // read-held by Status, held by Close
	closed   bool
	sessions map[string]*monitorSession // fixed at NewMonitor
}

type monitorSession struct {
	mu       sync.Mutex // serialises login and keep-alive
	open     bool
	lastSeen time.Time // last login or keep-alive
}

// NewMonitor validates cfg and returns a Monitor. It makes no call.
func NewMonitor(cfg MonitorConfig) (*Monitor, error) {
	if len(cfg.Balancers) == 0 {
		return nil, &ConfigError{Pkg: "lb", Field: "MonitorConfig.Balancers", Why: "at least one is required"}
	}
	if len(cfg.Groups) == 0 {
		return nil, &ConfigError{Pkg: "lb", Field: "MonitorConfig.Groups", Why: "at least one is required"}
	}
	if cfg.Concurrency < 0 || cfg.KeepAliveEvery < 0 {
		return nil, &ConfigError{Pkg: "lb", Field: "MonitorConfig", Why: "Concurrency and KeepAliveEvery must not be negative"}
	}
	for _, g := range slices.Sorted(maps.Keys(cfg.Groups)) {
		for i, t := range cfg.Groups[g] {
			if b, ok := cfg.Balancers[t.Balancer]; !ok || b == nil {
				return nil, &ConfigError{Pkg: "lb", Field: "MonitorConfig.Groups." + g + "." + strconv.Itoa(i), Why: "unknown balancer " + strconv.Quote(t.Balancer)}
			}
		}
	}
	cfg.Concurrency = cmp.Or(cfg.Concurrency, DefaultConcurrency)
	cfg.KeepAliveEvery = cmp.Or(cfg.KeepAliveEvery, DefaultKeepAliveEvery)
	mt := cfg.Metrics
	mt.knowGroups(cfg.Groups)
	bs := make(map[string]Balancer, len(cfg.Balancers))
	m := &Monitor{cfg: cfg, metrics: mt, sessions: map[string]*monitorSession{}}
	for n, b := range cfg.Balancers {
		bs[n] = instrument(b, mt)
		m.sessions[n] = &monitorSession{}
	}
	m.cfg.Balancers = bs
	return m, nil
}

// ErrClosed is returned by a [Monitor] used after Close.
var ErrClosed = errors.New("lb: monitor closed")

// Status reads the group's members (or the named nodes) and its lock
// holder, like [Controller.Status], through the Monitor's sessions. It
// returns the status as far as it could read it, with an error joining
// the failures; an unknown group or node is a [*ConfigError] and a nil
// status.
func (m *Monitor) Status(ctx context.Context, group string, nodes ...string) (*GroupStatus, error) {
	targets, err := selectMembers(m.cfg.Groups, group, nodes)
	if err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock() // Close waits for the reads in progress
	if m.closed {
		return nil, ErrClosed
	}
	sessions := map[string]error{}
	for _, n := range balancerNames(targets) {
		sessions[n] = m.session(ctx, n)
	}
	gs, err := readStatus(ctx, group, targets, m.cfg.Balancers, m.cfg.Locker, m.cfg.Concurrency, sessions, m.metrics)
	// A session the device no longer knows is opened again next time
	// (the adapters already log in again once per call on a 401).
	for _, ms := range gs.Members {
		if k := kindOf(ms.Err); k == KindSession || k == KindAuth {
			m.drop(ms.Target.Balancer)
		}
	}
	return gs, err
}

// session makes sure the balancer's session is open and recently kept
// alive.
func (m *Monitor) session(ctx context.Context, name string) error {
	s := m.sessions[name]
	s.mu.Lock()
	defer s.mu.Unlock()
	b := m.cfg.Balancers[name]
	switch {
	case !s.open:
		if err := b.Login(ctx); err != nil {
			return err
		}
	case time.Since(s.lastSeen) >= m.cfg.KeepAliveEvery:
		if err := b.KeepAlive(ctx); err != nil {
			s.open = false
			return err
		}
	default:
		return nil
	}
	s.open, s.lastSeen = true, time.Now()
	return nil
}

func (m *Monitor) drop(name string) {
	s := m.sessions[name]
	s.mu.Lock()
	s.open = false
	s.mu.Unlock()
}

// Close waits for the reads in progress, then logs out of every open
// session. Later reads return [ErrClosed]. It is idempotent.
func (m *Monitor) Close(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	var errs []error
	for _, n := range slices.Sorted(maps.Keys(m.sessions)) {
		s := m.sessions[n]
		s.mu.Lock()
		if s.open {
			if err := m.cfg.Balancers[n].Logout(ctx); err != nil {
				errs = append(errs, err)
			}
			s.open = false
		}
		s.mu.Unlock()
	}
	return errors.Join(errs...)
}
