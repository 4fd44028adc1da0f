package switchover

import (
	"log/slog"
	"maps"
	"sort"
	"strings"
	"time"

	"github.com/holdfast-db/holdfast/internal/bgroute/meta"
	"github.com/holdfast-db/holdfast/internal/topology"
)

// maxTimeline caps a timeline; the oldest events are dropped beyond it.
const maxTimeline = 256

// maxStartHosts caps a role's start hosts: its endpoints, their reader
// twins and its instances (each at most topology.MaxRows), learned through
// PREPARATION.
const maxStartHosts = 4 * topology.MaxRows

// Kind tells apart what a monitor's poll found.
type Kind int

// The kinds of observation.
const (
	KindNoConn  Kind = iota // no connection to the database
	KindAbsent              // the metadata function does not exist
	KindFailed              // the existence check or the status query failed
	KindEmpty               // the function returned no rows
	KindRows                // the function returned rows
	KindWaiting             // no read yet: the monitor waits on its server (connecting, querying); only DNS is reported
)

var kindNames = [...]string{
	KindNoConn:  "no-connection",
	KindAbsent:  "absent",
	KindFailed:  "failed",
	KindEmpty:   "empty",
	KindRows:    "rows",
	KindWaiting: "waiting",
}

// String returns "no-connection", "absent", "failed", "empty", "rows" or
// "waiting".
func (k Kind) String() string { return kindNames[k] }

// DNSResult is one lookup made by a monitor.
type DNSResult struct {
	IP   string // the first address; "" when none
	Gone bool   // the name does not exist (or has no address)
	Err  error  // any other failure: the result says nothing
}

// Observation is one poll of one monitor.
type Observation struct {
	Role   meta.Role
	Gen    uint64
	Kind   Kind
	Engine meta.Engine
	View   meta.View // when Kind == KindRows
	Peer   meta.View // the other role's rows, read from the same metadata
	Err    error     // when Kind is KindFailed or KindNoConn
	DNS    map[string]DNSResult

	// Topology is true when the role's cluster topology was read with the
	// rows (Aurora's aurora_replica_status() on the role's own server):
	// Instances then replaces the instances known for the role.
	Topology  bool
	Instances []topology.Instance
}

// Learned returns the hosts o names for its role: the endpoints of its
// rows and the instances of its topology.
func (o Observation) Learned() []string {
	out := o.View.Endpoints
	if len(o.Instances) > 0 {
		out = append([]string(nil), out...)
		for _, in := range o.Instances {
			out = append(out, in.Host)
		}
	}
	return out
}

// roleState is what the state remembers of one role's reports.
type roleState struct {
	polled  bool       // a poll of this role read the metadata (rows, empty or absent)
	seen    bool       // a row of this role with a known status was seen
	last    meta.Phase // the last phase such a row reported
	current meta.Phase // as last, but NotCreated after an empty or absent read
	// backs counts the reads in a row of an earlier phase than last (a
	// green going back): the second confirms a rollback, so that one read
	// of a server whose copy of the metadata trails the others' is not
	// taken for one.
	backs int
}

// State is the view of one deployment, for one generation (a switchover
// that ends starts the next). Its owner serializes every call; its
// methods are pure functions of their inputs and the given time. The
// exported fields are for reading.
type State struct {
	id      string        // names the deployment in log lines and the summary
	timeout time.Duration // the switchover timer

	Gen    uint64
	Phase  meta.Phase // merged phase; forward only while a switchover is active
	Stale  bool       // a switchover just ended: mid-switchover phases are ignored until both roles have left them
	Engine meta.Engine

	// Frozen is true while a switchover is active: the start snapshot is
	// set, and Deadline is when the switchover timer expires.
	Frozen   bool
	Deadline time.Time

	// The DNS and topology events of the switchover, latched.
	BlueDNSUpdated, GreenDNSRemoved, GreenTopologyChanged bool

	// Timeline lists the phase changes and events of this generation.
	Timeline []Event

	roles [3]roleState

	hosts     map[meta.Role][]string            // current endpoints by role: the metadata's, then the topology's instances
	instances map[meta.Role][]topology.Instance // the role's instances, from its last topology read
	ports     map[string]int
	ips       map[string]string // current address by host (last successful lookup)
	gone      map[string]bool   // host did not resolve at the last lookup

	filled     [3]bool // the role's monitor has reported since the snapshot was frozen
	startHosts map[meta.Role][]string
	startIPs   map[string]string
	startPorts map[string]int
	mapping    map[string]string // blue host → green host

	readinessLogged bool
}

