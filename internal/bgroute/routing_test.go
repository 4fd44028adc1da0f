package bgroute

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/internal/bgroute/meta"
	"github.com/holdfast-db/holdfast/internal/bgroute/switchover"
	"github.com/holdfast-db/holdfast/internal/topology"
	"github.com/jackc/pgx/v5"
)

// Hosts of the test deployment (Aurora-shaped), and their addresses.
const (
	blueC   = "db.cluster-x1.us-east-1.rds.amazonaws.com"
	blueR   = "db.cluster-ro-x1.us-east-1.rds.amazonaws.com"
	blueI   = "db-1.x1.us-east-1.rds.amazonaws.com"
	greenC  = "db-green-abc123.cluster-x1.us-east-1.rds.amazonaws.com"
	greenR  = "db-green-abc123.cluster-ro-x1.us-east-1.rds.amazonaws.com"
	greenI  = "db-1-green-abc123.x1.us-east-1.rds.amazonaws.com"
	oldC    = "db-old1.cluster-x1.us-east-1.rds.amazonaws.com"
	oldI    = "db-1-old1.x1.us-east-1.rds.amazonaws.com"
	blueIP  = "10.0.0.1"
	greenIP = "10.0.0.2"
	otherIP = "10.0.0.9"
)

var t0 = time.Date(2026, 2, 15, 14, 30, 0, 0, time.UTC)

// harness drives a Router without monitors: it plays the two monitors'
// observations, from its own metadata and DNS, at times of its own clock.
type harness struct {
	t      *testing.T
	r      *Router
	now    time.Time
	logs   *bytes.Buffer
	status map[meta.Role]string   // metadata status per role ("" = no row)
	hosts  map[meta.Role][]string // endpoints per role
	dns    map[string]string      // host → address; "" = does not resolve
	// topology per role, read with the rows when set (aurora_replica_status()
	// on the role's server), as the monitor does when the Router needs it.
	topology map[meta.Role][]topology.Instance
}

func newHarness(t *testing.T, c bluegreen.Config) *harness {
	t.Helper()
	return newHarnessOn(t, c, blueC)
}

// newHarnessOn is newHarness for a pool on host.
func newHarnessOn(t *testing.T, c bluegreen.Config, host string) *harness {
	t.Helper()
	h := &harness{t: t, now: t0, logs: &bytes.Buffer{},
		status: map[meta.Role]string{},
		hosts:  map[meta.Role][]string{meta.RoleSource: {blueC, blueI}, meta.RoleTarget: {greenC, greenI}},
		dns: map[string]string{blueC: blueIP, blueR: blueIP, blueI: blueIP,
			greenC: greenIP, greenR: greenIP, greenI: greenIP},
	}
	c.Logger = slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c, engine := mustDefaults(t, c)
	cc, err := pgx.ParseConfig("postgres://u@" + host + ":5432/db")
	if err != nil {
		t.Fatal(err)
	}
	h.r = newRouter(c, engine, cc, func() time.Time { return h.now })
	return h
}

// poll reports what the monitor of role would see now.
func (h *harness) poll(role meta.Role) {
	gen, _ := h.r.generation()
	o := switchover.Observation{Role: role, Gen: gen, Kind: switchover.KindEmpty, DNS: map[string]switchover.DNSResult{}}
	var rows []meta.Row
	for _, rl := range []meta.Role{meta.RoleSource, meta.RoleTarget} {
		if h.status[rl] == "" {
			continue
		}
		for _, ep := range h.hosts[rl] {
			p, ok := meta.ParseStatus(h.status[rl])
			rows = append(rows, meta.Row{Version: "1.0", Endpoint: ep, Port: 5432, Role: rl, Status: h.status[rl], Phase: p, KnownStatus: ok})
		}
	}
	if len(rows) > 0 {
		o.Kind, o.Engine, o.View, o.Peer = switchover.KindRows, meta.EngineAurora, meta.ViewOf(rows, role), meta.ViewOf(rows, role.Other())
		if h.topology != nil && o.View.Found && h.r.needsTopology(role) {
			o.Topology, o.Instances = true, h.topology[role]
		}
	}
	for _, host := range h.r.hostsToResolve(role, o.Learned()) {
		if ip, ok := h.dns[host]; ok && ip != "" {
			o.DNS[host] = switchover.DNSResult{IP: ip}
		} else {
			o.DNS[host] = switchover.DNSResult{Gone: true}
		}
	}
	h.r.report(o, bluegreen.MonitorStatus{Role: role.String()})
}

func (h *harness) pollBoth() { h.poll(meta.RoleSource); h.poll(meta.RoleTarget) }

// set writes status for both roles and lets both monitors poll.
func (h *harness) set(status string) {
	h.status[meta.RoleSource], h.status[meta.RoleTarget] = status, status
	h.pollBoth()
}

func (h *harness) advance(d time.Duration) { h.now = h.now.Add(d) }

func (h *harness) tick() { h.r.tick() }

// swapDNS points the blue names at green and the old names at blue.
func (h *harness) swapDNS() {
	for _, b := range []string{blueC, blueR, blueI} {
		h.dns[b] = greenIP
	}
	h.dns[oldC], h.dns[oldI] = blueIP, blueIP
}

func (h *harness) removeGreenDNS() {
	for _, g := range []string{greenC, greenR, greenI} {
		h.dns[g] = ""
	}
}

func (h *harness) rename() {
	h.hosts[meta.RoleSource] = []string{oldC, oldI}
	h.hosts[meta.RoleTarget] = []string{blueC, blueI}
}

