package bluegreen

import (
	"log/slog"
	"maps"
	"sort"
	"strings"
	"time"
)

// maxTimeline caps a timeline; the oldest events are dropped beyond it.
const maxTimeline = 256

// dnsResult is one lookup made by a monitor.
type dnsResult struct {
	ip   string // the first address; "" when none
	gone bool   // the name does not exist (or has no address)
	err  error  // any other failure: the result says nothing
}

// observation is one poll of one monitor.
type observation struct {
	role   Role
	gen    uint64
	kind   obsKind
	engine Engine
	view   roleView // when kind == obsRows
	peer   roleView // the other role's rows, read from the same metadata
	err    error    // when kind is obsFailed or obsNoConn
	host   string   // the host the monitor reads from
	addr   string   // the address it is connected to
	dns    map[string]dnsResult
}

// roleState is what the state remembers of one role's reports.
type roleState struct {
	polled  bool  // a poll of this role read the metadata (rows, empty or absent)
	seen    bool  // a row of this role with a known status was seen
	last    Phase // the last phase such a row reported
	current Phase // as last, but NotCreated after an empty or absent read
}

// state is the provider's view of the deployment. It is owned by the
// Router and only touched with Router.mu held; its methods are pure
// functions of their inputs and the given time, for tests.
type state struct {
	cfg *Config

	gen    uint64
	phase  Phase // merged phase; forward only while a switchover is active
	roles  [3]roleState
	stale  bool // a switchover just ended: mid-switchover phases are ignored until both roles have left them
	engine Engine

	hosts map[Role][]string // current endpoints by role
	ports map[string]int
	ips   map[string]string // current address by host (last successful lookup)
	gone  map[string]bool   // host did not resolve at the last lookup

	frozen     bool    // a switchover is active: the start snapshot below is set
	filled     [3]bool // the role's monitor has reported since the snapshot was frozen
	startHosts map[Role][]string
	startIPs   map[string]string
	startPorts map[string]int
	mapping    map[string]string // blue host → green host

	blueDNSUpdated, greenDNSRemoved, greenTopologyChanged bool

	deadline        time.Time
	timeline        []Event
	readinessLogged bool
}

func newState(cfg *Config, gen uint64, stale bool) *state {
	return &state{
		cfg:        cfg,
		gen:        gen,
		stale:      stale,
		hosts:      map[Role][]string{},
		ports:      map[string]int{},
		ips:        map[string]string{},
		gone:       map[string]bool{},
		startHosts: map[Role][]string{},
		startIPs:   map[string]string{},
		startPorts: map[string]int{},
		mapping:    map[string]string{},
	}
}

// effects are what a state change asks the Router to do once it has
// released its lock.
type effects struct {
	logs    []logLine
	summary *Summary // a switchover ended: log it and start a new generation
	phases  []Phase  // the merged phase changed to these, in order
}

type logLine struct {
	level slog.Level
	msg   string
	attrs []slog.Attr
}

func (e *effects) log(level slog.Level, msg string, attrs ...slog.Attr) {
	e.logs = append(e.logs, logLine{level, msg, attrs})
}

func (st *state) event(now time.Time, name string, fx *effects) {
	st.timeline = append(st.timeline, Event{Time: now, Name: name})
	if len(st.timeline) > maxTimeline {
		st.timeline = st.timeline[len(st.timeline)-maxTimeline:]
	}
	fx.log(slog.LevelInfo, "bluegreen: "+name, slog.String("bgd_id", st.cfg.ID), slog.String("phase", st.phase.String()))
}

