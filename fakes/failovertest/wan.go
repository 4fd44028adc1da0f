package failovertest

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/holdfast-db/holdfast/fakes/internal/pgnode"
)

// wan is the replication link between two Regions of a Global: a TCP
// relay in the test process that the secondary Region's first server
// streams WAL through, from the writer of the moment (its target). It
// reads the writer's messages (the link is named without TLS in the
// standby's primary_conninfo) and passes the connection's start at once;
// from the CopyBothResponse on, what the writer sends reaches the standby
// delay late (each chunk is held until delay after it was read), so the
// secondary really lags: a commit the writer acknowledged is not on the
// secondary until then. The standby's replies pass at once, so
// pg_stat_replication's lags on the writer measure delay. cutOff drops
// the link as a Region's outage does: every connection is closed and
// what was in flight is lost; until retarget, a new connection is closed
// at once.
//
// It runs an accept loop and three goroutines per connection (a reader
// and a delayed writer one way, a copy the other); close stops and joins
// them.
type wan struct {
	ln   net.Listener
	host string
	port int

	mu     sync.Mutex
	target string        // "ip:port" of the writer of the moment
	delay  time.Duration // for the chunks read from now on
	cut    bool
	closed bool
	conns  map[*wanConn]struct{}

	wg sync.WaitGroup
}

// wanConn is one standby's connection relayed to the writer.
type wanConn struct {
	standby, writer net.Conn
	once            sync.Once
	done            chan struct{} // closed by end
}

func (c *wanConn) end() {
	c.once.Do(func() {
		c.standby.Close()
		c.writer.Close()
		close(c.done)
	})
}

// newWAN listens on a free port of 127.0.0.1 and relays to target.
func newWAN(target string, delay time.Duration) (*wan, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	w := &wan{ln: ln, host: host, target: target, delay: delay, conns: map[*wanConn]struct{}{}}
	w.port, _ = strconv.Atoi(port)
	w.wg.Go(w.serve)
	return w, nil
}

// node is where a standby's primary_conninfo names the link: without TLS
// or GSSAPI encryption, so that the relay reads the protocol's messages
// and holds back the WAL only, not the connection's start.
func (w *wan) node() *pgnode.Node {
	return &pgnode.Node{Host: w.host, Port: w.port, Conninfo: " sslmode=disable gssencmode=disable"}
}

func (w *wan) serve() {
	for {
		c, err := w.ln.Accept()
		if err != nil {
			return // closed
		}
		w.mu.Lock()
		target, refuse := w.target, w.cut || w.closed
		w.mu.Unlock()
		if refuse {
			c.Close()
			continue
		}
		w.wg.Go(func() { w.relay(c, target) })
	}
}

// relay dials target for the standby's connection c and relays both ways
// until either end closes, the link is cut or closed.
func (w *wan) relay(c net.Conn, target string) {
	d := net.Dialer{Timeout: 5 * time.Second}
	wc, err := d.Dial("tcp", target)
	if err != nil {
		c.Close()
		return
	}
	conn := &wanConn{standby: c, writer: wc, done: make(chan struct{})}
	w.mu.Lock()
	if w.cut || w.closed {
		w.mu.Unlock()
		conn.end()
		return
	}
	w.conns[conn] = struct{}{}
	w.mu.Unlock()
	defer func() {
		conn.end()
		w.mu.Lock()
		delete(w.conns, conn)
		w.mu.Unlock()
	}()

	type chunk struct {
		b  []byte
		at time.Time // when to deliver it
	}
	chunks := make(chan chunk, 1024)
	var inner sync.WaitGroup
	inner.Go(func() { // the standby's replies, at once
		_, _ = io.Copy(wc, c)
		conn.end()
	})
	inner.Go(func() { // the writer's messages, read as they come
		defer close(chunks)
		r := bufio.NewReaderSize(wc, 32<<10)
		streaming := false // from CopyBothResponse on: WAL, held back
		for {
			var b []byte
			var err error
			if streaming {
				b = make([]byte, 32<<10)
				var n int
				n, err = r.Read(b)
				b = b[:n]
			} else {
				b, err = message(r)
				streaming = len(b) > 0 && b[0] == 'W'
			}
			if len(b) > 0 {
				at := time.Now()
				if streaming {
					w.mu.Lock()
					at = at.Add(w.delay)
					w.mu.Unlock()
				}
				select {
				case chunks <- chunk{b, at}:
				case <-conn.done:
					return
				}
			}
			if err != nil {
				return
			}
		}
	})
	// Delivered delay late, in order; what is still held when the
	// connection ends is lost.
	timer := time.NewTimer(0)
	defer timer.Stop()
	for ch := range chunks {
		if wait := time.Until(ch.at); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-conn.done:
				continue // drain: the reader ends on conn.done
			}
		}
		if _, err := c.Write(ch.b); err != nil {
			conn.end()
		}
	}
	conn.end()
	inner.Wait()
}

// message reads one message of the PostgreSQL protocol from the server:
// its type, its length (4 bytes, itself included) and its body.
func message(r *bufio.Reader) ([]byte, error) {
	head := make([]byte, 5)
	if _, err := io.ReadFull(r, head); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(head[1:]))
	if n < 4 || n > 1<<30 {
		return nil, fmt.Errorf("a message of %d bytes", n)
	}
	b := make([]byte, 1+n)
	copy(b, head)
	_, err := io.ReadFull(r, b[5:])
	return b, err
}

// setDelay sets the delay of the chunks read from now on.
func (w *wan) setDelay(d time.Duration) {
	w.mu.Lock()
	w.delay = d
	w.mu.Unlock()
}

// retarget makes the link lead to target, closing the connections to the
// old one, and ends a cut.
func (w *wan) retarget(target string) {
	w.mu.Lock()
	w.target, w.cut = target, false
	conns := w.takeLocked()
	w.mu.Unlock()
	endAll(conns)
}

// cutOff drops the link: its connections are closed, what they held is
// lost, and new ones are closed at once until retarget.
func (w *wan) cutOff() {
	w.mu.Lock()
	w.cut = true
	conns := w.takeLocked()
	w.mu.Unlock()
	endAll(conns)
}

func (w *wan) takeLocked() []*wanConn {
	out := make([]*wanConn, 0, len(w.conns))
	for c := range w.conns {
		out = append(out, c)
	}
	return out
}

func endAll(conns []*wanConn) {
	for _, c := range conns {
		c.end()
	}
}

// close stops the link and joins its goroutines.
func (w *wan) close() error {
	w.mu.Lock()
	w.closed = true
	conns := w.takeLocked()
	w.mu.Unlock()
	err := w.ln.Close()
	endAll(conns)
	w.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
