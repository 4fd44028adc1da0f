package conn

import (
	"net"
	"time"
)

// Dead-connection detection on every TCP socket a pool dials (pgx's
// default dialer, a *net.Dialer of the user's, a TLS connection over TCP
// such as the Cloud SQL connector's): pgx's default dialer probes idle
// connections every 5 minutes, so a connection whose peer vanished without
// a FIN or RST (a failover, a NAT or load-balancer idle timeout, a
// security-group change) stays "open" until the kernel gives up on it,
// about 15 minutes later. holdfast tunes the socket right after the dial.
const (
	// keepAliveIdle, keepAliveInterval and keepAliveCount: an idle
	// connection to a peer that stopped answering is reported dead after
	// 5 s + 3 × 1 s = 8 s.
	keepAliveIdle     = 5 * time.Second
	keepAliveInterval = time.Second
	keepAliveCount    = 3

	// userTimeout (TCP_USER_TIMEOUT, Linux): a connection whose sent data
	// stays unacknowledged this long fails with ETIMEDOUT instead of
	// retransmitting for about 15 minutes. A long query is not affected:
	// its request is acknowledged at once, and keepalive probes cover the
	// wait for its answer.
	userTimeout = 5 * time.Second

	// closeBound bounds what a connection that is being closed after a
	// failure (a canceled or timed-out query) spends on its cancel request
	// and on draining the socket, which pgx bounds at 15 s while the pool
	// keeps the connection's slot: a host that stopped answering would
	// starve the pool for 15 s.
	closeBound = time.Second
)

// tuneSocket sets keepalive and TCP_USER_TIMEOUT on conn's TCP socket,
// when there is one (a *net.TCPConn, or one inside a *tls.Conn); it leaves
// any other connection alone. Errors are ignored: the connection works
// without the tuning.
func tuneSocket(conn net.Conn) {
	if tc, ok := conn.(interface{ NetConn() net.Conn }); ok {
		conn = tc.NetConn()
	}
	tcp, ok := conn.(*net.TCPConn)
	if !ok {
		return
	}
	_ = tcp.SetKeepAliveConfig(net.KeepAliveConfig{
		Enable:   true,
		Idle:     keepAliveIdle,
		Interval: keepAliveInterval,
		Count:    keepAliveCount,
	})
	if rc, err := tcp.SyscallConn(); err == nil {
		_ = setUserTimeout(rc)
	}
}
