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
//
// Groups may overlap (an "all-web" group holding the members of
// "payments" and "search"), so a group's lock is not enough: the lock
// also covers each of the group's members, on its device, and a request
// for a group is refused while another group holding one of its members
// is locked. A [Controller] passes the group's members; so does
// [Controller.Acquire], the way to take a lock for several requests.
type Locker interface {
	// Lock takes, all or nothing, the group's lock and a lock on each of
	// members for owner, or returns a [*LockedError] naming the holder
	// (and the member, when another group holds one). It does not wait;
	// a refused Lock holds nothing.
	//
	// A member's lock excludes every other lock of the same member on the
	// same device. A pool member (F5) or server port (A10) also takes its
	// node (the F5 node, the A10 server) shared, and a whole node takes
	// it exclusively: a node and the pool members on it exclude each
	// other, two pool members on one node do not. With no members, only
	// the group is locked.
	Lock(ctx context.Context, group, owner string, members ...LockMember) (Lease, error)
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

// LockMember is a member a group lock covers: a [Member] on a device.
type LockMember struct {
	// Device names the device and partition, the same whatever a
	// configuration calls the balancer: its [DeviceIdentifier] ID, or
	// "balancer NAME" for a Balancer without one.
	Device string
	// Member is the member. The F5 adapter ignores Protocol, so a
	// Controller clears it for F5 members.
	Member Member
	// Name is how the caller names the member, such as
	// "f5-prod payments_443/pay-1:443": refusals and the lock's rows
	// show it.
	Name string
}

// DeviceIdentifier is implemented by a [Balancer] that can name the
// device (and partition) it drives independently of the name the
// configuration gives it, such as "f5 bigip.example.net:443 Common".
// Member locks are keyed by it, so that two balancer entries, or two
// teams' configurations sharing the database, that name one device lock
// the same members. The f5 and a10 adapters implement it; a Balancer
// that does not is known by its name in the [ControllerConfig].
type DeviceIdentifier interface {
	DeviceID() string
}
