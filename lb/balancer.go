package lb

import (
	"context"
	"strconv"
	"strings"
)

// AdminState is the administrative state of a load-balancer member: what
// the operator asked for, as read back from the device. The zero value is
// [StateUnknown].
type AdminState int

const (
	// StateUnknown means the state was not read, or the device reported a
	// combination this package does not recognise.
	StateUnknown AdminState = iota
	// Enabled: the member takes all traffic.
	Enabled
	// Disabled: the member takes no new connections but keeps persistent
	// and active ones (F5 user-disabled/user-up; A10
	// disable-with-health-check). Health monitors keep running.
	Disabled
	// ForcedOffline: the member takes no new connections, persistent ones
	// included; only connections already open remain (F5
	// user-disabled/user-down; A10 disable). This is the state a drain
	// waits in.
	ForcedOffline
)

var stateNames = [...]string{"unknown", "enabled", "disabled", "forced-offline"}

// String returns "unknown", "enabled", "disabled" or "forced-offline".
func (s AdminState) String() string {
	if s < 0 || int(s) >= len(stateNames) {
		return "AdminState(" + strconv.Itoa(int(s)) + ")"
	}
	return stateNames[s]
}

// MarshalText returns [AdminState.String].
func (s AdminState) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText parses what [ParseAdminState] accepts.
func (s *AdminState) UnmarshalText(b []byte) error {
	v, err := ParseAdminState(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// ParseAdminState parses "enabled", "disabled", "forced-offline" and
// "unknown" (case-insensitive; "enable", "disable", "forced_offline" and
// "offline" are accepted too). Anything else is a [*ConfigError].
func ParseAdminState(s string) (AdminState, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "enabled", "enable":
		return Enabled, nil
	case "disabled", "disable":
		return Disabled, nil
	case "forced-offline", "forced_offline", "offline":
		return ForcedOffline, nil
	case "unknown":
		return StateUnknown, nil
	}
	return StateUnknown, &ConfigError{Pkg: "lb", Field: "state", Why: "unknown admin state " + strconv.Quote(s)}
}

// Member names one thing a load balancer sends traffic to. The zero value
// is invalid: Node is required.
//
//   - F5: with Pool and Port, the pool member Pool/Node:Port; with neither,
//     the node Node in every pool.
//   - A10: with Port, the real server's port Node/Port+Protocol; without,
//     the real server Node (all its ports). Pool is not supported.
type Member struct {
	// Node is the node (F5) or real server (A10) name. Required.
	Node string `json:"node"`
	// Pool is the F5 pool holding the member; empty means the node itself.
	Pool string `json:"pool,omitempty"`
	// Port is the service port (1-65535); 0 means the whole node.
	Port int `json:"port,omitempty"`
	// Protocol is the A10 port protocol, "tcp" (the default when empty)
	// or "udp". F5 ignores it.
	Protocol string `json:"protocol,omitempty"`
}

// String returns "pool/node:port", "node:port" or "node".
func (m Member) String() string {
	var b strings.Builder
	if m.Pool != "" {
		b.WriteString(m.Pool)
		b.WriteByte('/')
	}
	b.WriteString(m.Node)
	if m.Port != 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(m.Port))
	}
	if m.Protocol != "" && m.Protocol != "tcp" {
		b.WriteByte('/')
		b.WriteString(m.Protocol)
	}
	return b.String()
}

// Validate returns a [*ConfigError] when Node is empty or contains a "/",
// the port is out of range or the protocol is neither "", "tcp" nor "udp".
// Adapters check their own further rules.
func (m Member) Validate() error {
	switch {
	case m.Node == "":
		return &ConfigError{Pkg: "lb", Field: "node", Why: "must not be empty"}
	case strings.ContainsAny(m.Node, "/?#"):
		return &ConfigError{Pkg: "lb", Field: "node", Why: "must not contain '/', '?' or '#' (got " + strconv.Quote(m.Node) + ")"}
	case strings.ContainsAny(m.Pool, "/?#"):
		return &ConfigError{Pkg: "lb", Field: "pool", Why: "must not contain '/', '?' or '#' (got " + strconv.Quote(m.Pool) + ")"}
	case m.Port < 0 || m.Port > 65535:
		return &ConfigError{Pkg: "lb", Field: "port", Why: "must be between 1 and 65535, or 0 for the whole node (got " + strconv.Itoa(m.Port) + ")"}
	case m.Protocol != "" && m.Protocol != "tcp" && m.Protocol != "udp":
		return &ConfigError{Pkg: "lb", Field: "protocol", Why: "must be \"tcp\" or \"udp\" (got " + strconv.Quote(m.Protocol) + ")"}
	}
	return nil
}

// State is a member's state as read back from the device.
type State struct {
	// Admin is the administrative state.
	Admin AdminState `json:"admin"`
	// Availability is the device's own view of the member, verbatim: F5's
	// "state" field ("up", "down", "unchecked", "user-down", ...), A10's
	// oper state ("Up", "Down", "Disabled"). Informational.
	Availability string `json:"availability,omitempty"`
	// Detail is the raw read-back the Admin state was derived from, for
	// example "session=monitor-enabled state=up" (F5) or "action=disable"
	// (A10). Informational.
	Detail string `json:"detail,omitempty"`
}

// Balancer is one load balancer's REST API, reduced to what a drain needs.
// Implementations: [github.com/holdfast-db/holdfast/lb/f5] and
// [github.com/holdfast-db/holdfast/lb/a10].
//
// Every method blocks and honours ctx. Implementations are safe for
// concurrent use after Login: a group drain polls several members at once
// through one session. Errors are [*APIError] values (or a [*ConfigError]
// for an invalid [Member]); secrets never appear in them.
type Balancer interface {
	// Vendor returns "f5" or "a10".
	Vendor() string
	// Login opens an admin session (F5 token, A10 signature). Calls made
	// later re-login once by themselves when the device answers that the
	// session expired (HTTP 401), then retry.
	Login(ctx context.Context) error
	// KeepAlive keeps the session from expiring: F5 extends the token, A10
	// makes a cheap authenticated call (re-authenticating on 401, as A10
	// has no extension call). It logs in if no session is open.
	KeepAlive(ctx context.Context) error
	// Logout ends the session. It is idempotent and succeeds when the
	// session had already expired. F5 tokens hold one of the user's 100
	// slots, so always log out.
	Logout(ctx context.Context) error
	// State reads the member's administrative state.
	State(ctx context.Context, m Member) (State, error)
	// Connections reads the member's current connections. It returns an
	// [*APIError] of Kind [KindStatsDisabled] when the device does not
	// count them (A10 with statistics collection disabled reads 0), so
	// that a 0 is never mistaken for a drained member.
	Connections(ctx context.Context, m Member) (int64, error)
	// SetState changes the member's administrative state. Setting the state
	// it is already in succeeds.
	SetState(ctx context.Context, m Member, s AdminState) error
}
