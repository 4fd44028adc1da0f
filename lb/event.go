package lb

import (
	"strconv"
	"strings"
	"time"
)

// EventKind says what happened to a group, in an [Event].
type EventKind string

// Event kinds.
const (
	EventDrainStarted  EventKind = "drain-started"  // a drain holds the lock and starts forcing members offline
	EventDrained       EventKind = "drained"        // every member has no connection left: the deploy may go ahead
	EventTimedOut      EventKind = "timed-out"      // the drain bound passed with connections left (Event.Busy): abort the deploy
	EventEnabled       EventKind = "enabled"        // the members take traffic again
	EventDisabled      EventKind = "disabled"       // the members take no new connections (persistent ones still served)
	EventForcedOffline EventKind = "forced-offline" // the members take no new connections at all (no wait)
	EventLockRefused   EventKind = "lock-refused"   // the group is locked by someone else (Event.Holder); nothing was done
	EventFailed        EventKind = "failed"         // a request failed (Event.Error): a balancer, database or state error, or canceled
	EventDeployFailed  EventKind = "deploy-failed"  // a deploy's command failed (Event.Error); the members are left as Event.Note says
)

func (k EventKind) known() bool {
	switch k {
	case EventDrainStarted, EventDrained, EventTimedOut, EventEnabled, EventDisabled, EventForcedOffline, EventLockRefused, EventFailed, EventDeployFailed:
		return true
	}
	return false
}

// BusyMember is a member that still had connections when a drain ended.
type BusyMember struct {
	Member string `json:"member"` // the Target string, "f5-prod web/web-1:80"
	Conns  int64  `json:"conns"`  // at the last poll; ConnsUnknown (-1) if none was read
}

// Event is something a [Notifier] is told about: a request on a group
// started, ended, or was refused. It holds names and counts only, never a
// secret.
type Event struct {
	Kind     EventKind     `json:"kind"`
	Time     time.Time     `json:"time"`
	Group    string        `json:"group"`
	Operator string        `json:"operator"`
	Host     string        `json:"host"`
	Action   Action        `json:"action"`
	AuditID  int64         `json:"audit_id,omitempty"` // the request's audit entry, 0 if none was written
	Members  []string      `json:"members"`            // the members concerned, as Target strings
	Busy     []BusyMember  `json:"busy,omitempty"`     // EventTimedOut: the members still holding connections
	Holder   *Holder       `json:"holder,omitempty"`   // EventLockRefused: who holds the lock
	Duration time.Duration `json:"-"`                  // how long the request took
	Error    string        `json:"error,omitempty"`    // EventFailed, EventDeployFailed: what failed
	Note     string        `json:"note,omitempty"`     // a sentence for people, such as "left forced offline"
}

// Title returns a one-line summary, such as
// "payments: drain by alice timed out, 2 members still in use".
func (e Event) Title() string {
	who := e.Operator
	if who == "" {
		who = "unknown operator"
	}
	n := len(e.Members)
	switch e.Kind {
	case EventDrainStarted:
		return e.Group + ": drain started by " + who + " (" + plural(n, "member") + ")"
	case EventDrained:
		return e.Group + ": drained by " + who + ", no connection left (" + plural(n, "member") + ", " + e.Duration.Round(time.Millisecond).String() + ")"
	case EventTimedOut:
		return e.Group + ": drain by " + who + " TIMED OUT, " + plural(len(e.Busy), "member") + " still in use: deploy aborted"
	case EventEnabled:
		return e.Group + ": enabled by " + who + " (" + plural(n, "member") + ")"
	case EventDisabled:
		return e.Group + ": disabled by " + who + " (" + plural(n, "member") + ")"
	case EventForcedOffline:
		return e.Group + ": forced offline by " + who + " (" + plural(n, "member") + ")"
	case EventLockRefused:
		h := "someone else"
		if e.Holder != nil {
			h = e.Holder.String()
		}
		return e.Group + ": " + string(e.Action) + " by " + who + " refused: locked by " + h
	case EventFailed:
		return e.Group + ": " + string(e.Action) + " by " + who + " FAILED"
	case EventDeployFailed:
		return e.Group + ": deploy by " + who + " FAILED"
	}
	return e.Group + ": " + string(e.Kind)
}

// Text returns the title and, on further lines, the busy members, the
// error and the note.
func (e Event) Text() string {
	var b strings.Builder
	b.WriteString(e.Title())
	for _, m := range e.Busy {
		b.WriteString("\n- ")
		b.WriteString(m.Member)
		b.WriteString(": ")
		if m.Conns < 0 {
			b.WriteString("connections not read")
		} else {
			b.WriteString(plural(int(m.Conns), "connection"))
		}
	}
	if e.Error != "" {
		b.WriteString("\n")
		b.WriteString(e.Error)
	}
	if e.Note != "" {
		b.WriteString("\n")
		b.WriteString(e.Note)
	}
	if e.AuditID != 0 {
		b.WriteString("\naudit #")
		b.WriteString(strconv.FormatInt(e.AuditID, 10))
	}
	return b.String()
}

func plural(n int, noun string) string {
	s := strconv.Itoa(n) + " " + noun
	if n != 1 {
		s += "s"
	}
	return s
}

// Notifier is told about control events ([Event]). Notify must not block
// and cannot fail the request: an implementation queues the event and
// delivers it on its own goroutine, retrying as it sees fit, and drops
// what it cannot deliver. Package
// [github.com/holdfast-db/holdfast/lb/notify] has webhooks for Microsoft
// Teams, Slack and generic JSON receivers.
type Notifier interface {
	Notify(Event)
}

// NotifierFunc adapts a function to [Notifier]; it must not block.
type NotifierFunc func(Event)

// Notify calls f(e).
func (f NotifierFunc) Notify(e Event) { f(e) }
