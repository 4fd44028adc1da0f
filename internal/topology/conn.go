package topology

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// MonitorConfig returns the connection config of a monitor that reads a
// cluster outside the pool: a copy of cc without target_session_attrs
// (ValidateConnect: a monitor must read servers that are read-only),
// without the pool's tracer, with application_name app and connect
// timeout.
func MonitorConfig(cc *pgx.ConnConfig, app string, timeout time.Duration) *pgx.ConnConfig {
	mc := cc.Copy()
	mc.ValidateConnect = nil
	mc.Tracer = nil
	mc.ConnectTimeout = timeout
	if mc.RuntimeParams == nil {
		mc.RuntimeParams = map[string]string{}
	}
	mc.RuntimeParams["application_name"] = app
	return mc
}

// Retarget points cc at host (and port, unless 0), keeping TLS verifying
// the name actually connected to, when scope contains host; else it leaves
// cc alone and returns an *OutsideError: a monitor never connects, and
// never sends a password or token, to a host that a row named outside the
// cluster's domain.
func Retarget(cc *pgx.ConnConfig, host string, port uint16, scope Scope) error {
	if err := scope.Check(host); err != nil {
		return err
	}
	old := cc.Host
	cc.Host = host
	if port != 0 {
		cc.Port = port
	}
	cc.TLSConfig = verifying(cc.TLSConfig, host)
	for _, fb := range cc.Fallbacks {
		if fb.Host != old {
			continue
		}
		fb.Host = host
		if port != 0 {
			fb.Port = port
		}
		fb.TLSConfig = verifying(fb.TLSConfig, host)
	}
	return nil
}

// verifying returns tc verifying host instead of the name it verified (a
// copy), or tc itself when it verifies no name.
func verifying(tc *tls.Config, host string) *tls.Config {
	if tc == nil || tc.ServerName == "" {
		return tc
	}
	tc = tc.Clone()
	tc.ServerName = host
	return tc
}

// Close closes a monitor's connection within a second and waits, at most
// 20 s, for pgconn's cleanup of a query that the close interrupted, so
// that whoever closes it joins everything it started.
func Close(conn *pgx.Conn) {
	if conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = conn.Close(ctx)
	t := time.NewTimer(20 * time.Second)
	select {
	case <-conn.PgConn().CleanupDone():
	case <-t.C:
	}
	t.Stop()
}

// HostOf strips a port from an "ip:port" LookupFunc answer.
func HostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// RemoteAddr returns the server's "ip:port" as c's socket reports it, or "".
func RemoteAddr(c *pgx.Conn) string {
	if c == nil || c.PgConn() == nil || c.PgConn().Conn() == nil {
		return ""
	}
	return c.PgConn().Conn().RemoteAddr().String()
}

// RemoteIP returns the server's IP as c's socket reports it, or "".
func RemoteIP(c *pgx.Conn) string {
	if c == nil || c.PgConn() == nil || c.PgConn().Conn() == nil {
		return ""
	}
	if ta, ok := c.PgConn().Conn().RemoteAddr().(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	return c.PgConn().Conn().RemoteAddr().String()
}

// RemotePort returns the server's port as c's socket reports it, or 0.
func RemotePort(c *pgx.Conn) int {
	if c == nil || c.PgConn() == nil || c.PgConn().Conn() == nil {
		return 0
	}
	if ta, ok := c.PgConn().Conn().RemoteAddr().(*net.TCPAddr); ok {
		return ta.Port
	}
	return 0
}

// Guard lets a monitor abandon a connection at once. pgconn closes a
// connection whose query failed on a goroutine of its own that sends a
// cancel request and drains the socket for up to 15 s each: against a
// server that stopped answering (SIGSTOP, a black hole) that goroutine, and
// whoever waits for it, would hang that long. After Abandon, the guarded
// socket's I/O fails at once and no dial is made (a connect's next
// address), so the cleanup ends at once. (No cancel request is dialed on
// a monitor's connection in any case: the engine's monitorConnect makes
// every monitor's connection dial nothing once it is made.)
type Guard struct {
	dial      func(ctx context.Context, network, addr string) (net.Conn, error)
	abandoned atomic.Bool
	mu        sync.Mutex
	socks     []net.Conn
}

// Guarded installs a Guard into cc's DialFunc (cc is the monitor
// connection's own copy).
func Guarded(cc *pgx.ConnConfig) *Guard {
	g := &Guard{dial: cc.DialFunc}
	if g.dial == nil {
		g.dial = (&net.Dialer{KeepAlive: 5 * time.Second}).DialContext
	}
	cc.DialFunc = g.dialGuarded
	return g
}

func (g *Guard) dialGuarded(ctx context.Context, network, addr string) (net.Conn, error) {
	if g.abandoned.Load() {
		return nil, errAbandoned // a connect's next address, after Abandon
	}
	c, err := g.dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	g.socks = append(g.socks, c)
	g.mu.Unlock()
	if g.abandoned.Load() {
		_ = c.SetDeadline(time.Unix(1, 0))
	}
	return &guardedConn{Conn: c, g: g}, nil
}

var errAbandoned = errors.New("topology: monitor connection abandoned")

// Abandon makes every I/O of the guarded connection fail at once.
func (g *Guard) Abandon() {
	g.abandoned.Store(true)
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range g.socks {
		_ = c.SetDeadline(time.Unix(1, 0))
	}
}

// guardedConn keeps its deadline in the past once abandoned.
type guardedConn struct {
	net.Conn
	g *Guard
}

func (c *guardedConn) SetDeadline(t time.Time) error { return c.Conn.SetDeadline(c.clamp(t)) }
func (c *guardedConn) SetReadDeadline(t time.Time) error {
	return c.Conn.SetReadDeadline(c.clamp(t))
}
func (c *guardedConn) SetWriteDeadline(t time.Time) error {
	return c.Conn.SetWriteDeadline(c.clamp(t))
}

func (c *guardedConn) clamp(t time.Time) time.Time {
	if c.g.abandoned.Load() {
		return time.Unix(1, 0)
	}
	return t
}
