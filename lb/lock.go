package lb

import (
	"context"
	"time"
)

// Holder is who holds a group's lock.
type Holder struct {
	Group string    // the group locked
	Owner string    // the operator
	Host  string    // the machine the holder runs on
	Since time.Time // when the lock was taken (database clock)
	PID   int32     // the database backend holding the lock
}

// String returns "owner@host since <RFC 3339 time>".
func (h Holder) String() string {
	s := h.Owner
	if h.Host != "" {
		s += "@" + h.Host
	}
	if !h.Since.IsZero() {
		s += " since " + h.Since.UTC().Format(time.RFC3339)
	}
	return s
}

// Locker hands out group locks, so that two teams cannot drive the same
// members at once. [*PGStore] is the implementation; its locks are
// PostgreSQL advisory locks, released with the session that holds them.
type Locker interface {
	// Lock takes the group's lock for owner, or returns a [*LockedError]
	// naming the current holder. It does not wait.
	Lock(ctx context.Context, group, owner string) (Lease, error)
	// Holder returns the group's current holder, or nil when the group is
	// free.
	Holder(ctx context.Context, group string) (*Holder, error)
}

// Lease is a held group lock. Its methods are safe for concurrent use.
type Lease interface {
	// Holder describes this lease.
	Holder() Holder
	// Check returns a [*LockLostError] when the lock is no longer held
	// (for example because its database session ended). Controllers call it
	// before every change.
	Check(ctx context.Context) error
	// Release gives the lock up. It is idempotent.
	Release(ctx context.Context) error
}
