package conn

import (
	"net"
	"syscall"
)

// This file is the peek of an idle connection's socket
// (compose.Conn.Unread): whether the server sent it anything, or closed
// it, while it sat in the pool. The eviction layer asks it of a
// connection idle over evict.PeekAfter before pgxpool hands it out.

// rawSocket is the kernel socket under a connection's dial: the raw
// connection of a *net.TCPConn or *net.UnixConn, reached through a TLS
// connection an integration's dial returned (NetConn); nil when there is
// none.
func rawSocket(conn net.Conn) syscall.RawConn {
	for range 4 {
		if sc, ok := conn.(syscall.Conn); ok {
			rc, err := sc.SyscallConn()
			if err != nil {
				return nil
			}
			return rc
		}
		nc, ok := conn.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		conn = nc.NetConn()
	}
	return nil
}

// peekedSocket is the socket a connection's peeks read, found once.
type peekedSocket struct {
	rc syscall.RawConn // nil: none to peek
}

// Unread reports whether the server sent the connection bytes it has not
// read, or closed it (see compose.Conn.Unread): false when it cannot
// tell. Only the connection's holder calls it, off the hot path.
func (c *connState) Unread() bool {
	ps := c.peeked.Load()
	if ps == nil {
		wc := c.sock.Load()
		if wc == nil {
			return false
		}
		ps = &peekedSocket{rc: rawSocket(wc.Conn)}
		c.peeked.Store(ps)
	}
	if ps.rc == nil {
		return false
	}
	return peekSocket(ps.rc)
}