// New returns the state of generation gen of deployment id, whose
// switchovers time out after timeout. stale is true when a switchover has
// just ended, so that its metadata does not start it again.
func New(id string, timeout time.Duration, gen uint64, stale bool) *State {
	return &State{
		id:         id,
		timeout:    timeout,
		Gen:        gen,
		Stale:      stale,
		hosts:      map[meta.Role][]string{},
		instances:  map[meta.Role][]topology.Instance{},
		ports:      map[string]int{},
		ips:        map[string]string{},
		gone:       map[string]bool{},
		startHosts: map[meta.Role][]string{},
		startIPs:   map[string]string{},
		startPorts: map[string]int{},
		mapping:    map[string]string{},
	}
}

// Effects are what a state change asks its owner to do once it has
// released its lock.
type Effects struct {
	Logs    []LogLine
	Summary *Summary     // a switchover ended: log it and start a new generation
	Phases  []meta.Phase // the merged phase changed to these, in order
}

// LogLine is one log line to write.
type LogLine struct {
	Level slog.Level
	Msg   string
	Attrs []slog.Attr
}

func (e *Effects) log(level slog.Level, msg string, attrs ...slog.Attr) {
	e.Logs = append(e.Logs, LogLine{level, msg, attrs})
}

func (st *State) event(now time.Time, name string, fx *Effects) {
	st.Timeline = append(st.Timeline, Event{Time: now, Name: name})
	if len(st.Timeline) > maxTimeline {
		st.Timeline = st.Timeline[len(st.Timeline)-maxTimeline:]
	}
	fx.log(slog.LevelInfo, "bluegreen: "+name, slog.String("bgd_id", st.id), slog.String("phase", st.Phase.String()))
}

// Current returns the phase role's last read reported (NotCreated after an
// empty or absent read).
func (st *State) Current(role meta.Role) meta.Phase { return st.roles[role].current }

// StartAddr returns the start address of host during a switchover, else
// "".
func (st *State) StartAddr(host string) string {
	if !st.Frozen {
		return ""
	}
	return st.startIPs[host]
}

// NeedsTopology reports whether a monitor of role should read its
// cluster's topology with its next rows: always outside a switchover; then
// while the start snapshot is being filled (PREPARATION, or the role's
// first report after it was frozen), never after.
func (st *State) NeedsTopology(role meta.Role) bool {
	return !st.Frozen || st.Phase == meta.Preparation || !st.filled[role]
}

// HostsToResolve returns the host names a monitor of role resolves: the
// role's current endpoints, its start hosts and extra, without IP
// addresses.
func (st *State) HostsToResolve(role meta.Role, extra []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, list := range [][]string{st.hosts[role], st.startHosts[role], extra} {
		for _, h := range list {
			if !seen[h] && !topology.IsIP(h) {
				seen[h] = true
				out = append(out, h)
			}
		}
	}
	return out
}

