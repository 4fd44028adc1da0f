package switchover

import (
	"time"

	"github.com/holdfast-db/holdfast/internal/bgroute/meta"
	"github.com/holdfast-db/holdfast/internal/enum"
)

// Timeline event names besides the phase names ("NOT_CREATED" …
// "COMPLETED").
const (
	EventBlueDNSUpdated       = "Blue DNS updated"                    // every blue host resolves to a new address
	EventGreenDNSRemoved      = "Green DNS removed"                   // no green host resolves any more
	EventGreenTopologyChanged = "Green topology changed"              // green's endpoints no longer carry the green names
	EventBlueConnsDropped     = "Blue connections dropped"            // IN_PROGRESS began: connections to blue are taken out of service
	EventReleasedOnBlueDNS    = "Traffic released on blue DNS update" // IN_PROGRESS, but blue names already point at green
	EventTimerExpired         = "Switchover timer expired"            // SwitchoverTimeout passed since PREPARATION
	EventRolledBack           = "ROLLED BACK"                         // green reported an earlier phase
	EventRoutingNormal        = "Routing normal"                      // the switchover ended: routing is back to plain host names
)

// Event is one entry of a timeline; its fields are those of
// bluegreen.Event.
type Event struct {
	Time time.Time
	Name string // a phase name or one of the Event* names
}

// Outcome says how a switchover ended. Its String is the value of
// bluegreen.Outcome.
type Outcome int

// The outcomes.
const (
	OutcomeCompleted Outcome = iota + 1
	OutcomeRolledBack
	OutcomeTimedOut
)

var outcomeNames = [...]string{
	OutcomeCompleted:  "COMPLETED",
	OutcomeRolledBack: "ROLLED BACK",
	OutcomeTimedOut:   "TIMED OUT",
}

// String returns "COMPLETED", "ROLLED BACK" or "TIMED OUT".
func (o Outcome) String() string { return enum.Name("Outcome", o, outcomeNames[:]) }

// Summary is the timeline of one finished switchover.
type Summary struct {
	ID      string
	Outcome Outcome
	Anchor  time.Time // IN_PROGRESS, or PREPARATION when there was no IN_PROGRESS
	Events  []Event
}

// anchorOf returns the time of IN_PROGRESS, else of PREPARATION, else of
// the first event.
func anchorOf(events []Event) time.Time {
	for _, name := range []string{meta.InProgress.String(), meta.Preparation.String()} {
		for _, e := range events {
			if e.Name == name {
				return e.Time
			}
		}
	}
	if len(events) > 0 {
		return events[0].Time
	}
	return time.Time{}
}