// apply merges one observation. Observations of an older generation are
// ignored.
func (st *state) apply(o observation, now time.Time) effects {
	var fx effects
	if o.gen != st.gen {
		return fx
	}
	if o.kind == obsRows && o.engine != EngineAuto {
		st.engine = o.engine
	}
	// DNS first: a phase change below may freeze the addresses.
	for h, r := range o.dns {
		switch {
		case r.err != nil:
		case r.gone || r.ip == "":
			st.gone[h] = true
		default:
			st.gone[h] = false
			st.ips[h] = r.ip
		}
	}
	rs := &st.roles[o.role]
	var v roleView
	switch o.kind {
	case obsEmpty, obsAbsent:
		rs.polled = true
		rs.current = NotCreated
	case obsRows:
		rs.polled = true
		v = o.view
		if !v.found {
			rs.current = NotCreated
			break
		}
		if len(v.endpoints) > 0 {
			st.hosts[o.role] = v.endpoints
			maps.Copy(st.ports, v.ports)
		}
		// Learn the other side's hosts from these rows too, until its own
		// monitor reports them (it may not reach its server yet).
		if peer := other(o.role); o.peer.found && len(st.hosts[peer]) == 0 && len(o.peer.endpoints) > 0 {
			st.hosts[peer] = o.peer.endpoints
			maps.Copy(st.ports, o.peer.ports)
		}
		if !v.known {
			break // an unknown status says nothing about the phase
		}
		if o.role == RoleTarget && rs.seen && v.phase < rs.last && v.phase >= Created &&
			st.frozen && st.phase < Completed {
			st.rollback(v.phase, now, &fx)
			return fx
		}
		rs.seen, rs.last, rs.current = true, v.phase, v.phase
	}
	st.fill(o.role)
	st.merge(o.role, now, &fx)
	if o.role == RoleTarget && v.found && st.frozen && st.phase >= InProgress && !st.greenTopologyChanged &&
		len(v.endpoints) > 0 && disjoint(v.endpoints, st.startHosts[RoleTarget]) {
		st.greenTopologyChanged = true
		st.event(now, EventGreenTopologyChanged, &fx)
	}
	st.dnsFlags(now, &fx)
	st.checkDone(now, &fx)
	if !st.frozen {
		st.readiness(&fx)
	}
	return fx
}

func other(r Role) Role {
	if r == RoleSource {
		return RoleTarget
	}
	return RoleSource
}

// midSwitchover reports whether p is PREPARATION, IN_PROGRESS or POST.
func midSwitchover(p Phase) bool { return p >= Preparation && p <= Post }

// merge recomputes the merged phase from the roles' reports.
func (st *state) merge(from Role, now time.Time, fx *effects) {
	src, dst := st.roles[RoleSource], st.roles[RoleTarget]
	if st.stale && src.polled && dst.polled && !midSwitchover(src.current) && !midSwitchover(dst.current) {
		st.stale = false
		fx.log(slog.LevelDebug, "bluegreen: the metadata has left the last switchover", slog.String("bgd_id", st.cfg.ID))
	}
	if st.frozen {
		p := st.phase
		for _, r := range []Role{RoleSource, RoleTarget} {
			if st.roles[r].seen && st.roles[r].last > p {
				p = st.roles[r].last
			}
		}
		if p > st.phase { // phases skipped between two polls are not recorded
			st.phase = p
			st.event(now, p.String(), fx)
			fx.phases = append(fx.phases, p)
			if p == InProgress {
				st.event(now, EventBlueConnsDropped, fx)
			}
		}
		return
	}
	// No switchover under way: the phase follows the roles' current reports.
	idle, start := NotCreated, NotCreated
	for _, r := range []Role{RoleSource, RoleTarget} {
		c := st.roles[r].current
		switch {
		case c == Completed, midSwitchover(c) && st.stale:
			// A finished deployment seen fresh, or the metadata of the
			// switchover that just ended (stuck, or a server that lags):
			// nothing to route.
			c = Created
		case midSwitchover(c):
			start = max(start, c)
			continue
		}
		idle = max(idle, c)
	}
	if start != NotCreated {
		st.begin(from, start, now, fx)
		return
	}
	if idle != st.phase || len(st.timeline) == 0 {
		st.phase = idle
		st.event(now, idle.String(), fx)
		fx.phases = append(fx.phases, idle)
	}
}

// begin freezes the start snapshot and starts the switchover timer. from
// is the role whose report began it.
func (st *state) begin(from Role, p Phase, now time.Time, fx *effects) {
	st.frozen = true
	st.phase = p
	st.deadline = now.Add(st.cfg.SwitchoverTimeout)
	st.startHosts[RoleSource] = nil
	st.startHosts[RoleTarget] = nil
	st.fillRole(RoleSource)
	st.fillRole(RoleTarget)
	st.filled = [3]bool{}
	st.filled[from] = true
	st.event(now, p.String(), fx)
	fx.phases = append(fx.phases, p)
	if p == InProgress {
		st.event(now, EventBlueConnsDropped, fx)
	}
}