// Apply merges one observation. Observations of an older generation are
// ignored.
func (st *State) Apply(o Observation, now time.Time) Effects {
	var fx Effects
	if o.Gen != st.Gen {
		return fx
	}
	if o.Kind == KindRows && o.Engine != meta.EngineAuto {
		st.Engine = o.Engine
	}
	// DNS first: a phase change below may freeze the addresses.
	for h, r := range o.DNS {
		switch {
		case r.Err != nil:
		case r.Gone || r.IP == "":
			st.gone[h] = true
		default:
			st.gone[h] = false
			st.ips[h] = r.IP
		}
	}
	rs := &st.roles[o.Role]
	var v meta.View
	switch o.Kind {
	case KindEmpty, KindAbsent:
		rs.polled = true
		rs.current = meta.NotCreated
	case KindRows:
		rs.polled = true
		v = o.View
		if !v.Found {
			rs.current = meta.NotCreated
			break
		}
		if o.Topology {
			st.instances[o.Role] = o.Instances
		}
		if len(v.Endpoints) > 0 {
			st.hosts[o.Role] = withInstances(v.Endpoints, st.instances[o.Role])
			for _, in := range st.instances[o.Role] {
				st.ports[in.Host] = in.Port
			}
			maps.Copy(st.ports, v.Ports) // the metadata's port wins
		}
		// Learn the other side's hosts from these rows too, until its own
		// monitor reports them (it may not reach its server yet).
		if peer := o.Role.Other(); o.Peer.Found && len(st.hosts[peer]) == 0 && len(o.Peer.Endpoints) > 0 {
			st.hosts[peer] = o.Peer.Endpoints
			maps.Copy(st.ports, o.Peer.Ports)
		}
		if !v.Known {
			break // an unknown status says nothing about the phase
		}
		if o.Role == meta.RoleTarget && rs.seen && v.Phase < rs.last && v.Phase >= meta.Created &&
			st.Frozen && st.Phase < meta.Completed {
			if rs.backs++; rs.backs >= 2 {
				rs.backs = 0
				st.rollback(v.Phase, now, &fx)
				return fx
			}
			break // one read going back is not yet a rollback: the next poll confirms it
		}
		rs.backs = 0
		rs.seen, rs.last, rs.current = true, v.Phase, v.Phase
	}
	if o.Kind != KindWaiting {
		st.fill(o.Role) // a monitor still waiting on its server has learned nothing but DNS
	}
	st.merge(o.Role, now, &fx)
	if o.Role == meta.RoleTarget && v.Found && st.Frozen && st.Phase >= meta.InProgress && !st.GreenTopologyChanged &&
		len(v.Endpoints) > 0 && disjoint(v.Endpoints, st.startHosts[meta.RoleTarget]) {
		st.GreenTopologyChanged = true
		st.event(now, EventGreenTopologyChanged, &fx)
	}
	st.dnsFlags(now, &fx)
	st.checkDone(now, &fx)
	if !st.Frozen {
		st.readiness(&fx)
	}
	st.prune()
	return fx
}

// prune forgets the ports, addresses and lookups of hosts that are neither
// a role's current hosts nor a start host: names that left the metadata
// (and its topology) are not kept for the rest of the generation.
func (st *State) prune() {
	keep := map[string]bool{}
	for _, list := range [][]string{st.hosts[meta.RoleSource], st.hosts[meta.RoleTarget],
		st.startHosts[meta.RoleSource], st.startHosts[meta.RoleTarget]} {
		for _, h := range list {
			keep[h] = true
		}
	}
	maps.DeleteFunc(st.ports, func(h string, _ int) bool { return !keep[h] })
	maps.DeleteFunc(st.ips, func(h, _ string) bool { return !keep[h] })
	maps.DeleteFunc(st.gone, func(h string, _ bool) bool { return !keep[h] })
}

// Known returns how many hosts the state keeps an address, a lookup or a
// port for (for tests: it never exceeds the hosts of the generation's
// current rows and start snapshot).
func (st *State) Known() int { return len(st.ips) + len(st.gone) + len(st.ports) }

// midSwitchover reports whether p is PREPARATION, IN_PROGRESS or POST.
func midSwitchover(p meta.Phase) bool { return p >= meta.Preparation && p <= meta.Post }

// merge recomputes the merged phase from the roles' reports.
func (st *State) merge(from meta.Role, now time.Time, fx *Effects) {
	src, dst := st.roles[meta.RoleSource], st.roles[meta.RoleTarget]
	if st.Stale && src.polled && dst.polled && !midSwitchover(src.current) && !midSwitchover(dst.current) {
		st.Stale = false
		fx.log(slog.LevelDebug, "bluegreen: the metadata has left the last switchover", slog.String("bgd_id", st.id))
	}
	if st.Frozen {
		p := st.Phase
		for _, r := range []meta.Role{meta.RoleSource, meta.RoleTarget} {
			if st.roles[r].seen && st.roles[r].last > p {
				p = st.roles[r].last
			}
		}
		if p > st.Phase { // phases skipped between two polls are not recorded
			st.Phase = p
			st.event(now, p.String(), fx)
			fx.Phases = append(fx.Phases, p)
			if p == meta.InProgress {
				st.event(now, EventBlueConnsDropped, fx)
			}
		}
		return
	}
	// No switchover under way: the phase follows the roles' current reports.
	idle, start := meta.NotCreated, meta.NotCreated
	for _, r := range []meta.Role{meta.RoleSource, meta.RoleTarget} {
		c := st.roles[r].current
		switch {
		case c == meta.Completed, midSwitchover(c) && st.Stale:
			// A finished deployment seen fresh, or the metadata of the
			// switchover that just ended (stuck, or a server that lags):
			// nothing to route.
			c = meta.Created
		case midSwitchover(c):
			start = max(start, c)
			continue
		}
		idle = max(idle, c)
	}
	if start != meta.NotCreated {
		st.begin(from, start, now, fx)
		return
	}
	if idle != st.Phase || len(st.Timeline) == 0 {
		st.Phase = idle
		st.event(now, idle.String(), fx)
		fx.Phases = append(fx.Phases, idle)
	}
}