// route returns the connect action for host, and its address.
func (h *harness) route(host string) (switchover.Action, string) {
	s := h.r.snap.Load()
	a, _ := s.ConnectAction([]string{host})
	return a, s.Routes[host].Addr
}

type want struct {
	phase          bluegreen.Phase
	normal         bool
	routes         map[string]switchover.Action // hosts not listed must Pass
	addrs          map[string]string            // Substitute addresses
	suspendQueries bool
	drop           []string
	gen            uint64
	outcome        bluegreen.Outcome // of LastSummary; "": none
	stale          bool
	events         []string // must appear in the timeline or last summary, in order
	logs           []string // substrings of the log
}

func (h *harness) check(w want) {
	t := h.t
	t.Helper()
	st := h.r.Status()
	s := h.r.snap.Load()
	if st.Phase != w.phase || s.Normal != w.normal || st.Generation != w.gen || st.Stale != w.stale {
		t.Errorf("phase %v normal %v gen %d stale %v; want %v %v %d %v", st.Phase, s.Normal, st.Generation, st.Stale,
			w.phase, w.normal, w.gen, w.stale)
	}
	for _, host := range []string{blueC, blueR, blueI, greenC, greenR, greenI, blueIP, greenIP} {
		a, addr := h.route(host)
		if a != w.routes[host] {
			t.Errorf("route %s = %v, want %v", host, a, w.routes[host])
		}
		if a == switchover.Substitute && addr != w.addrs[host] {
			t.Errorf("route %s substitutes %q, want %q", host, addr, w.addrs[host])
		}
	}
	if s.SuspendQueries != w.suspendQueries {
		t.Errorf("suspendQueries = %v, want %v", s.SuspendQueries, w.suspendQueries)
	}
	var drop []string
	for ip := range s.Drop {
		drop = append(drop, ip)
	}
	sort.Strings(drop)
	if strings.Join(drop, ",") != strings.Join(w.drop, ",") {
		t.Errorf("drop = %v, want %v", drop, w.drop)
	}
	sum, ok := h.r.LastSummary()
	if w.outcome == "" && ok || w.outcome != "" && (!ok || sum.Outcome != w.outcome) {
		t.Errorf("last summary = %v (%v), want outcome %v", sum.Outcome, ok, w.outcome)
	}
	events := st.Timeline
	if w.outcome != "" {
		events = sum.Events
	}
	var names []string
	for _, e := range events {
		names = append(names, e.Name)
	}
	i := 0
	for _, n := range names {
		if i < len(w.events) && n == w.events[i] {
			i++
		}
	}
	if i < len(w.events) {
		t.Errorf("events %q do not contain %q in order", names, w.events)
	}
	for _, l := range w.logs {
		if !strings.Contains(h.logs.String(), l) {
			t.Errorf("log lacks %q:\n%s", l, h.logs.String())
		}
	}
}

var (
	toBlue    = map[string]string{blueC: blueIP, blueR: blueIP, blueI: blueIP}
	toGreen   = map[string]string{blueC: greenIP, blueR: greenIP, blueI: greenIP, greenC: greenIP, greenR: greenIP, greenI: greenIP}
	suspended = map[string]switchover.Action{blueC: switchover.Suspend, blueR: switchover.Suspend, blueI: switchover.Suspend, greenC: switchover.Suspend, greenR: switchover.Suspend, greenI: switchover.Suspend, blueIP: switchover.Suspend, greenIP: switchover.Suspend}
	prep      = map[string]switchover.Action{blueC: switchover.Substitute, blueR: switchover.Substitute, blueI: switchover.Substitute}
	post      = map[string]switchover.Action{blueC: switchover.Substitute, blueR: switchover.Substitute, blueI: switchover.Substitute, greenC: switchover.Substitute, greenR: switchover.Substitute, greenI: switchover.Substitute}
)

func inProgress(h *harness) {
	h.set(meta.StatusAvailable)
	h.advance(10 * time.Second)
	h.set(meta.StatusSwitchoverInitiated)
	h.advance(5 * time.Second)
	h.set(meta.StatusSwitchoverInProgress)
}

func inPost(h *harness) {
	inProgress(h)
	h.advance(2 * time.Second)
	h.set(meta.StatusSwitchoverPostProcess)
}

