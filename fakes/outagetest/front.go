package outagetest

import (
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
	"time"
)

// front is a TCP forwarder on a fixed address, where clients reach a
// server: an instance's address (Multi-AZ, Serverless) or a VIP. It
// accepts each connection, asks where to relay it (the current target,
// or admit's answer) and relays bytes both ways. It can go silent: it
// stops accepting and shrinks its listen backlog to a queue that one
// connection of its own fills, so that the kernel drops every new SYN,
// as for an address whose packets are dropped, and its connections are
// frozen: no byte passes either way and nothing is closed, whatever the
// server does meanwhile. It runs an accept loop and two goroutines per
// connection (one more while admit decides); close stops and joins them.
type front struct {
	ln    *net.TCPListener
	addr  string // "ip:port", fixed for the front's life
	hooks frontHooks
	// ctx ends with close: it bounds the front's dials and admit's waits.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	target string
	silent net.Conn      // while silent: the connection that fills the queue
	resume chan struct{} // while silent: closed when the front answers again
	parked chan struct{} // closed by serve once it stopped accepting
	links  map[*link]struct{}
	conns  map[*net.TCPConn]struct{} // every client connection, from its accept to its end
	closed bool

	wg sync.WaitGroup
}

// frontHooks are what a front asks of its owner; any may be nil.
type frontHooks struct {
	// admit decides for each accepted connection, instead of the current
	// target: the address to relay it to, or "" when admit answered or
	// dropped it itself (the front then closes it). It may block, until
	// done is closed at the latest.
	admit func(c net.Conn, done <-chan struct{}) string
	// opened and ended are called when a client connection is accepted
	// and when the front is done with it.
	opened, ended func()
}

// link is one client connection relayed to a server.
type link struct {
	client, server *net.TCPConn
	target         string
	frozen         bool // guarded by front.mu: no more bytes either way
	once           sync.Once
	gone           chan struct{} // closed when both ends are closed
}

// end closes both ends, with a reset for the client when rst (the
// address is owned by another host now, which answers a stray segment
// with RST), else with a FIN.
func (l *link) end(rst bool) {
	l.once.Do(func() {
		if rst {
			_ = l.client.SetLinger(0)
		}
		l.client.Close()
		l.server.Close()
		close(l.gone)
	})
}

// listenBacklog is the backlog a front listens with when it answers (the
// kernel caps it at net.core.somaxconn).
const listenBacklog = 4096

// dialTimeout bounds the front's dial of its target.
const dialTimeout = 5 * time.Second

// newFront listens on host (a free port) and relays to target.
func newFront(host, target string, hooks frontHooks) (*front, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, err
	}
	f := &front{ln: ln.(*net.TCPListener), addr: ln.Addr().String(), hooks: hooks, target: target,
		links: map[*link]struct{}{}, conns: map[*net.TCPConn]struct{}{}}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	f.wg.Go(f.serve)
	return f, nil
}

// setTarget makes new connections go to target.
func (f *front) setTarget(target string) {
	f.mu.Lock()
	f.target = target
	f.mu.Unlock()
}

func (f *front) serve() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				return // closed
			}
			// Silent: the deadline stopped the loop; wait to answer again.
			f.mu.Lock()
			resume, parked := f.resume, f.parked
			f.parked = nil
			f.mu.Unlock()
			if parked != nil {
				close(parked)
			}
			if resume == nil { // answering again already
				continue
			}
			select {
			case <-resume:
				continue
			case <-f.ctx.Done():
				return
			}
		}
		tc := c.(*net.TCPConn)
		f.mu.Lock()
		closed := f.closed
		if !closed {
			f.conns[tc] = struct{}{}
		}
		f.mu.Unlock()
		if closed {
			tc.Close()
			return
		}
		f.wg.Go(func() { f.handle(tc) })
	}
}

// handle serves one client connection, from its accept to its end.
func (f *front) handle(c *net.TCPConn) {
	defer func() {
		c.Close()
		f.mu.Lock()
		delete(f.conns, c)
		f.mu.Unlock()
	}()
	if f.hooks.opened != nil {
		f.hooks.opened()
	}
	if f.hooks.ended != nil {
		defer f.hooks.ended()
	}
	f.mu.Lock()
	target := f.target
	f.mu.Unlock()
	if f.hooks.admit != nil {
		target = f.hooks.admit(c, f.ctx.Done())
	}
	if target == "" {
		c.Close()
		return
	}
	ctx, cancel := context.WithTimeout(f.ctx, dialTimeout)
	s, err := (&net.Dialer{}).DialContext(ctx, "tcp", target)
	cancel()
	if err != nil {
		// The server refuses: so does the address, to this client; but a
		// silent address answers nothing until it answers again.
		f.mu.Lock()
		resume := f.resume
		f.mu.Unlock()
		if resume != nil {
			select {
			case <-resume:
			case <-f.ctx.Done():
			}
		}
		_ = c.SetLinger(0)
		c.Close()
		return
	}
	l := &link{client: c, server: s.(*net.TCPConn), target: target, gone: make(chan struct{})}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		l.end(false)
		return
	}
	l.frozen = f.silent != nil
	f.links[l] = struct{}{}
	f.mu.Unlock()
	var pipes sync.WaitGroup
	pipes.Go(func() { f.pipe(l, l.server, l.client) })
	pipes.Go(func() { f.pipe(l, l.client, l.server) })
	pipes.Wait()
	f.mu.Lock()
	delete(f.links, l)
	f.mu.Unlock()
}