// begin freezes the start snapshot and starts the switchover timer. from
// is the role whose report began it.
func (st *State) begin(from meta.Role, p meta.Phase, now time.Time, fx *Effects) {
	st.Frozen = true
	st.Phase = p
	st.Deadline = now.Add(st.timeout)
	st.startHosts[meta.RoleSource] = nil
	st.startHosts[meta.RoleTarget] = nil
	st.fillRole(meta.RoleSource)
	st.fillRole(meta.RoleTarget)
	st.filled = [3]bool{}
	st.filled[from] = true
	st.event(now, p.String(), fx)
	fx.Phases = append(fx.Phases, p)
	if p == meta.InProgress {
		st.event(now, EventBlueConnsDropped, fx)
	}
}

// fill adds to the start snapshot what it lacks: hosts and addresses
// learned during PREPARATION, or in the first report of a role's monitor
// after the snapshot was frozen (a monitor that was slow to start). It
// never changes a start address.
func (st *State) fill(role meta.Role) {
	if !st.Frozen {
		return
	}
	if st.Phase == meta.Preparation || !st.filled[role] {
		st.fillRole(role)
		st.filled[role] = true
	}
}

func (st *State) fillRole(role meta.Role) {
	have := map[string]bool{}
	for _, h := range st.startHosts[role] {
		have[h] = true
	}
	for _, h := range st.hosts[role] {
		if !have[h] && len(st.startHosts[role]) < maxStartHosts {
			st.startHosts[role] = append(st.startHosts[role], h)
			have[h] = true
		}
	}
	sort.Strings(st.startHosts[role])
	for _, h := range st.startHosts[role] {
		if st.startIPs[h] == "" && st.ips[h] != "" && !st.gone[h] {
			st.startIPs[h] = st.ips[h]
		}
		if _, ok := st.startPorts[h]; !ok {
			st.startPorts[h] = st.ports[h]
		}
	}
	st.mapping = meta.Correspond(st.startHosts[meta.RoleSource], st.startHosts[meta.RoleTarget], st.startIPs, st.writers())
}

// dnsFlags latches "Blue DNS updated" and "Green DNS removed" once the
// switchover is past PREPARATION.
func (st *State) dnsFlags(now time.Time, fx *Effects) {
	if !st.Frozen || st.Phase < meta.InProgress {
		return
	}
	if !st.BlueDNSUpdated && st.everyStartHost(meta.RoleSource, func(h string) bool {
		return !st.gone[h] && st.ips[h] != "" && st.ips[h] != st.startIPs[h]
	}) {
		st.BlueDNSUpdated = true
		st.event(now, EventBlueDNSUpdated, fx)
		if st.Phase == meta.InProgress {
			st.event(now, EventReleasedOnBlueDNS, fx)
		}
	}
	if !st.GreenDNSRemoved && st.everyStartHost(meta.RoleTarget, func(h string) bool { return st.gone[h] }) {
		st.GreenDNSRemoved = true
		st.event(now, EventGreenDNSRemoved, fx)
	}
}

// everyStartHost reports whether the hosts of role that had an address at
// the start are not none, and all satisfy ok.
func (st *State) everyStartHost(role meta.Role, ok func(host string) bool) bool {
	n := 0
	for _, h := range st.startHosts[role] {
		if st.startIPs[h] == "" {
			continue
		}
		if !ok(h) {
			return false
		}
		n++
	}
	return n > 0
}

// checkDone ends the switchover once COMPLETED is reported and DNS has
// caught up.
func (st *State) checkDone(now time.Time, fx *Effects) {
	if st.Frozen && st.Phase == meta.Completed && st.BlueDNSUpdated && st.GreenDNSRemoved {
		st.finish(OutcomeCompleted, now, fx)
	}
}