// TestRoutingPerPhase drives the provider through the phases and checks
// the routing decided for every host. The clock is injected: no test here
// sleeps.
func TestRoutingPerPhase(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		cfg    bluegreen.Config
		script func(h *harness)
		want   want
	}{
		{
			name:   "no metadata: NOT_CREATED routes nothing",
			script: func(h *harness) { h.pollBoth() },
			want:   want{phase: bluegreen.NotCreated, normal: true, events: []string{"NOT_CREATED"}},
		},
		{
			name:   "CREATED routes nothing and logs the readiness line once",
			script: func(h *harness) { h.set(meta.StatusAvailable); h.set(meta.StatusAvailable) },
			want: want{phase: bluegreen.Created, normal: true, events: []string{"CREATED"},
				logs: []string{"target topology recognized", blueC + " (10.0.0.1) -> " + greenC + " (10.0.0.2)"}},
		},
		{
			name:   "PREPARATION substitutes blue names with the blue start addresses",
			script: func(h *harness) { h.set(meta.StatusAvailable); h.set(meta.StatusSwitchoverInitiated) },
			want:   want{phase: bluegreen.Preparation, routes: prep, addrs: toBlue, events: []string{"CREATED", "PREPARATION"}},
		},
		{
			name: "PREPARATION keeps the start address when blue DNS changes",
			script: func(h *harness) {
				h.set(meta.StatusAvailable)
				h.set(meta.StatusSwitchoverInitiated)
				h.dns[blueC] = otherIP
				h.pollBoth()
			},
			want: want{phase: bluegreen.Preparation, routes: prep, addrs: toBlue},
		},
		{
			name:   "IN_PROGRESS suspends every host, address and query, and drops blue",
			script: inProgress,
			want: want{phase: bluegreen.InProgress, routes: suspended, suspendQueries: true, drop: []string{blueIP},
				events: []string{"PREPARATION", "IN_PROGRESS", switchover.EventBlueConnsDropped}},
		},
		{
			name: "IN_PROGRESS with a DNS change of one blue name only stays suspended",
			script: func(h *harness) {
				inProgress(h)
				h.dns[blueC] = greenIP
				h.pollBoth()
			},
			want: want{phase: bluegreen.InProgress, routes: suspended, suspendQueries: true, drop: []string{blueIP}},
		},
		{
			name: "IN_PROGRESS is released when blue DNS points at green",
			script: func(h *harness) {
				inProgress(h)
				h.advance(time.Second)
				h.swapDNS()
				h.pollBoth()
			},
			want: want{phase: bluegreen.InProgress, drop: []string{blueIP},
				routes: map[string]switchover.Action{greenC: switchover.Substitute, greenR: switchover.Substitute, greenI: switchover.Substitute}, addrs: toGreen,
				events: []string{"IN_PROGRESS", switchover.EventBlueDNSUpdated, switchover.EventReleasedOnBlueDNS}},
		},
		{
			name:   "POST substitutes blue and green names with the green addresses",
			script: inPost,
			want:   want{phase: bluegreen.Post, routes: post, addrs: toGreen, drop: []string{blueIP}, events: []string{"IN_PROGRESS", "POST"}},
		},
		{
			name: "POST suspends a blue name until its green counterpart has an address",
			script: func(h *harness) {
				h.dns[greenC], h.dns[greenR], h.dns[greenI] = "", "", ""
				inPost(h)
			},
			want: want{phase: bluegreen.Post, drop: []string{blueIP},
				routes: map[string]switchover.Action{blueC: switchover.SuspendUntilFound, blueR: switchover.SuspendUntilFound, blueI: switchover.SuspendUntilFound}},
		},
		{
			name: "POST lets a blue name with no green counterpart through",
			script: func(h *harness) {
				h.hosts[meta.RoleTarget] = []string{greenC} // green has no instance endpoint
				inPost(h)
			},
			want: want{phase: bluegreen.Post, drop: []string{blueIP},
				routes: map[string]switchover.Action{blueC: switchover.Substitute, blueR: switchover.Substitute, greenC: switchover.Substitute, greenR: switchover.Substitute},
				addrs:  toGreen},
		},
		{
			name: "POST finds a green address learned after PREPARATION",
			script: func(h *harness) {
				h.dns[greenC], h.dns[greenR], h.dns[greenI] = "", "", ""
				inPost(h)
				h.dns[greenC], h.dns[greenR], h.dns[greenI] = greenIP, greenIP, greenIP
				h.pollBoth()
			},
			want: want{phase: bluegreen.Post, routes: post, addrs: toGreen, drop: []string{blueIP}},
		},
		{
			name: "POST rejects green names once green took the blue names",
			script: func(h *harness) {
				inPost(h)
				h.rename()
				h.pollBoth()
			},
			want: want{phase: bluegreen.Post, drop: []string{blueIP},
				routes: map[string]switchover.Action{blueC: switchover.Substitute, blueR: switchover.Substitute, blueI: switchover.Substitute, greenC: switchover.Reject, greenR: switchover.Reject, greenI: switchover.Reject},
				addrs:  toGreen, events: []string{"POST", switchover.EventGreenTopologyChanged}},
		},
		{
			name: "POST stops rejecting once green DNS is removed",
			script: func(h *harness) {
				inPost(h)
				h.rename()
				h.removeGreenDNS()
				h.pollBoth()
			},
			want: want{phase: bluegreen.Post, drop: []string{blueIP}, routes: prep, addrs: toGreen,
				events: []string{"POST", switchover.EventGreenTopologyChanged, switchover.EventGreenDNSRemoved}},
		},
		{
			name: "POST releases blue names once blue DNS points at green",
			script: func(h *harness) {
				inPost(h)
				h.swapDNS()
				h.pollBoth()
			},
			want: want{phase: bluegreen.Post, drop: []string{blueIP},
				routes: map[string]switchover.Action{greenC: switchover.Substitute, greenR: switchover.Substitute, greenI: switchover.Substitute}, addrs: toGreen,
				events: []string{"POST", switchover.EventBlueDNSUpdated}},
		},
		{
			name: "COMPLETED routes as POST until DNS has caught up",
			script: func(h *harness) {
				inPost(h)
				h.set(meta.StatusSwitchoverCompleted)
			},
			want: want{phase: bluegreen.Completed, routes: post, addrs: toGreen, drop: []string{blueIP}, events: []string{"POST", "COMPLETED"}},
		},
		{
			name: "COMPLETED with DNS caught up ends the switchover and restarts monitoring",
			script: func(h *harness) {
				inPost(h)
				h.advance(10 * time.Second)
				h.rename()
				h.pollBoth()
				h.advance(10 * time.Second)
				h.swapDNS()
				h.removeGreenDNS()
				h.pollBoth()
				h.advance(time.Second)
				h.set(meta.StatusSwitchoverCompleted)
			},
			// The TARGET row still says COMPLETED to the restarted monitors: a
			// deployment that exists, not a switchover.
			want: want{phase: bluegreen.Created, normal: true, gen: 1, stale: true, outcome: bluegreen.OutcomeCompleted,
				events: []string{"CREATED", "PREPARATION", "IN_PROGRESS", "POST", switchover.EventGreenTopologyChanged,
					switchover.EventBlueDNSUpdated, switchover.EventGreenDNSRemoved, "COMPLETED", switchover.EventRoutingNormal},
				logs: []string{"Blue/Green Deployment switchover COMPLETED"}},
		},
		{
			name: "a server lagging behind after COMPLETED does not start the switchover again",
			script: func(h *harness) {
				inPost(h)
				h.swapDNS()
				h.removeGreenDNS()
				h.pollBoth()
				h.status[meta.RoleSource] = meta.StatusSwitchoverCompleted
				h.poll(meta.RoleSource) // ends the switchover
				if h.r.Status().Generation != 1 {
					h.t.Fatal("COMPLETED did not end the switchover")
				}
				h.poll(meta.RoleTarget) // green still says POST
			},
			want: want{phase: bluegreen.Created, normal: true, gen: 1, stale: true, outcome: bluegreen.OutcomeCompleted},
		},
		{
			name: "a COMPLETED deployment seen fresh is not a switchover",
			script: func(h *harness) {
				h.set(meta.StatusSwitchoverCompleted)
			},
			want: want{phase: bluegreen.Created, normal: true, events: []string{"CREATED"}},
		},
		{
			name: "the timer fires without any metadata change",
			cfg:  bluegreen.Config{SwitchoverTimeout: time.Minute},
			script: func(h *harness) {
				inProgress(h)
				h.advance(54 * time.Second) // 59 s after PREPARATION
				h.tick()
				if h.r.Status().Phase != bluegreen.InProgress {
					h.t.Error("timer fired early")
				}
				h.advance(time.Second)
				h.tick()
			},
			want: want{phase: bluegreen.NotCreated, normal: true, gen: 1, stale: true, outcome: bluegreen.OutcomeTimedOut,
				events: []string{"PREPARATION", "IN_PROGRESS", switchover.EventTimerExpired},
				logs:   []string{"Blue/Green Deployment switchover TIMED OUT"}},
		},
		{
			name: "after the timer a stuck IN_PROGRESS routes nothing",
			cfg:  bluegreen.Config{SwitchoverTimeout: time.Minute},
			script: func(h *harness) {
				inProgress(h)
				h.advance(time.Minute)
				h.tick()
				h.pollBoth() // still IN_PROGRESS
			},
			want: want{phase: bluegreen.Created, normal: true, gen: 1, stale: true, outcome: bluegreen.OutcomeTimedOut},
		},
		{
			name: "the metadata leaving the stuck phase clears the stale flag",
			cfg:  bluegreen.Config{SwitchoverTimeout: time.Minute},
			script: func(h *harness) {
				inProgress(h)
				h.advance(time.Minute)
				h.tick()
				h.pollBoth()
				h.set(meta.StatusAvailable)
				h.set(meta.StatusSwitchoverInitiated) // a new switchover is seen again
			},
			want: want{phase: bluegreen.Preparation, routes: prep, addrs: toBlue, gen: 1, outcome: bluegreen.OutcomeTimedOut},
		},
		{
			name: "the timer after COMPLETED ends as COMPLETED",
			cfg:  bluegreen.Config{SwitchoverTimeout: time.Minute},
			script: func(h *harness) {
				inPost(h)
				h.set(meta.StatusSwitchoverCompleted)
				h.advance(time.Minute)
				h.tick()
				h.pollBoth()
			},
			want: want{phase: bluegreen.Created, normal: true, gen: 1, outcome: bluegreen.OutcomeCompleted, events: []string{"COMPLETED", switchover.EventTimerExpired}},
		},
		{
			name: "green going back before COMPLETED is a rollback",
			script: func(h *harness) {
				inProgress(h)
				h.advance(time.Second)
				h.set(meta.StatusAvailable)
				h.poll(meta.RoleTarget) // the second read going back confirms it
			},
			want: want{phase: bluegreen.NotCreated, normal: true, gen: 1, stale: true, outcome: bluegreen.OutcomeRolledBack,
				events: []string{"PREPARATION", "IN_PROGRESS", "CREATED (rollback)", switchover.EventRolledBack},
				logs:   []string{"Blue/Green Deployment switchover ROLLED BACK"}},
		},
		{
			name: "one green read going back, then forward again, is not a rollback",
			script: func(h *harness) {
				inProgress(h)
				h.status[meta.RoleTarget] = meta.StatusSwitchoverInitiated // a server whose copy trails
				h.poll(meta.RoleTarget)
				h.status[meta.RoleTarget] = meta.StatusSwitchoverInProgress
				h.poll(meta.RoleTarget)
			},
			want: want{phase: bluegreen.InProgress, routes: suspended, suspendQueries: true, drop: []string{blueIP}},
		},
		{
			name: "blue going back is not a rollback",
			script: func(h *harness) {
				inProgress(h)
				h.status[meta.RoleSource] = meta.StatusAvailable
				h.poll(meta.RoleSource)
			},
			want: want{phase: bluegreen.InProgress, routes: suspended, suspendQueries: true, drop: []string{blueIP}},
		},
		{
			name: "green metadata gone is not a rollback",
			script: func(h *harness) {
				inProgress(h)
				h.status[meta.RoleTarget] = ""
				h.status[meta.RoleSource] = ""
				h.poll(meta.RoleTarget)
			},
			want: want{phase: bluegreen.InProgress, routes: suspended, suspendQueries: true, drop: []string{blueIP}},
		},
		{
			name: "green going back after COMPLETED is not a rollback",
			script: func(h *harness) {
				inPost(h)
				h.set(meta.StatusSwitchoverCompleted)
				h.status[meta.RoleTarget] = meta.StatusSwitchoverPostProcess
				h.poll(meta.RoleTarget)
			},
			want: want{phase: bluegreen.Completed, routes: post, addrs: toGreen, drop: []string{blueIP}},
		},
		{
			name: "monitoring after a switchover sees the next deployment",
			script: func(h *harness) {
				inProgress(h)
				h.set(meta.StatusAvailable) // rollback, confirmed by the next read
				h.poll(meta.RoleTarget)
				h.advance(time.Minute)
				h.pollBoth() // both monitors read CREATED: the next switchover counts
				h.set(meta.StatusSwitchoverInitiated)
			},
			want: want{phase: bluegreen.Preparation, routes: prep, addrs: toBlue, gen: 1, outcome: bluegreen.OutcomeRolledBack, events: []string{"PREPARATION"}},
		},
		{
			name: "an unknown status changes nothing",
			script: func(h *harness) {
				h.set(meta.StatusAvailable)
				h.set("SWITCHOVER_SOMETHING_NEW")
			},
			want: want{phase: bluegreen.Created, normal: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, tt.cfg)
			tt.script(h)
			h.check(tt.want)
		})
	}
}

