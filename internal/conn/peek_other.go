//go:build !linux && !darwin

package conn

import "syscall"

// peekSocket cannot peek here: pgxpool's own ShouldPing (idle over a
// second) still applies.
func peekSocket(syscall.RawConn) bool { return false }
