package bluegreen

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Event is one entry of a switchover timeline. Name is a phase name
// ("NOT_CREATED" … "COMPLETED"; "CREATED (rollback)" for the phase green
// went back to) or one of:
//
//	Blue DNS updated                     every blue host resolves to a new address
//	Green DNS removed                    no green host resolves any more
//	Green topology changed               green's endpoints no longer carry the green names
//	Blue connections dropped             IN_PROGRESS began: connections to blue are taken out of service
//	Traffic released on blue DNS update  IN_PROGRESS, but blue names already point at green
//	Switchover timer expired             SwitchoverTimeout passed since PREPARATION
//	ROLLED BACK                          green reported an earlier phase
//	Routing normal                       the switchover ended for the Router: its routing went back to
//	                                     plain host names (the last event of every summary)
//
// Phase events carry the time the metadata reported the phase: COMPLETED
// often comes before DNS has caught up, and routing stays as in POST until
// it has. "Routing normal" is when holdfast stopped intercepting.
type Event struct {
	Time time.Time `json:"time"`
	Name string    `json:"event"`
}

// Outcome says how a switchover ended. Its values are their own JSON and
// log form.
type Outcome string

const (
	// OutcomeCompleted: the metadata reported COMPLETED and DNS caught up
	// (or the timer expired after COMPLETED).
	OutcomeCompleted Outcome = "COMPLETED"
	// OutcomeRolledBack: green went back to an earlier phase before
	// COMPLETED.
	OutcomeRolledBack Outcome = "ROLLED BACK"
	// OutcomeTimedOut: SwitchoverTimeout passed before COMPLETED; the
	// metadata may be stuck.
	OutcomeTimedOut Outcome = "TIMED OUT"
)

// Summary is the timeline of one finished switchover. It is a value: the
// Router never changes a Summary it has handed out.
//
// When COMPLETED is seen and DNS has caught up, or on a rollback, or when
// the switchover timer expires, the Router logs the timeline (Info,
// through Config.Logger) in the AWS wrappers' table form ([Summary.String])
// with the message "bluegreen: switchover COMPLETED" (or ROLLED BACK,
// TIMED OUT) and the table in its summary attribute, keeps it
// ([Router.LastSummary], [Status].LastSummary), clears its routing and its
// inventory, and its monitors start over for the next deployment. Until
// both monitors have read a phase outside PREPARATION to POST, such phases
// are ignored ([Status].Stale), so that a stuck status or a server whose
// metadata lags does not start the same switchover again.
//
// The timeline's phase events carry the times the metadata reported them;
// its last event, "Routing normal", is when the Router went back to plain
// host names. The two differ: COMPLETED is often reported before DNS has
// caught up, and until it has, routing stays as in POST. Before a
// switchover, once the green side is mapped, the Router logs a one-time
// line with the blue → green mapping and addresses:
//
//	level=INFO msg="bluegreen: target topology recognized" bgd_id=1 mapping="orders.cluster-abcdefghijkl.us-east-1.rds.amazonaws.com (10.0.1.17) -> orders-green-abc123.cluster-abcdefghijkl.us-east-1.rds.amazonaws.com (10.0.2.41), ..."
type Summary struct {
	ID      string    `json:"id"`
	Outcome Outcome   `json:"outcome"`
	Anchor  time.Time `json:"anchor"` // IN_PROGRESS, or PREPARATION when there was no IN_PROGRESS
	Events  []Event   `json:"events"`
}

// Offset returns e's time relative to the anchor.
func (s Summary) Offset(e Event) time.Duration { return e.Time.Sub(s.Anchor) }

// Minimum column widths of the summary table: the AWS wrappers' layout.
// A column grows to fit its longest cell.
const (
	summaryTimeWidth   = 28
	summaryOffsetWidth = 21
	summaryEventWidth  = 31
)

// String formats the summary as the AWS wrappers' switchover summary: a
// title line, then one row per event with its UTC time, its offset in
// milliseconds from IN_PROGRESS (or PREPARATION) and its name:
//
//	[bgdId: '1'] Blue/Green Deployment switchover COMPLETED
//	timestamp                         time offset (ms)                           event
//	----------------------------------------------------------------------------------
//	    2026-02-15T14:30:28.190Z             -21572 ms                     PREPARATION
//	    2026-02-15T14:30:49.762Z                  0 ms                     IN_PROGRESS
//	    2026-02-15T14:30:49.762Z                  0 ms        Blue connections dropped
//	    2026-02-15T14:30:51.929Z               2167 ms                            POST
//	...
//	    2026-02-15T14:31:20.341Z              30579 ms                       COMPLETED
//	    2026-02-15T14:31:24.007Z              34245 ms                  Routing normal
//	----------------------------------------------------------------------------------
//
// Columns are right-aligned, at least as wide as the wrappers' (28, 21 and
// 31 characters) and wider when a cell needs it, so that no row overflows.
// Times are UTC (the Go wrapper prints local time with a literal "Z").
func (s Summary) String() string {
	offsets := make([]string, len(s.Events))
	wOff, wEvent := summaryOffsetWidth, summaryEventWidth
	for i, e := range s.Events {
		offsets[i] = strconv.FormatInt(s.Offset(e).Milliseconds(), 10) + " ms"
		wOff = max(wOff, utf8.RuneCountInString(offsets[i]))
		wEvent = max(wEvent, utf8.RuneCountInString(e.Name))
	}
	divider := strings.Repeat("-", summaryTimeWidth+1+wOff+1+wEvent)
	var b strings.Builder
	fmt.Fprintf(&b, "[bgdId: '%s'] Blue/Green Deployment switchover %s\n", s.ID, s.Outcome)
	fmt.Fprintf(&b, "%-*s %*s %*s\n", summaryTimeWidth, "timestamp", wOff, "time offset (ms)", wEvent, "event")
	b.WriteString(divider + "\n")
	for i, e := range s.Events {
		fmt.Fprintf(&b, "%*s %*s %*s\n", summaryTimeWidth, e.Time.UTC().Format("2006-01-02T15:04:05.000Z"), wOff, offsets[i], wEvent, e.Name)
	}
	b.WriteString(divider)
	return b.String()
}