// The topology (aurora_replica_status()) adds the instance endpoints to the
// inventory when the metadata lists only the cluster endpoints: a pool on
// an instance endpoint is routed through every phase, blue readers map to
// green readers (the writer is the topology's), and connections to every
// blue reader's address are dropped at IN_PROGRESS, not only to the one
// the reader endpoint resolved to at PREPARATION. Without the topology
// (the old behaviour) none of this happens.
func TestTopologyRoutesInstances(t *testing.T) {
	t.Parallel()
	const (
		blueI2, greenI2     = "db-2.x1.us-east-1.rds.amazonaws.com", "db-2-green-abc123.x1.us-east-1.rds.amazonaws.com"
		blueI3, greenI3     = "db-3.x1.us-east-1.rds.amazonaws.com", "db-3-green-abc123.x1.us-east-1.rds.amazonaws.com"
		blueR2IP, greenR2IP = "10.0.0.3", "10.0.0.4"
		blueR3IP, greenR3IP = "10.0.0.5", "10.0.0.6"
	)
	setup := func(t *testing.T, withTopology bool) *harness {
		h := newHarnessOn(t, bluegreen.Config{}, blueI)
		h.hosts = map[meta.Role][]string{meta.RoleSource: {blueC}, meta.RoleTarget: {greenC}} // cluster endpoints only
		h.dns[blueI2], h.dns[greenI2], h.dns[blueI3], h.dns[greenI3] = blueR2IP, greenR2IP, blueR3IP, greenR3IP
		h.dns[blueR], h.dns[greenR] = blueR2IP, greenR2IP // the reader endpoints lead to one reader each
		if withTopology {
			h.topology = map[meta.Role][]topology.Instance{
				meta.RoleSource: {{Host: blueI, Port: 5432, Writer: true}, {Host: blueI2, Port: 5432}, {Host: blueI3, Port: 5432}},
				meta.RoleTarget: {{Host: greenI, Port: 5432, Writer: true}, {Host: greenI2, Port: 5432}, {Host: greenI3, Port: 5432}},
			}
		}
		return h
	}
	routes := func(h *harness) map[string]string {
		out := map[string]string{}
		for _, r := range h.r.Status().Routing.Routes {
			out[r.Host] = r.Action + " " + r.Addr
		}
		return out
	}

	h := setup(t, true)
	h.set(meta.StatusAvailable)
	mapped := map[string]string{}
	for _, m := range h.r.Status().Mapping {
		mapped[m.Blue] = m.Green + " " + m.GreenAddr
	}
	if mapped[blueI] != greenI+" "+greenIP || mapped[blueI2] != greenI2+" "+greenR2IP || mapped[blueI3] != greenI3+" "+greenR3IP ||
		mapped[blueR] != greenR+" "+greenR2IP {
		t.Errorf("mapping %v: want the writer instance to green's writer, readers to green's readers", mapped)
	}
	h.set(meta.StatusSwitchoverInitiated)
	if r := routes(h); r[blueI] != "substitute "+blueIP+":5432" || r[blueI2] != "substitute "+blueR2IP+":5432" ||
		r[blueI3] != "substitute "+blueR3IP+":5432" {
		t.Errorf("PREPARATION routes %v: want the instances pinned to their start addresses", r)
	}
	h.advance(time.Second)
	h.set(meta.StatusSwitchoverInProgress)
	s := h.r.snap.Load()
	if !s.Drop[blueIP] || !s.Drop[blueR2IP] || !s.Drop[blueR3IP] || len(s.Drop) != 3 || !s.SuspendQueries {
		t.Errorf("IN_PROGRESS drop %v, suspend queries %v: want every blue address dropped (the reader endpoint led to %s only) "+
			"and the instance pool's queries held", s.Drop, s.SuspendQueries, blueR2IP)
	}
	if a, _ := h.route(blueI); a != switchover.Suspend {
		t.Errorf("IN_PROGRESS %s: %v, want suspend", blueI, a)
	}
	h.advance(time.Second)
	h.set(meta.StatusSwitchoverPostProcess)
	if r := routes(h); r[blueI] != "substitute "+greenIP+":5432" || r[blueI2] != "substitute "+greenR2IP+":5432" ||
		r[blueI3] != "substitute "+greenR3IP+":5432" {
		t.Errorf("POST routes %v: want the instances led to their green counterparts", r)
	}

	old := setup(t, false)
	inProgress(old)
	s = old.r.snap.Load()
	if a, _ := old.route(blueI); a != switchover.Pass || s.Drop[blueR3IP] || s.SuspendQueries {
		t.Errorf("without the topology: %s %v, drop %v, suspend queries %v; want the old behaviour (pass, %s not dropped, queries not held)",
			blueI, a, s.Drop, s.SuspendQueries, blueR3IP)
	}
}

