//go:build linux || darwin

package conn

import (
	"errors"
	"syscall"
)

// peekSocket peeks at rc's socket without blocking: true when it holds a
// byte (any: a PostgreSQL message, a TLS record), when the peer closed it
// (EOF) or reset it, or when it cannot be read any more (closed, a
// deadline in the past: a connection a layer cut); false when nothing is
// there (EAGAIN). One recv(2) with MSG_PEEK|MSG_DONTWAIT: the byte stays
// for pgx to read. It runs under Control, not Read: Read would wait for
// the descriptor's read lock, which a read under way holds (pgconn's
// background reader, started for a slow write, can stay blocked in Read on
// an idle pooled connection), and the peek must never wait.
func peekSocket(rc syscall.RawConn) bool {
	var b [1]byte
	spoke := false
	err := rc.Control(func(fd uintptr) {
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		spoke = !errors.Is(err, syscall.EAGAIN) && !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR)
	})
	return spoke || err != nil
}
