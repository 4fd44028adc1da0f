package bluegreen

import "github.com/holdfast-db/holdfast/internal/bgroute/meta"

// Phase is where a blue/green deployment is in its life, as the metadata
// reports it. Phases are ordered: a switchover moves from NotCreated to
// Completed, and only a rollback moves it back. The zero value is
// NotCreated.
type Phase int

// The phases, in order. The metadata's status column maps to them as
// follows, in any case:
//
//	| metadata status                 | Phase       | active |
//	|---------------------------------|-------------|--------|
//	| (empty or NULL)                 | NotCreated  | no     |
//	| AVAILABLE                       | Created     | no     |
//	| SWITCHOVER_INITIATED            | Preparation | yes    |
//	| SWITCHOVER_IN_PROGRESS          | InProgress  | yes    |
//	| SWITCHOVER_IN_POST_PROCESSING   | Post        | yes    |
//	| SWITCHOVER_COMPLETED            | Completed   | yes    |
//
// Another status is logged (Warn) and ignored.
const (
	NotCreated  Phase = iota // no deployment, or its metadata is not provisioned yet
	Created                  // the deployment exists; green is a replica of blue
	Preparation              // the switchover is about to start
	InProgress               // blue and green are being switched; nothing should run
	Post                     // green has taken over; DNS still lags
	Completed                // the switchover is over (DNS may still lag)
)

// String returns the phase's name, for example "IN_PROGRESS", or
// "Phase(N)" for a value out of range.
func (p Phase) String() string { return meta.Phase(p).String() }

// MarshalText encodes the phase as its name, for JSON.
func (p Phase) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// Active reports whether a switchover is under way or just finished
// (Preparation through Completed).
func (p Phase) Active() bool { return p >= Preparation && p <= Completed }