// Tick ends the switchover when its timer has expired.
func (st *State) Tick(now time.Time) Effects {
	var fx Effects
	if !st.Frozen || now.Before(st.Deadline) {
		return fx
	}
	st.event(now, EventTimerExpired, &fx)
	if st.Phase == meta.Completed {
		st.finish(OutcomeCompleted, now, &fx)
	} else {
		st.finish(OutcomeTimedOut, now, &fx)
	}
	return fx
}

func (st *State) rollback(p meta.Phase, now time.Time, fx *Effects) {
	st.event(now, p.String()+" (rollback)", fx)
	st.event(now, EventRolledBack, fx)
	st.finish(OutcomeRolledBack, now, fx)
}

// finish ends the switchover: its owner publishes the routing of the next
// generation, which routes nothing, so the timeline's last event is when
// routing returned to normal. The phase events keep the times the
// metadata reported them (COMPLETED often comes before DNS has caught up).
func (st *State) finish(o Outcome, now time.Time, fx *Effects) {
	st.event(now, EventRoutingNormal, fx)
	ev := append([]Event(nil), st.Timeline...)
	fx.Summary = &Summary{ID: st.id, Outcome: o, Anchor: anchorOf(ev), Events: ev}
}

// readiness logs, once per generation, that the green side is known and
// mapped, before any switchover.
func (st *State) readiness(fx *Effects) {
	if st.readinessLogged || st.Phase != meta.Created {
		return
	}
	m := meta.Correspond(st.hosts[meta.RoleSource], st.hosts[meta.RoleTarget], st.ips, st.writers())
	n := 0
	var parts []string
	for _, b := range st.hosts[meta.RoleSource] {
		if st.ips[b] == "" {
			continue
		}
		g := m[b]
		if g == "" || st.ips[g] == "" {
			return // not complete yet
		}
		n++
		parts = append(parts, b+" ("+st.ips[b]+") -> "+g+" ("+st.ips[g]+")")
	}
	if n == 0 {
		return
	}
	st.readinessLogged = true
	fx.log(slog.LevelInfo, "bluegreen: target topology recognized",
		slog.String("bgd_id", st.id), slog.String("mapping", strings.Join(parts, ", ")))
}

// Mapping pairs a blue host with its green counterpart; its fields are
// those of bluegreen.Mapping.
type Mapping struct {
	Blue      string
	BlueAddr  string
	Green     string // "" when no counterpart is known
	GreenAddr string
}

// Mappings lists the blue → green mapping in force (the frozen one during
// a switchover, else the current one).
func (st *State) Mappings() []Mapping {
	blue, green, ips := st.hosts[meta.RoleSource], st.hosts[meta.RoleTarget], st.ips
	m := meta.Correspond(blue, green, ips, st.writers())
	if st.Frozen {
		blue, ips, m = st.startHosts[meta.RoleSource], st.startIPs, st.mapping
	}
	var out []Mapping
	for _, b := range blue {
		g := m[b]
		out = append(out, Mapping{Blue: b, BlueAddr: ips[b], Green: g, GreenAddr: st.greenAddr(g, ips)})
	}
	return out
}

// greenAddr is the address of green host g: its start address, else its
// current one.
func (st *State) greenAddr(g string, start map[string]string) string {
	if g == "" {
		return ""
	}
	if ip := start[g]; ip != "" {
		return ip
	}
	if !st.gone[g] {
		return st.ips[g]
	}
	return ""
}

// writers returns the writer instances the topology names, on both sides.
func (st *State) writers() map[string]bool {
	w := map[string]bool{}
	for _, list := range st.instances {
		for _, in := range list {
			if in.Writer {
				w[in.Host] = true
			}
		}
	}
	return w
}

// withInstances returns endpoints and the instances' hosts, sorted, each
// once.
func withInstances(endpoints []string, instances []topology.Instance) []string {
	if len(instances) == 0 {
		return endpoints
	}
	out := append([]string(nil), endpoints...)
	have := map[string]bool{}
	for _, h := range endpoints {
		have[h] = true
	}
	for _, in := range instances {
		if !have[in.Host] {
			have[in.Host] = true
			out = append(out, in.Host)
		}
	}
	sort.Strings(out)
	return out
}

func disjoint(a, b []string) bool {
	set := map[string]bool{}
	for _, x := range b {
		set[x] = true
	}
	for _, x := range a {
		if set[x] {
			return false
		}
	}
	return true
}
