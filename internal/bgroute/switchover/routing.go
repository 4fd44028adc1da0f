package switchover

import (
	"context"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/holdfast-db/holdfast/internal/bgroute/meta"
	"github.com/holdfast-db/holdfast/internal/enum"
	"github.com/holdfast-db/holdfast/internal/topology"
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
func (a Action) String() string { return enum.Name("Action", a, actionNames[:]) }

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
	// Names gives, by normalized host name, the identity of the server the
	// name leads to when it is not the name asked for (POST, and a while
	// after a completed switchover: see Identity). It may be set on a
	// Normal snapshot; NamesUntil, when set, is when it stops applying.
	Names      map[string]Identity
	NamesUntil time.Time
	Changed    chan struct{}
}

// Identity is how to authenticate the server a host name leads to while a
// switchover renames servers: green answers to the green names until it
// takes the blue names (RDS checks an IAM token against the name the
// server answers to), and its certificate carries the new names only some
// time after the rename.
type Identity struct {
	// Auth lists the names to issue a password or token for, in order of
	// preference: the first, then the next once the server rejected a
	// token for it.
	Auth []string
	// Cert lists the names the server's certificate may be valid for: the
	// name asked for first, then its counterparts.
	Cert []string
}

func (id Identity) equal(o Identity) bool {
	return slices.Equal(id.Auth, o.Auth) && slices.Equal(id.Cert, o.Cert)
}

// greenSuffix is the infix RDS adds to the first label of green endpoints
// (as meta's).
var greenSuffix = regexp.MustCompile(`-green-[0-9a-z]{6}$`)

// blueName returns the name green host g answers to once green has taken
// the blue names: g without "-green-xxxxxx" in its first label, as RDS
// renames it (and as the AWS JDBC wrapper signs IAM tokens, PR #1642);
// else b, the blue host routed to it.
func blueName(g, b string) string {
	label, rest, _ := strings.Cut(g, ".")
	if s := greenSuffix.ReplaceAllString(label, ""); s != label {
		if rest != "" {
			return s + "." + rest
		}
		return s
	}
	return b
}

// oldName returns the name blue host b answers to once the switchover
// renamed it: "-old1" added to its first label.
func oldName(b string) string {
	label, rest, ok := strings.Cut(b, ".")
	if !ok {
		return b + "-old1"
	}
	return label + "-old1." + rest
}

// uniq drops empty and repeated names, keeping the order.
func uniq(names ...string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// greenIdentity is the identity of green node g reached by the name host:
// before green takes the blue names (as far as the metadata tells) it
// answers to g, then to g's blue name; its certificate may carry either.
func (st *State) greenIdentity(host, g string) Identity {
	b := blueName(g, host)
	auth := uniq(g, b)
	if st.GreenTopologyChanged {
		auth = uniq(b, g)
	}
	return Identity{Auth: auth, Cert: uniq(host, g, b)}
}

// blueIdentity is the identity of the blue node reached by its name b: b
// until the switchover renames it, then b's -old1 name.
func (st *State) blueIdentity(b string) Identity {
	o := oldName(b)
	auth := uniq(b, o)
	if st.GreenTopologyChanged {
		auth = uniq(o, b)
	}
	return Identity{Auth: auth, Cert: uniq(b, o)}
}

// identities returns the identities of POST: every start host with a
// green node leads to green, blue names substituted with a green address
// or resolved to it once blue DNS is updated, green names alike.
func (st *State) identities() map[string]Identity {
	out := map[string]Identity{}
	for _, b := range st.startHosts[meta.RoleSource] {
		if g := st.mapping[b]; g != "" {
			out[b] = st.greenIdentity(b, g)
		}
	}
	for _, g := range st.startHosts[meta.RoleTarget] {
		out[g] = st.greenIdentity(g, g)
	}
	return out
}

// MonitorIdentity returns the identity of the server a monitor reaches by
// host during a switchover, when host is a start host (a monitor connects
// to its start address): green for a green host, blue for a blue one.
func (st *State) MonitorIdentity(host string) (Identity, bool) {
	switch {
	case !st.Frozen:
		return Identity{}, false
	case slices.Contains(st.startHosts[meta.RoleTarget], host):
		return st.greenIdentity(host, host), true
	case slices.Contains(st.startHosts[meta.RoleSource], host):
		return st.blueIdentity(host), true
	}
	return Identity{}, false
}

// Lingering returns the identities that outlive a completed switchover:
// the blue names lead to green, which answers to them, but whose
// certificate may still carry only the green names (RDS renews node
// certificates after the rename, sometimes past COMPLETED).
func (st *State) Lingering() map[string]Identity {
	out := map[string]Identity{}
	for _, b := range st.startHosts[meta.RoleSource] {
		if g := st.mapping[b]; g != "" {
			out[b] = Identity{Auth: []string{b}, Cert: uniq(b, g, blueName(g, b))}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
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
		s.Names = st.identities()
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
		len(s.Routes) != len(o.Routes) || len(s.Drop) != len(o.Drop) ||
		len(s.Names) != len(o.Names) || !s.NamesUntil.Equal(o.NamesUntil) {
		return false
	}
	for h, id := range s.Names {
		if oid, ok := o.Names[h]; !ok || !id.equal(oid) {
			return false
		}
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
		if r, ok := s.Routes[topology.NormHost(h)]; ok && rank[r.Action] > rank[best] {
			best, at = r.Action, h
		}
	}
	return best, at
}

// Lookup returns a LookupFunc answering substituted hosts with their
// address and every other host through base.
func (s *Snapshot) Lookup(base func(ctx context.Context, host string) ([]string, error)) func(ctx context.Context, host string) ([]string, error) {
	return func(ctx context.Context, host string) ([]string, error) {
		if r, ok := s.Routes[topology.NormHost(host)]; ok && r.Action == Substitute {
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
