package bluegreen

import (
	"context"
	"net"
	"sort"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// Action is what the routing does with a new connection to a host.
type Action int

const (
	// Pass: connect as asked; the host name is resolved by the pool's
	// LookupFunc.
	Pass Action = iota
	// Substitute: connect to a fixed address instead of resolving the host
	// name (TLS still verifies the host name).
	Substitute
	// Suspend: hold the connection until the switchover moves on
	// (IN_PROGRESS), at most Config.ConnectTimeout.
	Suspend
	// SuspendUntilFound: hold the connection until the green counterpart of
	// this blue host has an address (POST), at most Config.ConnectTimeout.
	SuspendUntilFound
	// Reject: fail the connection at once with a *RejectError (a green host
	// name during POST, once green has taken the blue names).
	Reject
)

var actionNames = [...]string{
	Pass:              "pass",
	Substitute:        "substitute",
	Suspend:           "suspend",
	SuspendUntilFound: "suspend-until-found",
	Reject:            "reject",
}

// String returns "pass", "substitute", "suspend", "suspend-until-found" or
// "reject".
func (a Action) String() string {
	if a >= 0 && int(a) < len(actionNames) {
		return actionNames[a]
	}
	return "Action(" + strconv.Itoa(int(a)) + ")"
}

// MarshalText encodes the action as its name, for JSON.
func (a Action) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

type route struct {
	act  Action
	addr string // Substitute: the address to connect to
	port int    // Substitute: the port, 0 for the connection's own
}

// snapshot is the routing in force: immutable once published, swapped
// atomically. changed is closed when a newer snapshot replaces it, which
// wakes every suspended caller.
type snapshot struct {
	normal         bool  // nothing to do: the hot path returns at once
	phase          Phase // the phase routed as (COMPLETED and a released IN_PROGRESS route as POST)
	gen            uint64
	routes         map[string]route // by normalized host name or IP address
	suspendQueries bool             // IN_PROGRESS: hold acquires and statements
	drop           map[string]bool  // blue addresses whose connections are dropped
	changed        chan struct{}
}

func normalSnapshot(gen uint64, phase Phase) *snapshot {
	return &snapshot{normal: true, gen: gen, phase: phase, changed: make(chan struct{})}
}

// decide computes the routing for state st, for a pool whose connections
// go to poolHosts. It is a pure function of st.
func decide(st *state, poolHosts []string) *snapshot {
	if !st.frozen {
		return normalSnapshot(st.gen, st.phase)
	}
	s := &snapshot{gen: st.gen, phase: st.phase, routes: map[string]route{}, changed: make(chan struct{})}
	blue, green := st.startHosts[RoleSource], st.startHosts[RoleTarget]
	eff := st.phase
	if eff == InProgress && st.blueDNSUpdated {
		eff = Post // released: blue names already lead to green
	}
	if eff == Completed {
		eff = Post // COMPLETED but DNS has not caught up: as POST
	}
	s.phase = eff
	if eff >= InProgress {
		greenIPs := map[string]bool{}
		for _, g := range green {
			if ip := st.startIPs[g]; ip != "" {
				greenIPs[ip] = true
			}
		}
		for _, b := range blue {
			if ip := st.startIPs[b]; ip != "" && !greenIPs[ip] {
				if s.drop == nil {
					s.drop = map[string]bool{}
				}
				s.drop[ip] = true
			}
		}
	}
	switch eff {
	case Preparation:
		for _, b := range blue {
			if ip := st.startIPs[b]; ip != "" {
				s.routes[b] = route{act: Substitute, addr: ip, port: st.startPorts[b]}
			}
		}
	case InProgress:
		for _, h := range append(append([]string(nil), blue...), green...) {
			s.routes[h] = route{act: Suspend}
			if ip := st.startIPs[h]; ip != "" {
				s.routes[ip] = route{act: Suspend}
			}
		}
		s.suspendQueries = false
		for _, h := range poolHosts {
			if _, ok := s.routes[h]; ok {
				s.suspendQueries = true
			}
		}
	case Post:
		if !st.blueDNSUpdated {
			for _, b := range blue {
				g := st.mapping[b]
				if ip := st.greenAddr(g, st.startIPs); ip != "" {
					s.routes[b] = route{act: Substitute, addr: ip, port: portOf(st, g)}
				} else {
					s.routes[b] = route{act: SuspendUntilFound}
				}
			}
		}
		if !st.greenDNSRemoved {
			for _, g := range green {
				switch ip := st.greenAddr(g, st.startIPs); {
				case st.greenTopologyChanged:
					s.routes[g] = route{act: Reject}
				case ip != "":
					s.routes[g] = route{act: Substitute, addr: ip, port: portOf(st, g)}
				}
			}
		}
	}
	if len(s.routes) == 0 && len(s.drop) == 0 && !s.suspendQueries {
		s.normal = true
	}
	return s
}

func portOf(st *state, host string) int {
	if p := st.startPorts[host]; p != 0 {
		return p
	}
	return st.ports[host]
}

// same reports whether a and b route alike (their channels aside).
func same(a, b *snapshot) bool {
	if a.normal != b.normal || a.phase != b.phase || a.gen != b.gen || a.suspendQueries != b.suspendQueries ||
		len(a.routes) != len(b.routes) || len(a.drop) != len(b.drop) {
		return false
	}
	for h, r := range a.routes {
		if b.routes[h] != r {
			return false
		}
	}
	for ip := range a.drop {
		if !b.drop[ip] {
			return false
		}
	}
	return true
}

// connectAction returns the strongest action among a connection's hosts
// (Reject, then Suspend, SuspendUntilFound, Substitute, Pass) and the host
// it applies to.
func (s *snapshot) connectAction(hosts []string) (Action, string) {
	best, at := Pass, ""
	rank := [...]int{Pass: 0, Substitute: 1, SuspendUntilFound: 2, Suspend: 3, Reject: 4}
	for _, h := range hosts {
		if r, ok := s.routes[normHost(h)]; ok && rank[r.act] > rank[best] {
			best, at = r.act, h
		}
	}
	return best, at
}

// lookup returns a LookupFunc answering substituted hosts with their
// address and every other host through base.
func (s *snapshot) lookup(base func(ctx context.Context, host string) ([]string, error)) func(ctx context.Context, host string) ([]string, error) {
	return func(ctx context.Context, host string) ([]string, error) {
		if r, ok := s.routes[normHost(host)]; ok && r.act == Substitute {
			if r.port != 0 {
				return []string{net.JoinHostPort(r.addr, strconv.Itoa(r.port))}, nil
			}
			return []string{r.addr}, nil
		}
		return base(ctx, host)
	}
}

// droppedAddr returns the blue address conn is connected to when such
// connections are being dropped, else "".
func (s *snapshot) droppedAddr(conn *pgx.Conn) string {
	if len(s.drop) == 0 || conn == nil || conn.PgConn() == nil {
		return ""
	}
	nc := conn.PgConn().Conn()
	if nc == nil {
		return ""
	}
	ta, ok := nc.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return ""
	}
	if ip := ta.IP.String(); s.drop[ip] {
		return ip
	}
	return ""
}

// Routing describes a snapshot, for Status.
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
}

// Route is the action for one host.
type Route struct {
	Host   string `json:"host"`
	Action Action `json:"action"`
	Addr   string `json:"addr,omitempty"` // Substitute: "ip" or "ip:port"
}

func (s *snapshot) describe() Routing {
	r := Routing{Normal: s.normal, Phase: s.phase, SuspendQueries: s.suspendQueries}
	for h, rt := range s.routes {
		addr := rt.addr
		if addr != "" && rt.port != 0 {
			addr = net.JoinHostPort(addr, strconv.Itoa(rt.port))
		}
		r.Routes = append(r.Routes, Route{Host: h, Action: rt.act, Addr: addr})
	}
	sort.Slice(r.Routes, func(i, j int) bool { return r.Routes[i].Host < r.Routes[j].Host })
	for ip := range s.drop {
		r.DropAddrs = append(r.DropAddrs, ip)
	}
	sort.Strings(r.DropAddrs)
	return r
}