// The start snapshot is frozen at PREPARATION: a DNS flip during
// IN_PROGRESS does not rewrite it (a defect of the Go wrapper), so the
// mapping keeps the blue start address and "Blue DNS updated" is seen.
func TestStartSnapshotIsFrozen(t *testing.T) {
	t.Parallel()
	h := newHarness(t, bluegreen.Config{})
	inProgress(h)
	h.swapDNS()
	h.pollBoth()
	st := h.r.Status()
	if !st.BlueDNSUpdated {
		t.Error("blue DNS update not seen")
	}
	found := false
	for _, m := range st.Mapping {
		if m.Blue == blueC {
			found = true
			if m.BlueAddr != blueIP || m.Green != greenC || m.GreenAddr != greenIP {
				t.Errorf("mapping %+v, want %s (%s) -> %s (%s)", m, blueC, blueIP, greenC, greenIP)
			}
		}
	}
	if !found {
		t.Errorf("mapping %+v lacks %s", st.Mapping, blueC)
	}
}

// A monitor that reports for the first time after the snapshot was frozen
// still fills in its side's start addresses, even after PREPARATION.
func TestLateMonitorFillsTheSnapshot(t *testing.T) {
	t.Parallel()
	h := newHarness(t, bluegreen.Config{})
	h.status[meta.RoleSource], h.status[meta.RoleTarget] = meta.StatusSwitchoverInitiated, meta.StatusSwitchoverInitiated
	h.poll(meta.RoleTarget) // the blue monitor has not reported yet
	h.status[meta.RoleSource], h.status[meta.RoleTarget] = meta.StatusSwitchoverInProgress, meta.StatusSwitchoverInProgress
	h.poll(meta.RoleTarget)
	if d := h.r.snap.Load().Drop; len(d) != 0 {
		t.Fatalf("drop %v before any blue address is known", d)
	}
	h.poll(meta.RoleSource)
	if d := h.r.snap.Load().Drop; !d[blueIP] {
		t.Errorf("drop %v, want the blue address learned late", d)
	}
	h.dns[blueC] = otherIP // a later change must not rewrite it
	h.poll(meta.RoleSource)
	for _, m := range h.r.Status().Mapping {
		if m.Blue == blueC && m.BlueAddr != blueIP {
			t.Errorf("start address of %s rewritten to %s", blueC, m.BlueAddr)
		}
	}
}

