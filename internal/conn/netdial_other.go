//go:build !linux

package conn

import "syscall"

// setUserTimeout does nothing where TCP_USER_TIMEOUT does not exist;
// keepalive still applies.
func setUserTimeout(syscall.RawConn) error { return nil }
