package fakes

import (
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
)

// resetConn is a real connection that is reset once after bytes have been
// read from it (see ResetAfter). Safe for concurrent use, like any net.Conn.
type resetConn struct {
	net.Conn
	after int64

	readMu sync.Mutex // serializes Reads so the byte count is exact
	read   int64      // bytes delivered so far; guarded by readMu

	reset     atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

func (c *resetConn) Read(p []byte) (int, error) {
	c.readMu.Lock()
	defer c.readMu.Unlock()
	if c.reset.Load() {
		return 0, c.opError("read", syscall.ECONNRESET)
	}
	left := c.after - c.read
	if left <= 0 {
		c.trip()
		return 0, c.opError("read", syscall.ECONNRESET)
	}
	if int64(len(p)) > left {
		p = p[:left]
	}
	n, err := c.Conn.Read(p)
	c.read += int64(n)
	return n, err
}

func (c *resetConn) Write(p []byte) (int, error) {
	if c.reset.Load() {
		return 0, c.opError("write", syscall.EPIPE)
	}
	return c.Conn.Write(p)
}

// Close closes the real connection once; after a reset it has already been
// closed and Close returns nil.
func (c *resetConn) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.Conn.Close() })
	return c.closeErr
}

// trip resets the connection: the real socket is closed with SO_LINGER 0 so
// that the peer gets a TCP RST.
func (c *resetConn) trip() {
	c.reset.Store(true)
	c.closeOnce.Do(func() {
		if tc, ok := c.Conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = c.Conn.Close()
	})
}

// opError has the shape of the error a *net.TCPConn returns for errno.
func (c *resetConn) opError(op string, errno syscall.Errno) error {
	return &net.OpError{
		Op:     op,
		Net:    "tcp",
		Source: c.LocalAddr(),
		Addr:   c.RemoteAddr(),
		Err:    os.NewSyscallError(op, errno),
	}
}
