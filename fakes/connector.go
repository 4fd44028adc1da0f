package fakes

import (
	"context"
	"net"
	"net/netip"
	"os"
	"syscall"
)

// Connector is a scripted dialer: each call of [Connector.Dial] plays the
// next [Step] of its script, and once the script is used up every dial
// connects to the real target. Its Dial method has the signature of
// pgconn.DialFunc (pgx) and of cloudsqlconn's dial funcs.
//
// A Connector is safe for concurrent use: each dial takes exactly one play
// of the script, and the counters are exact. Create one with
// [NewConnector] and do not copy it. The zero Connector has an empty script
// and no target: its dials fail with [ErrNoTarget].
type Connector struct {
	target string
	dialer net.Dialer
	s      script
}

// NewConnector returns a Connector whose dials play steps in order, then
// connect for real. target is the "host:port" the Connect steps dial over TCP;
// the address the caller passes to Dial is ignored, as the Cloud SQL
// connector ignores it.
func NewConnector(target string, steps ...Step) *Connector {
	c := &Connector{target: target}
	c.s.add(steps)
	return c
}

// Dial plays the next step of the script. It ignores network and addr and
// dials the Connector's target when the step connects. It is safe for
// concurrent use.
//
// Use it as pgx's dial function, cfg.DialFunc = c.Dial. pgx also dials
// through it to send a cancel request when a query's context ends, and such
// dials take a play of the script too.
func (c *Connector) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := c.play(ctx, c.s.next())
	c.s.done(err)
	if err != nil {
		return nil, err
	}
	return conn, nil
}

func (c *Connector) play(ctx context.Context, st Step) (net.Conn, error) {
	switch st.kind {
	case kindCustom:
		return nil, st.fail(st.custom.atDial, "a dial")
	case kindRefused:
		return nil, &net.OpError{
			Op:   "dial",
			Net:  "tcp",
			Addr: targetAddr(c.target),
			Err:  os.NewSyscallError("connect", syscall.ECONNREFUSED),
		}
	case kindFail:
		if st.err == nil {
			return nil, badStep(st, "has no error")
		}
		return nil, st.err
	case kindHang:
		<-ctx.Done()
		return nil, ctx.Err()
	case kindReset:
		conn, err := c.connect(ctx)
		if err != nil {
			return nil, err
		}
		return &resetConn{Conn: conn, after: int64(st.n)}, nil
	default:
		return c.connect(ctx)
	}
}

func (c *Connector) connect(ctx context.Context) (net.Conn, error) {
	if c.target == "" {
		return nil, ErrNoTarget
	}
	return c.dialer.DialContext(ctx, "tcp", c.target)
}

// Then appends steps to the script; they play after the steps already in it
// (never, if it ends with a Forever step). Safe for concurrent use with
// dials in flight.
func (c *Connector) Then(steps ...Step) { c.s.add(steps) }

// Set replaces what remains of the script with steps. Set() with no steps
// makes every later dial connect. Safe for concurrent use.
func (c *Connector) Set(steps ...Step) { c.s.set(steps) }

// Attempts returns the number of dials started so far, finished or not.
func (c *Connector) Attempts() int { return int(c.s.attempts.Load()) }

// Successes returns the number of dials that returned a connection,
// including the connections of Reset and ResetAfter steps.
func (c *Connector) Successes() int { return int(c.s.successes.Load()) }

// Failures returns the number of dials that returned an error. Attempts minus
// Successes minus Failures is the number of dials still in flight.
func (c *Connector) Failures() int { return int(c.s.failures.Load()) }

// targetAddr is the remote address of a dial error for target, as net.Dialer
// reports it: a *net.TCPAddr for "ip:port", else the text itself.
func targetAddr(target string) net.Addr {
	if ap, err := netip.ParseAddrPort(target); err == nil {
		return net.TCPAddrFromAddrPort(ap)
	}
	return textAddr(target)
}

// textAddr is a TCP address that is not "ip:port".
type textAddr string

func (a textAddr) Network() string { return "tcp" }
func (a textAddr) String() string  { return string(a) }
