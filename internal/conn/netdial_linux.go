package conn

import "syscall"

// tcpUserTimeout is TCP_USER_TIMEOUT from linux/tcp.h (not in package
// syscall).
const tcpUserTimeout = 0x12

// setUserTimeout sets TCP_USER_TIMEOUT on a TCP socket.
func setUserTimeout(c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpUserTimeout, int(userTimeout.Milliseconds()))
	})
	if err != nil {
		return err
	}
	return serr
}
