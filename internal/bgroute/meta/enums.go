package meta

import (
	"strings"

	"github.com/holdfast-db/holdfast/internal/enum"
)

// Phase is where a deployment is, as its metadata status says. The values
// and their order are those of bluegreen.Phase, which converts to and from
// it.
type Phase int

// The phases, in order.
const (
	NotCreated Phase = iota
	Created
	Preparation
	InProgress
	Post
	Completed
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
func (p Phase) String() string { return enum.Name("Phase", p, phaseNames[:]) }

// Metadata statuses, as RDS writes them in the status column.
const (
	StatusAvailable             = "AVAILABLE"
	StatusSwitchoverInitiated   = "SWITCHOVER_INITIATED"
	StatusSwitchoverInProgress  = "SWITCHOVER_IN_PROGRESS"
	StatusSwitchoverPostProcess = "SWITCHOVER_IN_POST_PROCESSING"
	StatusSwitchoverCompleted   = "SWITCHOVER_COMPLETED"
)

// ParseStatus maps a metadata status to a phase, ignoring case and
// surrounding space:
//
//	| metadata status                 | Phase       |
//	|---------------------------------|-------------|
//	| (empty or NULL)                 | NotCreated  |
//	| AVAILABLE                       | Created     |
//	| SWITCHOVER_INITIATED            | Preparation |
//	| SWITCHOVER_IN_PROGRESS          | InProgress  |
//	| SWITCHOVER_IN_POST_PROCESSING   | Post        |
//	| SWITCHOVER_COMPLETED            | Completed   |
//
// ok is false for a status this package does not know; the phase is then
// NotCreated and must not be used.
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

// Role says which side of a deployment a row or a monitor is about. Its
// String is bluegreen.MonitorStatus.Role.
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

// Other returns the other side: RoleTarget for RoleSource, else RoleSource.
func (r Role) Other() Role {
	if r == RoleSource {
		return RoleTarget
	}
	return RoleSource
}

// Metadata roles, as RDS writes them in the role column.
const (
	RoleNameSource = "BLUE_GREEN_DEPLOYMENT_SOURCE"
	RoleNameTarget = "BLUE_GREEN_DEPLOYMENT_TARGET"
)

// ParseRole maps a metadata role (in any case, surrounding space ignored)
// to a Role; anything else is RoleUnknown.
func ParseRole(s string) Role {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case RoleNameSource:
		return RoleSource
	case RoleNameTarget:
		return RoleTarget
	}
	return RoleUnknown
}

// Engine selects the metadata function. Its String is the value of
// bluegreen.Engine.
type Engine int

// The engines. EngineAuto means none was found yet, or, as a wish, either.
const (
	EngineAuto Engine = iota
	EngineAurora
	EngineRDS
)

var engineNames = [...]string{EngineAuto: "auto", EngineAurora: "aurora", EngineRDS: "rds"}

// String returns "auto", "aurora" or "rds".
func (e Engine) String() string { return enum.Name("Engine", e, engineNames[:]) }

// KnownVersion is the only metadata version this package knows. Rows of
// another version are read as if they were this one, with a warning.
const KnownVersion = "1.0"

// VersionKnown reports whether v is KnownVersion.
func VersionKnown(v string) bool { return strings.TrimSpace(v) == KnownVersion }
