package switchover

import (
	"context"
	"net"
	"strconv"

	"github.com/holdfast-db/holdfast/bluegreen/internal/meta"
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

// Route is the action for one host.
type Route struct {
	Action Action
	Addr   string // Substitute: the address to connect to
	Port   int    // Substitute: the port, 0 for the connection's own
}

// Snapshot is the routing in force: immutable once published, swapped
// atomically by its owner, which closes Changed when a newer snapshot
// replaces it (that wakes every suspended caller).
type Snapshot struct {
	Normal         bool       // nothing to do: the hot path returns at once
	Phase          meta.Phase // the phase routed as (COMPLETED and a released IN_PROGRESS route as POST)
	Gen            uint64
	Routes         map[string]Route // by normalized host name or IP address
	SuspendQueries bool             // IN_PROGRESS: hold acquires and statements
	Drop           map[string]bool  // blue addresses whose connections are dropped
	Changed        chan struct{}
}

// Idle returns the snapshot that routes nothing.
func Idle(gen uint64, phase meta.Phase) *Snapshot {
	return &Snapshot{Normal: true, Gen: gen, Phase: phase, Changed: make(chan struct{})}
}

// Decide computes the routing for state st, for a pool whose connections
// go to poolHosts. It is a pure function of st.
func Decide(st *State, poolHosts []string) *Snapshot {
	if !st.Frozen {
		return Idle(st.Gen, st.Phase)
	}
	s := &Snapshot{Gen: st.Gen, Phase: st.Phase, Routes: map[string]Route{}, Changed: make(chan struct{})}
	blue, green := st.startHosts[meta.RoleSource], st.startHosts[meta.RoleTarget]
	eff := st.Phase
	if eff == meta.InProgress && st.BlueDNSUpdated {
		eff = meta.Post // released: blue names already lead to green
	}
	if eff == meta.Completed {
		eff = meta.Post // COMPLETED but DNS has not caught up: as POST
	}
	s.Phase = eff
	if eff >= meta.InProgress {
		greenIPs := map[string]bool{}
		for _, g := range green {
			if ip := st.startIPs[g]; ip != "" {
				greenIPs[ip] = true
			}
		}
		for _, b := range blue {
			if ip := st.startIPs[b]; ip != "" && !greenIPs[ip] {
				if s.Drop == nil {
					s.Drop = map[string]bool{}
				}
				s.Drop[ip] = true
			}
		}
	}
	switch eff {
	case meta.Preparation:
		for _, b := range blue {
			if ip := st.startIPs[b]; ip != "" {
				s.Routes[b] = Route{Action: Substitute, Addr: ip, Port: st.startPorts[b]}
			}
		}
	case meta.InProgress:
		for _, h := range append(append([]string(nil), blue...), green...) {
			s.Routes[h] = Route{Action: Suspend}
			if ip := st.startIPs[h]; ip != "" {
				s.Routes[ip] = Route{Action: Suspend}
			}
		}
		s.SuspendQueries = false
		for _, h := range poolHosts {
			if _, ok := s.Routes[h]; ok {
				s.SuspendQueries = true
			}
		}
	case meta.Post:
		if !st.BlueDNSUpdated {
			for _, b := range blue {
				g := st.mapping[b]
				if g == "" {
					// No green counterpart (an instance that green does
					// not have): let it through, as the AWS wrappers do,
					// rather than hold it for ConnectTimeout.
					continue
				}
				if ip := st.greenAddr(g, st.startIPs); ip != "" {
					s.Routes[b] = Route{Action: Substitute, Addr: ip, Port: portOf(st, g)}
				} else {
					s.Routes[b] = Route{Action: SuspendUntilFound}
				}
			}
		}
		if !st.GreenDNSRemoved {
			for _, g := range green {
				switch ip := st.greenAddr(g, st.startIPs); {
				case st.GreenTopologyChanged:
					s.Routes[g] = Route{Action: Reject}
				case ip != "":
					s.Routes[g] = Route{Action: Substitute, Addr: ip, Port: portOf(st, g)}
				}
			}
		}
	}
	if len(s.Routes) == 0 && len(s.Drop) == 0 && !s.SuspendQueries {
		s.Normal = true
	}
	return s
}

func portOf(st *State, host string) int {
	if p := st.startPorts[host]; p != 0 {
		return p
	}
	return st.ports[host]
}

// Same reports whether s and o route alike (their channels aside).
func (s *Snapshot) Same(o *Snapshot) bool {
	if s.Normal != o.Normal || s.Phase != o.Phase || s.Gen != o.Gen || s.SuspendQueries != o.SuspendQueries ||
		len(s.Routes) != len(o.Routes) || len(s.Drop) != len(o.Drop) {
		return false
	}
	for h, r := range s.Routes {
		if o.Routes[h] != r {
			return false
		}
	}
	for ip := range s.Drop {
		if !o.Drop[ip] {
			return false
		}
	}
	return true
}

// ConnectAction returns the strongest action among a connection's hosts
// (Reject, then Suspend, SuspendUntilFound, Substitute, Pass) and the host
// it applies to.
func (s *Snapshot) ConnectAction(hosts []string) (Action, string) {
	best, at := Pass, ""
	rank := [...]int{Pass: 0, Substitute: 1, SuspendUntilFound: 2, Suspend: 3, Reject: 4}
	for _, h := range hosts {
		if r, ok := s.Routes[meta.NormHost(h)]; ok && rank[r.Action] > rank[best] {
			best, at = r.Action, h
		}
	}
	return best, at
}

// Lookup returns a LookupFunc answering substituted hosts with their
// address and every other host through base.
func (s *Snapshot) Lookup(base func(ctx context.Context, host string) ([]string, error)) func(ctx context.Context, host string) ([]string, error) {
	return func(ctx context.Context, host string) ([]string, error) {
		if r, ok := s.Routes[meta.NormHost(host)]; ok && r.Action == Substitute {
			if r.Port != 0 {
				return []string{net.JoinHostPort(r.Addr, strconv.Itoa(r.Port))}, nil
			}
			return []string{r.Addr}, nil
		}
		return base(ctx, host)
	}
}

// DroppedAddr returns the blue address conn is connected to when such
// connections are being dropped, else "".
func (s *Snapshot) DroppedAddr(conn *pgx.Conn) string {
	if len(s.Drop) == 0 || conn == nil || conn.PgConn() == nil {
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
	if ip := ta.IP.String(); s.Drop[ip] {
		return ip
	}
	return ""
}