// pipe copies src to dst until either ends, then ends the link; a frozen
// link passes nothing more and waits for its end (close, or a reset).
func (f *front) pipe(l *link, dst, src *net.TCPConn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		f.mu.Lock()
		frozen := l.frozen
		f.mu.Unlock()
		if frozen {
			// Silent: what either side sends is lost, and the server's
			// end (it was stopped) is not passed on. A client that
			// closes its end ends the link; else it lasts until a reset
			// or close.
			if src == l.client && err != nil {
				l.end(false)
			}
			<-l.gone
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	l.end(false)
}

// silence makes the front's address stop answering: new connections
// hang in the SYN (their packets are dropped), the connections it
// relays are frozen. It returns once a new connection's SYN is dropped.
func (f *front) silence() error {
	f.mu.Lock()
	if f.silent != nil || f.closed {
		f.mu.Unlock()
		return nil
	}
	f.silent = nopConn{} // until the filler's in: links made meanwhile are frozen
	f.resume, f.parked = make(chan struct{}), make(chan struct{})
	parked := f.parked
	for l := range f.links {
		l.frozen = true
	}
	f.mu.Unlock()
	// Stop accepting: the accept loop waits for resume. Then a connection
	// of the front's own fills the accept queue, and the backlog shrinks
	// to none: the kernel drops the SYN of every connection after it
	// while it is not accepted (Linux: listen(2) on a listening socket
	// sets its backlog; a full accept queue drops SYNs). Connections
	// that came between wait in the queue too, answered nothing.
	if err := f.ln.SetDeadline(time.Unix(1, 0)); err != nil {
		return err
	}
	select {
	case <-parked:
	case <-f.ctx.Done():
		return nil
	}
	filler, err := (&net.Dialer{Timeout: 10 * time.Second}).DialContext(f.ctx, "tcp", f.addr)
	if err != nil {
		return err
	}
	if err := f.listen(0); err != nil {
		filler.Close()
		return err
	}
	f.mu.Lock()
	f.silent = filler
	f.mu.Unlock()
	return nil
}

// answer ends a silence: the frozen connections are reset (the address
// answers again, and has no such connection), the front accepts again
// and relays new connections to target.
func (f *front) answer(target string) error {
	f.mu.Lock()
	if f.silent == nil || f.closed {
		f.target = target
		f.mu.Unlock()
		return nil
	}
	f.silent.Close()
	f.silent = nil
	f.target = target
	var frozen []*link
	for l := range f.links {
		if l.frozen {
			frozen = append(frozen, l)
		}
	}
	err := errors.Join(f.listen(listenBacklog), f.ln.SetDeadline(time.Time{}))
	close(f.resume)
	f.resume = nil
	f.mu.Unlock()
	for _, l := range frozen {
		l.end(true)
	}
	return err
}

// reset resets every connection relayed to target, as clients of an
// address that moved to another host see their next segment answered
// with RST.
func (f *front) reset(target string) {
	f.mu.Lock()
	var old []*link
	for l := range f.links {
		if l.target == target {
			old = append(old, l)
		}
	}
	f.mu.Unlock()
	for _, l := range old {
		l.end(true)
	}
}

// listen sets the listener's backlog.
func (f *front) listen(backlog int) error {
	rc, err := f.ln.SyscallConn()
	if err != nil {
		return err
	}
	var lerr error
	if err := rc.Control(func(fd uintptr) { lerr = syscall.Listen(int(fd), backlog) }); err != nil {
		return err
	}
	return lerr
}

// close stops the front, ends every connection (a FIN each, held and
// frozen ones too) and joins its goroutines.
func (f *front) close() {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		f.wg.Wait()
		return
	}
	f.closed = true
	f.cancel()
	f.ln.Close()
	if f.silent != nil {
		f.silent.Close()
	}
	links := make([]*link, 0, len(f.links))
	for l := range f.links {
		links = append(links, l)
	}
	for c := range f.conns {
		c.Close() // ends what waits on a client: admit's answer, a held connection
	}
	f.mu.Unlock()
	for _, l := range links {
		l.end(false)
	}
	f.wg.Wait()
}

// nopConn stands for the filler while it is made.
type nopConn struct{ net.Conn }

func (nopConn) Close() error { return nil }
