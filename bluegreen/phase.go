package bluegreen

import (
	"strconv"
	"strings"
)

// Phase is where a blue/green deployment is in its life, as the metadata
// reports it. Phases are ordered: a switchover moves from NotCreated to
// Completed, and only a rollback moves it back. The zero value is
// NotCreated.
type Phase int

// The phases, in order. Statuses map to phases as follows (see
// [ParseStatus]):
//
//	| metadata status                 | Phase       | active |
//	|---------------------------------|-------------|--------|
//	| (empty or NULL)                 | NotCreated  | no     |
//	| AVAILABLE                       | Created     | no     |
//	| SWITCHOVER_INITIATED            | Preparation | yes    |
//	| SWITCHOVER_IN_PROGRESS          | InProgress  | yes    |
//	| SWITCHOVER_IN_POST_PROCESSING   | Post        | yes    |
//	| SWITCHOVER_COMPLETED            | Completed   | yes    |
const (
	NotCreated  Phase = iota // no deployment, or its metadata is not provisioned yet
	Created                  // the deployment exists; green is a replica of blue
	Preparation              // the switchover is about to start
	InProgress               // blue and green are being switched; nothing should run
	Post                     // green has taken over; DNS still lags
	Completed                // the switchover is over (DNS may still lag)
)

var phaseNames = [...]string{
	NotCreated:  "NOT_CREATED",
	Created:     "CREATED",
	Preparation: "PREPARATION",
	InProgress:  "IN_PROGRESS",
	Post:        "POST",
	Completed:   "COMPLETED",
}

// String returns the phase's name, for example "IN_PROGRESS", or
// "Phase(N)" for a value out of range.
func (p Phase) String() string {
	if p >= 0 && int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return "Phase(" + strconv.Itoa(int(p)) + ")"
}

// MarshalText encodes the phase as its name, for JSON.
func (p Phase) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// Active reports whether a switchover is under way or just finished
// (Preparation through Completed).
func (p Phase) Active() bool { return p >= Preparation && p <= Completed }

// Metadata statuses, as RDS writes them in the status column.
const (
	StatusAvailable             = "AVAILABLE"
	StatusSwitchoverInitiated   = "SWITCHOVER_INITIATED"
	StatusSwitchoverInProgress  = "SWITCHOVER_IN_PROGRESS"
	StatusSwitchoverPostProcess = "SWITCHOVER_IN_POST_PROCESSING"
	StatusSwitchoverCompleted   = "SWITCHOVER_COMPLETED"
)

// Metadata roles, as RDS writes them in the role column.
const (
	RoleNameSource = "BLUE_GREEN_DEPLOYMENT_SOURCE"
	RoleNameTarget = "BLUE_GREEN_DEPLOYMENT_TARGET"
)

// KnownVersion is the only metadata version this package knows. Rows of
// another version are read as if they were this one, with a warning.
const KnownVersion = "1.0"

// ParseStatus maps a metadata status to a phase, ignoring case and
// surrounding space. An empty status is NotCreated. ok is false for a status
// this package does not know; the phase is then NotCreated and must not be
// used.
func ParseStatus(s string) (p Phase, ok bool) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "":
		return NotCreated, true
	case StatusAvailable:
		return Created, true
	case StatusSwitchoverInitiated:
		return Preparation, true
	case StatusSwitchoverInProgress:
		return InProgress, true
	case StatusSwitchoverPostProcess:
		return Post, true
	case StatusSwitchoverCompleted:
		return Completed, true
	}
	return NotCreated, false
}

// Role says which side of a deployment a metadata row or a monitor is
// about. The zero value is RoleUnknown.
type Role int

// The roles.
const (
	RoleUnknown Role = iota // a role string this package does not know
	RoleSource              // blue: the deployment's current production side
	RoleTarget              // green: the side that takes over
)

// String returns "SOURCE", "TARGET" or "UNKNOWN".
func (r Role) String() string {
	switch r {
	case RoleSource:
		return "SOURCE"
	case RoleTarget:
		return "TARGET"
	}
	return "UNKNOWN"
}

// MarshalText encodes the role as its name, for JSON.
func (r Role) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// ParseRole maps a metadata role (BLUE_GREEN_DEPLOYMENT_SOURCE or
// BLUE_GREEN_DEPLOYMENT_TARGET, in any case, surrounding space ignored) to a
// Role; anything else is RoleUnknown.
func ParseRole(s string) Role {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case RoleNameSource:
		return RoleSource
	case RoleNameTarget:
		return RoleTarget
	}
	return RoleUnknown
}
