package console

import (
	"html/template"
	"strconv"
	"strings"
	"time"

	"github.com/holdfast-db/holdfast/lb"
)

// pageView is what a page shows, and the JSON answer of its path.
type pageView struct {
	Operator string      `json:"operator"`            // "" when read-only
	ReadOnly string      `json:"read_only,omitempty"` // why no control is offered
	PolledAt time.Time   `json:"polled_at"`           // when the members were last read
	Now      time.Time   `json:"now"`
	Totals   phaseCounts `json:"totals"`
	Groups   []groupView `json:"groups,omitempty"`
	Request  *entryView  `json:"request,omitempty"` // the entry of ?audit=N
	Entry    *entryView  `json:"entry,omitempty"`   // /audit/N
	Error    string      `json:"error,omitempty"`

	Title     string `json:"-"`
	RefreshMS int64  `json:"-"`
	Detail    bool   `json:"-"` // a group's own page: per-node controls
	Status    int    `json:"-"` // error pages
}

// groupView is one group.
type groupView struct {
	Name       string       `json:"name"`
	Phase      string       `json:"phase"` // Enabled, Disabling, Disabled, Mixed or Unknown
	MayControl bool         `json:"may_control"`
	Holder     *holderView  `json:"holder"`            // null when not locked
	Running    *entryView   `json:"running,omitempty"` // the request in progress
	Counts     phaseCounts  `json:"phases"`
	Members    []memberView `json:"members"`
	ReadAt     time.Time    `json:"read_at"`
	Error      string       `json:"error,omitempty"`
	Audit      []entryView  `json:"audit"`
	Nodes      []string     `json:"-"`
}

type holderView struct {
	Owner string    `json:"owner"`
	Host  string    `json:"host"`
	Since time.Time `json:"since"`
}

func holderOf(h lb.Holder) *holderView {
	return &holderView{Owner: h.Owner, Host: h.Host, Since: h.Since}
}

// memberView is one member.
type memberView struct {
	Balancer      string `json:"balancer"`
	Member        string `json:"member"`
	Node          string `json:"node"`
	Phase         string `json:"phase"`
	Admin         string `json:"admin"`
	Connections   *int64 `json:"connections"` // null when not read
	StatsDisabled bool   `json:"stats_disabled,omitempty"`
	Availability  string `json:"availability,omitempty"`
	Error         string `json:"error,omitempty"`
}

func memberOf(m lb.MemberStatus) memberView {
	v := memberView{Balancer: m.Target.Balancer, Member: m.Target.Member.String(), Node: m.Target.Node, Phase: string(m.Phase), Admin: m.State.Admin.String(), StatsDisabled: m.StatsDisabled, Availability: m.State.Availability}
	if m.Conns >= 0 {
		n := m.Conns
		v.Connections = &n
	}
	if m.Err != nil {
		v.Error = m.Err.Error()
	}
	return v
}

// ConnsText is what the connections cell shows.
func (m memberView) ConnsText() string {
	switch {
	case m.StatsDisabled:
		return "not counted"
	case m.Connections == nil:
		return "–"
	}
	return strconv.FormatInt(*m.Connections, 10)
}

// entryView is an audit entry.
type entryView struct {
	ID         int64             `json:"id"`
	Started    time.Time         `json:"started"`
	DurationMS int64             `json:"duration_ms"`
	Operator   string            `json:"operator"`
	Host       string            `json:"host"`
	Action     string            `json:"action"`
	Group      string            `json:"group"`
	Nodes      []string          `json:"nodes"`
	Result     string            `json:"result"`
	State      string            `json:"state"` // running, interrupted (running, but its holder is gone) or done
	Error      string            `json:"error,omitempty"`
	Members    []lb.MemberRecord `json:"members,omitempty"`
	// Origin is what the requesting process saw of who ran it, beside
	// the asserted operator; zero for entries written before it existed.
	Origin lb.Origin `json:"origin,omitzero"`
	Notes  []string  `json:"notes,omitempty"` // such as an unverified transport
}

// entryOf describes e; with holders, a "running" entry whose operator no
// longer holds the group's lock reads as interrupted (its process ended
// without recording a result). The lock row's host is the store's, which
// may differ from the controller's, so only the owner is compared.
func entryOf(e lb.Entry, holders map[string]lb.Holder) entryView {
	v := entryView{ID: e.ID, Started: e.Started, DurationMS: e.Duration.Milliseconds(), Operator: e.Operator, Host: e.Host, Action: string(e.Action), Group: e.Group, Nodes: e.Nodes, Result: string(e.Result), Error: e.Error, Members: e.Members, State: "done", Origin: e.Origin, Notes: e.Notes}
	if e.Result == lb.ResultRunning {
		v.State = "running"
		if holders != nil {
			if h, ok := holders[e.Group]; !ok || h.Owner != e.Operator {
				v.State = "interrupted"
			}
		}
	}
	return v
}

// phaseCounts counts members by phase.
type phaseCounts struct {
	Enabled   int `json:"enabled"`
	Disabling int `json:"disabling"`
	Disabled  int `json:"disabled"`
	Unknown   int `json:"unknown"`
}

func (p *phaseCounts) add(phase string) {
	switch lb.Phase(phase) {
	case lb.PhaseEnabled:
		p.Enabled++
	case lb.PhaseDisabling:
		p.Disabling++
	case lb.PhaseDisabled:
		p.Disabled++
	default:
		p.Unknown++
	}
}

// overall is the group's phase: the members' one when they agree,
// Disabling while any is, Unknown when any is, else Mixed.
func (p phaseCounts) overall() string {
	n := p.Enabled + p.Disabling + p.Disabled + p.Unknown
	switch {
	case p.Disabling > 0:
		return string(lb.PhaseDisabling)
	case p.Unknown > 0:
		return string(lb.PhaseUnknown)
	case p.Enabled == n:
		return string(lb.PhaseEnabled)
	case p.Disabled == n:
		return string(lb.PhaseDisabled)
	}
	return "Mixed"
}

var funcs = template.FuncMap{
	"lower": strings.ToLower,
	"list":  func(s ...string) []string { return s },
	"iso":   func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"clock": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") + " UTC" },
	"ago": func(now, t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return roundAgo(now.Sub(t)) + " ago"
	},
	"for": func(now, t time.Time) string { return roundAgo(now.Sub(t)) },
	"ms": func(ms int64) string {
		d := time.Duration(ms) * time.Millisecond
		if d < time.Second {
			return d.String()
		}
		return d.Round(100 * time.Millisecond).String()
	},
	"confirm": func(action, group string, nodes int) string {
		what := "every member of " + group
		if nodes > 0 {
			what = "this node of " + group
		}
		switch action {
		case "drain":
			return "Drain " + what + "? It is forced offline, then the console waits until no connection is left."
		case "forced-offline":
			return "Force " + what + " offline? It takes no new connection at all."
		case "disable":
			return "Disable " + what + "? It takes no new connection (persistent ones still served)."
		}
		return ""
	},
	"resultClass": func(r string) string {
		switch lb.Result(r) {
		case lb.ResultOK:
			return "ok"
		case lb.ResultRunning:
			return "running"
		case lb.ResultNotDrained, lb.ResultFailed, lb.ResultCanceled:
			return "bad"
		}
		return "refused"
	},
}

func roundAgo(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}
