package gcpfake

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"
)

// HandshakeTimeout bounds a TLS handshake, and the dial of the backend, on
// the fake instance.
const HandshakeTimeout = 10 * time.Second

// InstanceConfig configures [StartInstance].
type InstanceConfig struct {
	// TLS is the listener's TLS configuration: the server certificate, and
	// the client CA it requires and verifies.
	TLS *tls.Config
	// Backend is the "host:port" of the PostgreSQL server to forward to.
	Backend string
	// IP and Port are the address the connector dials (the instance's IP
	// as the Admin API reports it, the server-side proxy's port), which
	// [Instance.Dial] redirects to the listener.
	IP, Port string
	// AfterHandshake, when set, runs on each connection once its TLS
	// handshake is complete, before forwarding: the metadata exchange of
	// the AlloyDB connector. The connection is forwarded when it returns
	// true, and closed otherwise.
	AfterHandshake func(*tls.Conn) bool
	// ErrClosed and ErrNotInstance are the errors of Dial after Close and
	// for another address: the fake package's own.
	ErrClosed, ErrNotInstance error
}

// InstanceStats counts what the instance saw.
type InstanceStats struct {
	Dials, Refused, Resets, Handshakes, Forwarded int
}

// instanceFault is the fault state of the instance.
type instanceFault struct {
	refuseN     Budget
	resetHSN    Budget
	resetAfterN Budget
	slowN       Budget
	slowDelay   time.Duration
}

// Instance is a fake instance's server-side proxy: a TLS 1.3 listener on
// 127.0.0.1 that requires and verifies the connector's client certificate
// and forwards to a PostgreSQL server, with faults to inject. It is safe
// for concurrent use.
type Instance struct {
	cfg     InstanceConfig
	life    *Life
	ln      net.Listener
	refused *boundPort

	mu      sync.Mutex
	fault   instanceFault
	stats   InstanceStats
	backend string                // where new connections are forwarded: cfg.Backend until SetBackend
	down    bool                  // SetDown: every dial is refused
	links   map[net.Conn]net.Conn // forwarded connections, client side to backend side, for Cut
}

// StartInstance opens the listener (and a loopback port that refuses
// connections, for [Instance.Refuse]) and starts accepting, in a goroutine
// that l waits for. Close it with [Instance.Close] after l.Shut.
func StartInstance(l *Life, cfg InstanceConfig) (*Instance, error) {
	in := &Instance{cfg: cfg, life: l, backend: cfg.Backend, links: map[net.Conn]net.Conn{}}
	var err error
	if in.ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return nil, err
	}
	if in.refused, err = bindPort(); err != nil {
		_ = in.ln.Close()
		return nil, fmt.Errorf("reserving a refused port: %w", err)
	}
	l.Go(in.acceptLoop)
	return in, nil
}

// Addr returns the "host:port" of the listener.
func (in *Instance) Addr() string { return in.ln.Addr().String() }

// Close closes the listener, which ends the accept loop, and releases the
// refused port. Open connections are the Life's to close.
func (in *Instance) Close() {
	_ = in.ln.Close()
	_ = in.refused.Close()
}

// Dial is the dial function to give the connector: the connector dials
// IP:Port; Dial connects to the listener instead, or to the refused port
// when [Instance.Refuse] says so. It fails with an error wrapping
// ErrNotInstance for any other address, and with ErrClosed after the Life
// is shut.
func (in *Instance) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host != in.cfg.IP || port != in.cfg.Port || !strings.HasPrefix(network, "tcp") {
		return nil, fmt.Errorf("%w: %s %s", in.cfg.ErrNotInstance, network, addr)
	}
	if in.life.Closed() {
		return nil, in.cfg.ErrClosed
	}
	in.mu.Lock()
	in.stats.Dials++
	refuse := in.down || in.fault.refuseN.Take()
	if refuse {
		in.stats.Refused++
	}
	in.mu.Unlock()
	target := in.ln.Addr().String()
	if refuse {
		target = in.refused.addr
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", target)
}

// Refuse makes the next n dials through Dial fail like a TCP connect to a
// closed port (n < 0: every dial until Clear): ECONNREFUSED, for real.
func (in *Instance) Refuse(n int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.fault.refuseN = Budget(n)
}

// ResetHandshake makes the instance reset the next n connections in the
// middle of the TLS handshake (n < 0: all until Clear).
func (in *Instance) ResetHandshake(n int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.fault.resetHSN = Budget(n)
}

// ResetAfterHandshake makes the instance complete the TLS handshake of the
// next n connections and then reset them (n < 0: all until Clear).
func (in *Instance) ResetAfterHandshake(n int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.fault.resetAfterN = Budget(n)
}