// The blue monitor's rows name the green side too: the inventory knows the
// green hosts before the green monitor reports.
func TestPeerHostsLearned(t *testing.T) {
	t.Parallel()
	h := newHarness(t, bluegreen.Config{})
	h.status[meta.RoleSource], h.status[meta.RoleTarget] = meta.StatusAvailable, meta.StatusAvailable
	h.poll(meta.RoleSource)
	st := h.r.Status()
	for _, m := range st.Mapping {
		if m.Blue == blueC && m.Green != greenC {
			t.Errorf("mapping %+v, want %s -> %s", m, blueC, greenC)
		}
	}
	if got := h.r.hostsToResolve(meta.RoleTarget, nil); len(got) != 3 {
		t.Errorf("green hosts to resolve: %v, want the cluster, its reader twin and the instance", got)
	}
}

// COMPLETED keeps the time the metadata reported it; "Routing normal",
// the summary's last event, is when DNS had caught up and the routing
// went back to plain host names.
func TestSummaryMarksRoutingNormal(t *testing.T) {
	t.Parallel()
	h := newHarness(t, bluegreen.Config{})
	inPost(h)
	h.advance(time.Second)
	h.set(meta.StatusSwitchoverCompleted)
	completedAt := h.now
	h.advance(5 * time.Second)
	h.swapDNS()
	h.removeGreenDNS()
	h.pollBoth()
	sum, ok := h.r.LastSummary()
	if !ok || sum.Outcome != bluegreen.OutcomeCompleted {
		t.Fatalf("summary %v, %v; want COMPLETED", sum, ok)
	}
	var completed, normal time.Time
	for _, e := range sum.Events {
		switch e.Name {
		case "COMPLETED":
			completed = e.Time
		case switchover.EventRoutingNormal:
			normal = e.Time
		}
	}
	if last := sum.Events[len(sum.Events)-1]; last.Name != switchover.EventRoutingNormal {
		t.Errorf("last event %q, want %q", last.Name, switchover.EventRoutingNormal)
	}
	if !completed.Equal(completedAt) || !normal.Equal(h.now) {
		t.Errorf("COMPLETED at %v, Routing normal at %v; want %v (the metadata) and %v (DNS caught up)",
			completed, normal, completedAt, h.now)
	}
	if !strings.Contains(sum.String(), " Routing normal\n") {
		t.Errorf("summary lacks the routing-normal row:\n%s", sum)
	}
}

