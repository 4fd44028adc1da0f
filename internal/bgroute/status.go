package bgroute

import (
	"net"
	"slices"
	"sort"
	"strconv"

	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/internal/bgroute/meta"
	"github.com/holdfast-db/holdfast/internal/bgroute/switchover"
)

// Status returns the Router's current state. It takes the Router's lock
// briefly; it is not meant for the hot path.
func (r *Router) Status() bluegreen.Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.st
	s := bluegreen.Status{
		ID:                   r.cfg.ID,
		Phase:                bluegreen.Phase(st.Phase),
		Generation:           st.Gen,
		Engine:               engineOf(st.Engine),
		Stale:                st.Stale,
		Routing:              describe(r.snap.Load()),
		BlueDNSUpdated:       st.BlueDNSUpdated,
		GreenDNSRemoved:      st.GreenDNSRemoved,
		GreenTopologyChanged: st.GreenTopologyChanged,
		Monitors:             []bluegreen.MonitorStatus{r.mons[meta.RoleSource], r.mons[meta.RoleTarget]},
		Waiting:              r.waiting.Load(),
		Dropped:              r.dropped.Load(),
		Rejected:             r.rejected.Load(),
		TimedOut:             r.timedOut.Load(),
		AliasedCerts:         r.aliasedCerts.Load(),
		Closed:               r.closed,
	}
	for _, m := range st.Mappings() {
		s.Mapping = append(s.Mapping, bluegreen.Mapping(m))
	}
	for _, e := range st.Timeline {
		s.Timeline = append(s.Timeline, bluegreen.Event(e))
	}
	if st.Frozen {
		s.SwitchoverDeadline = st.Deadline
	}
	if r.last != nil {
		l := *r.last
		s.LastSummary = &l
	}
	return s
}

// describe returns the public form of a snapshot.
func describe(s *switchover.Snapshot) bluegreen.Routing {
	r := bluegreen.Routing{Normal: s.Normal, Phase: bluegreen.Phase(s.Phase), SuspendQueries: s.SuspendQueries, NamesUntil: s.NamesUntil}
	for h, rt := range s.Routes {
		addr := rt.Addr
		if addr != "" && rt.Port != 0 {
			addr = net.JoinHostPort(addr, strconv.Itoa(rt.Port))
		}
		r.Routes = append(r.Routes, bluegreen.Route{Host: h, Action: rt.Action.String(), Addr: addr})
	}
	sort.Slice(r.Routes, func(i, j int) bool { return r.Routes[i].Host < r.Routes[j].Host })
	for ip := range s.Drop {
		r.DropAddrs = append(r.DropAddrs, ip)
	}
	sort.Strings(r.DropAddrs)
	for h, id := range s.Names {
		r.Names = append(r.Names, bluegreen.Name{Host: h, Auth: slices.Clone(id.Auth), Cert: slices.Clone(id.Cert)})
	}
	sort.Slice(r.Names, func(i, j int) bool { return r.Names[i].Host < r.Names[j].Host })
	return r
}

// summaryOf converts the phase machine's summary.
func summaryOf(s *switchover.Summary) *bluegreen.Summary {
	ev := make([]bluegreen.Event, len(s.Events))
	for i, e := range s.Events {
		ev[i] = bluegreen.Event(e)
	}
	return &bluegreen.Summary{ID: s.ID, Outcome: bluegreen.Outcome(s.Outcome.String()), Anchor: s.Anchor, Events: ev}
}