// SlowHandshake makes the instance wait d before the TLS handshake of the
// next n connections (n < 0: all until Clear).
func (in *Instance) SlowHandshake(d time.Duration, n int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.fault.slowN, in.fault.slowDelay = Budget(n), d
}

// SetBackend makes the instance forward the connections it accepts from
// now on to addr; connections already forwarded stay where they are.
func (in *Instance) SetBackend(addr string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.backend = addr
}

// SetDown makes every dial through Dial refused (down) or not (!down), as
// Refuse(-1) does, independently of Refuse and Clear.
func (in *Instance) SetDown(down bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.down = down
}

// Cut ends every connection the instance is forwarding: the client's side
// with a TCP reset, the backend's with a close (PostgreSQL rolls back what
// was in flight). It returns how many it ended.
func (in *Instance) Cut() int {
	in.mu.Lock()
	links := in.links
	in.links = map[net.Conn]net.Conn{}
	in.stats.Resets += len(links)
	in.mu.Unlock()
	for c, b := range links {
		if tcp, ok := c.(*net.TCPConn); ok {
			_ = tcp.SetLinger(0)
		}
		_ = c.Close()
		_ = b.Close()
	}
	return len(links)
}

// Clear removes every fault of the instance.
func (in *Instance) Clear() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.fault = instanceFault{}
}

// Stats returns a snapshot of the instance's counters.
func (in *Instance) Stats() InstanceStats {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.stats
}

func (in *Instance) acceptLoop() {
	for {
		c, err := in.ln.Accept()
		if err != nil {
			return // the listener was closed by Close
		}
		if !in.life.Track(c) {
			return
		}
		go func() {
			defer in.life.Untrack(c)
			defer c.Close()
			in.serveConn(c)
		}()
	}
}

// serveConn plays the instance's part for one connection: the injected
// faults, the TLS handshake with client certificate verification, the
// AfterHandshake hook, then forwarding to PostgreSQL.
func (in *Instance) serveConn(c net.Conn) {
	in.mu.Lock()
	var delay time.Duration
	if in.fault.slowN.Take() {
		delay = in.fault.slowDelay
	}
	resetHS := in.fault.resetHSN.Take()
	in.mu.Unlock()

	if !in.life.Pause(context.Background(), delay) {
		return
	}
	if resetHS {
		// Read the client's first handshake record (the ClientHello), then
		// reset the connection: the dialer is waiting for the ServerHello.
		_ = c.SetReadDeadline(time.Now().Add(HandshakeTimeout))
		var hdr [5]byte
		if _, err := io.ReadFull(c, hdr[:]); err == nil {
			n := int(hdr[3])<<8 | int(hdr[4])
			_, _ = io.CopyN(io.Discard, c, int64(n))
		}
		in.reset(c)
		return
	}

	tc := tls.Server(c, in.cfg.TLS)
	ctx, cancel := context.WithTimeout(context.Background(), HandshakeTimeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		return
	}
	in.mu.Lock()
	in.stats.Handshakes++
	resetAfter := in.fault.resetAfterN.Take()
	in.mu.Unlock()
	if resetAfter {
		in.reset(c)
		return
	}
	if in.cfg.AfterHandshake != nil && !in.cfg.AfterHandshake(tc) {
		return
	}
	in.mu.Lock()
	down := in.down
	in.mu.Unlock()
	if down { // cut while in its handshake
		in.reset(c)
		return
	}

	in.mu.Lock()
	target := in.backend
	in.mu.Unlock()
	var d net.Dialer
	ctx, cancel = context.WithTimeout(context.Background(), HandshakeTimeout)
	backend, err := d.DialContext(ctx, "tcp", target)
	cancel()
	if err != nil {
		return // the client sees the connection close
	}
	if !in.life.Track(backend) {
		return
	}
	defer in.life.Untrack(backend)
	defer backend.Close()
	in.mu.Lock()
	in.stats.Forwarded++
	in.links[c] = backend
	in.mu.Unlock()
	defer func() {
		in.mu.Lock()
		delete(in.links, c)
		in.mu.Unlock()
	}()
	pipe(tc, backend)
}

// reset closes c with SO_LINGER 0, so that the peer gets a TCP reset.
func (in *Instance) reset(c net.Conn) {
	in.mu.Lock()
	in.stats.Resets++
	in.mu.Unlock()
	if tcp, ok := c.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	_ = c.Close()
}

// pipe copies both ways until either side ends, then closes both.
func pipe(a, b net.Conn) {
	var once sync.Once
	closeBoth := func() {
		once.Do(func() {
			_ = a.Close()
			_ = b.Close()
		})
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(a, b)
		closeBoth()
	}()
	_, _ = io.Copy(b, a)
	closeBoth()
	wg.Wait()
}