// Waits are bounded: by Config.ConnectTimeout and by the caller's context,
// and end at once when the routing moves on or the Router is closed.
func TestWaitBounds(t *testing.T) {
	t.Parallel()
	newSuspended := func(t *testing.T, bound time.Duration) *harness {
		h := newHarness(t, bluegreen.Config{ConnectTimeout: bound})
		inProgress(h)
		return h
	}
	connect := func(h *harness, ctx context.Context) error {
		cc, err := pgx.ParseConfig("postgres://u@" + blueC + ":5432/db")
		if err != nil {
			h.t.Fatal(err)
		}
		return routeErr(h.r.route(ctx, cc))
	}
	t.Run("the bound", func(t *testing.T) {
		t.Parallel()
		const bound = 50 * time.Millisecond
		h := newSuspended(t, bound)
		start := time.Now()
		err := connect(h, context.Background())
		var se *bluegreen.SuspendError
		if !errors.As(err, &se) || se.Op != "connect" || se.Phase != bluegreen.InProgress || se.Err != context.DeadlineExceeded {
			t.Fatalf("err = %v, want a *SuspendError with DeadlineExceeded", err)
		}
		if el := time.Since(start); el < bound {
			t.Errorf("returned after %v, before the bound %v", el, bound)
		}
		if v, ok := bluegreen.Rule(err); !ok || v.Reason != "bluegreen-suspended" || !v.Retryable() {
			t.Errorf("Rule = %v %v, want transient %s", v, ok, "bluegreen-suspended")
		}
		if h.r.Status().TimedOut != 1 {
			t.Errorf("TimedOut = %d, want 1", h.r.Status().TimedOut)
		}
	})
	t.Run("the caller's context", func(t *testing.T) {
		t.Parallel()
		h := newSuspended(t, time.Hour)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := connect(h, ctx)
		var se *bluegreen.SuspendError
		if !errors.As(err, &se) || se.Err != context.Canceled {
			t.Fatalf("err = %v, want a *SuspendError with Canceled", err)
		}
		if _, ok := bluegreen.Rule(err); ok {
			t.Error("Rule decided a canceled wait; the built-in rules must (Fatal canceled)")
		}
	})
	t.Run("a phase change releases", func(t *testing.T) {
		t.Parallel()
		h := newSuspended(t, time.Hour)
		done := make(chan error, 1)
		go func() { done <- connect(h, context.Background()) }()
		waitWaiting(h)
		h.set(meta.StatusSwitchoverPostProcess)
		if err := <-done; err != nil {
			t.Fatalf("connect = %v after POST, want nil", err)
		}
	})
	t.Run("Close releases", func(t *testing.T) {
		t.Parallel()
		h := newSuspended(t, time.Hour)
		done := make(chan error, 1)
		go func() { done <- connect(h, context.Background()) }()
		waitWaiting(h)
		h.r.Close()
		if err := <-done; err != nil {
			t.Fatalf("connect = %v after Close, want nil", err)
		}
		if !h.r.Status().Closed || !h.r.snap.Load().Normal {
			t.Error("after Close the routing is not normal")
		}
	})
	t.Run("reject fails at once", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, bluegreen.Config{ConnectTimeout: time.Hour})
		inPost(h)
		h.rename()
		h.pollBoth()
		cc, err := pgx.ParseConfig("postgres://u@" + greenC + ":5432/db")
		if err != nil {
			t.Fatal(err)
		}
		err = routeErr(h.r.route(context.Background(), cc))
		var re *bluegreen.RejectError
		if !errors.As(err, &re) || re.Host != greenC {
			t.Fatalf("err = %v, want a *RejectError for %s", err, greenC)
		}
		if v, ok := bluegreen.Rule(err); !ok || v.Retryable() || v.Reason != "bluegreen-rejected" {
			t.Errorf("Rule = %v, want fatal %s", v, "bluegreen-rejected")
		}
	})
	t.Run("substitution keeps the host name and pins the address", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, bluegreen.Config{})
		inPost(h)
		cc, err := pgx.ParseConfig("postgres://u@" + blueC + ":5432/db?sslmode=verify-full")
		if err != nil {
			t.Fatal(err)
		}
		if err := routeErr(h.r.route(context.Background(), cc)); err != nil {
			t.Fatal(err)
		}
		addrs, err := cc.LookupFunc(context.Background(), blueC)
		if err != nil || len(addrs) != 1 || addrs[0] != greenIP+":5432" {
			t.Errorf("lookup = %v %v, want %s:5432", addrs, err, greenIP)
		}
		if cc.Host != blueC || cc.TLSConfig.ServerName != blueC {
			t.Errorf("host %q, TLS server name %q; want both %s", cc.Host, cc.TLSConfig.ServerName, blueC)
		}
	})
}

type recorder struct {
	mu       sync.Mutex
	phases   []string
	held     []string
	finished []string
}

func (r *recorder) Phase(_ context.Context, _ int, name string, active bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.phases = append(r.phases, name+map[bool]string{true: "+", false: ""}[active])
}

func (r *recorder) Suspended(_ context.Context, point, reason string, _ time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.held = append(r.held, point+"/"+reason+"/"+map[bool]string{true: "failed", false: "resumed"}[err != nil])
}

func (r *recorder) Finished(_ context.Context, outcome string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.finished = append(r.finished, outcome)
}

// The Observer hears every phase change, every held caller and the end of
// each switchover.
func TestObserver(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	h := newHarness(t, bluegreen.Config{ConnectTimeout: time.Millisecond})
	h.r.observer = rec // as New's o
	inProgress(h)
	cc, err := pgx.ParseConfig("postgres://u@" + blueC + ":5432/db")
	if err != nil {
		t.Fatal(err)
	}
	if err := routeErr(h.r.route(context.Background(), cc)); err == nil {
		t.Fatal("connect not held")
	}
	h.set(meta.StatusAvailable) // rollback, confirmed by the next read
	h.poll(meta.RoleTarget)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if got, want := strings.Join(rec.phases, ","), "CREATED,PREPARATION+,IN_PROGRESS+"; got != want {
		t.Errorf("phases %s, want %s", got, want)
	}
	if got, want := strings.Join(rec.held, ","), "connect/IN_PROGRESS/failed"; got != want {
		t.Errorf("held %s, want %s", got, want)
	}
	if got, want := strings.Join(rec.finished, ","), "ROLLED BACK"; got != want {
		t.Errorf("finished %s, want %s", got, want)
	}
}