// fill adds to the start snapshot what it lacks: hosts and addresses
// learned during PREPARATION, or in the first report of a role's monitor
// after the snapshot was frozen (a monitor that was slow to start). It
// never changes a start address.
func (st *state) fill(role Role) {
	if !st.frozen {
		return
	}
	if st.phase == Preparation || !st.filled[role] {
		st.fillRole(role)
		st.filled[role] = true
	}
}

func (st *state) fillRole(role Role) {
	have := map[string]bool{}
	for _, h := range st.startHosts[role] {
		have[h] = true
	}
	for _, h := range st.hosts[role] {
		if !have[h] {
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
	st.mapping = correspond(st.startHosts[RoleSource], st.startHosts[RoleTarget], st.startIPs)
}

// dnsFlags latches "Blue DNS updated" and "Green DNS removed" once the
// switchover is past PREPARATION.
func (st *state) dnsFlags(now time.Time, fx *effects) {
	if !st.frozen || st.phase < InProgress {
		return
	}
	if !st.blueDNSUpdated {
		n, changed := 0, 0
		for _, h := range st.startHosts[RoleSource] {
			if st.startIPs[h] == "" {
				continue
			}
			n++
			if !st.gone[h] && st.ips[h] != "" && st.ips[h] != st.startIPs[h] {
				changed++
			}
		}
		if n > 0 && changed == n {
			st.blueDNSUpdated = true
			st.event(now, EventBlueDNSUpdated, fx)
			if st.phase == InProgress {
				st.event(now, EventReleasedOnBlueDNS, fx)
			}
		}
	}
	if !st.greenDNSRemoved {
		n, gone := 0, 0
		for _, h := range st.startHosts[RoleTarget] {
			if st.startIPs[h] == "" {
				continue
			}
			n++
			if st.gone[h] {
				gone++
			}
		}
		if n > 0 && gone == n {
			st.greenDNSRemoved = true
			st.event(now, EventGreenDNSRemoved, fx)
		}
	}
}

// checkDone ends the switchover once COMPLETED is reported and DNS has
// caught up.
func (st *state) checkDone(now time.Time, fx *effects) {
	if st.frozen && st.phase == Completed && st.blueDNSUpdated && st.greenDNSRemoved {
		st.finish(OutcomeCompleted, fx)
	}
}

// tick ends the switchover when its timer has expired.
func (st *state) tick(now time.Time) effects {
	var fx effects
	if !st.frozen || now.Before(st.deadline) {
		return fx
	}
	st.event(now, EventTimerExpired, &fx)
	if st.phase == Completed {
		st.finish(OutcomeCompleted, &fx)
	} else {
		st.finish(OutcomeTimedOut, &fx)
	}
	return fx
}

func (st *state) rollback(p Phase, now time.Time, fx *effects) {
	st.event(now, p.String()+" (rollback)", fx)
	st.event(now, EventRolledBack, fx)
	st.finish(OutcomeRolledBack, fx)
}

func (st *state) finish(o Outcome, fx *effects) {
	ev := append([]Event(nil), st.timeline...)
	fx.summary = &Summary{ID: st.cfg.ID, Outcome: o, Anchor: anchorOf(ev), Events: ev}
}

// readiness logs, once per generation, that the green side is known and
// mapped, before any switchover.
func (st *state) readiness(fx *effects) {
	if st.readinessLogged || st.phase != Created {
		return
	}
	m := correspond(st.hosts[RoleSource], st.hosts[RoleTarget], st.ips)
	n := 0
	var parts []string
	for _, b := range st.hosts[RoleSource] {
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
		slog.String("bgd_id", st.cfg.ID), slog.String("mapping", strings.Join(parts, ", ")))
}

// mappings lists the blue → green mapping in force (the frozen one during a
// switchover, else the current one).
func (st *state) mappings() []Mapping {
	blue, green, ips := st.hosts[RoleSource], st.hosts[RoleTarget], st.ips
	m := correspond(blue, green, ips)
	if st.frozen {
		blue, ips, m = st.startHosts[RoleSource], st.startIPs, st.mapping
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
func (st *state) greenAddr(g string, start map[string]string) string {
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
