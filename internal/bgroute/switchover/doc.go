// Package switchover is the blue/green phase machine and the routing it
// decides. A [State] merges the two monitors' observations of the metadata
// into one phase, a start snapshot of the hosts and their addresses, the
// DNS and topology events, and a timeline; [Decide] turns a State into an
// immutable [Snapshot] that the pool's hooks read with one atomic load.
// Nothing here does I/O or keeps time: the caller (bgroute.Router)
// serializes the calls, passes the time, and carries out the [Effects].
package switchover