// The public enums convert to and from the internal ones: Phase by value
// and name, the others by name (their values are their names); the Config's
// Engine selects the metadata it names.
func TestEnumsMatchInternal(t *testing.T) {
	t.Parallel()
	phases := map[bluegreen.Phase]meta.Phase{bluegreen.NotCreated: meta.NotCreated, bluegreen.Created: meta.Created, bluegreen.Preparation: meta.Preparation,
		bluegreen.InProgress: meta.InProgress, bluegreen.Post: meta.Post, bluegreen.Completed: meta.Completed}
	for p, m := range phases {
		if int(p) != int(m) || p.String() != m.String() {
			t.Errorf("Phase %v (%d) != meta %v (%d)", p, p, m, m)
		}
	}
	// MonitorStatus.Role, documented as "SOURCE" (blue) or "TARGET" (green).
	roles := map[string]meta.Role{"SOURCE": meta.RoleSource, "TARGET": meta.RoleTarget}
	for r, m := range roles {
		if r != m.String() {
			t.Errorf("Role %q != meta %v (%d)", r, m, m)
		}
	}
	engines := map[bluegreen.Engine]meta.Engine{bluegreen.EngineAuto: meta.EngineAuto, bluegreen.EngineAurora: meta.EngineAurora, bluegreen.EngineRDS: meta.EngineRDS}
	for e, m := range engines {
		if engineOf(m) != e {
			t.Errorf("Engine %q != meta %v (%d)", e, m, m)
		}
		if c, got, err := withDefaults(bluegreen.Config{Engine: e}); err != nil || got != m || c.Engine != e {
			t.Errorf("Config.Engine %q selects %v (%q, %v), want %v", e, got, c.Engine, err, m)
		}
	}
	if c, got, err := withDefaults(bluegreen.Config{}); err != nil || got != meta.EngineAuto || c.Engine != bluegreen.EngineAuto {
		t.Errorf("the zero Config.Engine selects %v (%q, %v), want auto", got, c.Engine, err)
	}
	outcomes := map[bluegreen.Outcome]switchover.Outcome{bluegreen.OutcomeCompleted: switchover.OutcomeCompleted,
		bluegreen.OutcomeRolledBack: switchover.OutcomeRolledBack, bluegreen.OutcomeTimedOut: switchover.OutcomeTimedOut}
	for o, s := range outcomes {
		if string(o) != s.String() {
			t.Errorf("Outcome %q != switchover %v (%d)", o, s, s)
		}
	}
}

// routeErr returns the error of Router.route.
func routeErr(_ []string, err error) error { return err }

// TestRetryRoute: the connect layer's retry of a connection routed once in
// BeforeConnect asks the Router again at each dial (its layer's Route): unchanged outside a switchover, held through IN_PROGRESS
// (bounded by ctx), released in POST with its address, which the drop
// list then covers (the pool drops a connection to old blue when it is
// acquired, and connects anew through BeforeConnect). Without it, a retry
// redials blue through IN_PROGRESS (refused: 53300) and spends the retry
// budget.
func TestRetryRoute(t *testing.T) {
	t.Parallel()
	h := newHarness(t, bluegreen.Config{})
	ctx := context.Background()
	const blueAddr = blueIP + ":5432"
	h.set(meta.StatusAvailable)
	if addr, err := h.r.retryRoute(ctx, blueC, blueAddr); err != nil || addr != blueAddr {
		t.Fatalf("CREATED: retryRoute = %q, %v; want %q unchanged", addr, err, blueAddr)
	}
	h.advance(10 * time.Second)
	h.set(meta.StatusSwitchoverInitiated)
	h.advance(5 * time.Second)
	h.set(meta.StatusSwitchoverInProgress)

	// Held while IN_PROGRESS lasts: a short context ends the hold.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	addr, err := h.r.retryRoute(short, blueC, blueAddr)
	cancel()
	var se *bluegreen.SuspendError
	if !errors.As(err, &se) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("IN_PROGRESS: retryRoute = %q, %v; want it held until its context ended", addr, err)
	}

	// A retry held when POST comes is released, its address kept: a
	// connection it makes to old blue is dropped at acquire.
	type result struct {
		addr string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		addr, err := h.r.retryRoute(ctx, blueC, blueAddr)
		done <- result{addr, err}
	}()
	h.advance(2 * time.Second)
	h.set(meta.StatusSwitchoverPostProcess)
	select {
	case r := <-done:
		if r.err != nil || r.addr != blueAddr {
			t.Fatalf("POST: retryRoute = %q, %v; want %q, released", r.addr, r.err, blueAddr)
		}
		if _, dropped := h.r.snap.Load().Drop[blueIP]; !dropped {
			t.Fatalf("POST: old blue %s is not on the drop list: a retry's connection to it would be kept", blueIP)
		}
	case <-time.After(10 * time.Second): // generous bound: it is released by the snapshot change
		t.Fatal("POST: retryRoute still held")
	}
}

// waitWaiting returns once a connect waits on h's router. The channel is
// taken before the status is read, so a change between the two is not
// missed.
func waitWaiting(h *harness) {
	for {
		ch := h.r.Changed()
		if h.r.Status().Waiting > 0 {
			return
		}
		<-ch
	}
}
