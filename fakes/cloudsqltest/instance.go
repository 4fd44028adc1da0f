package cloudsqltest

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"sync"
	"time"
)

// handshakeTimeout bounds a TLS handshake on the fake instance.
const handshakeTimeout = 10 * time.Second

func (s *Server) acceptLoop() {
	for {
		c, err := s.inst.Accept()
		if err != nil {
			return // the listener was closed by Close
		}
		if !s.track(c) {
			return
		}
		go func() {
			defer s.untrack(c)
			defer c.Close()
			s.serveConn(c)
		}()
	}
}

// serveConn plays the instance's part for one connection: the injected
// faults, the TLS handshake with client certificate verification, then
// forwarding to PostgreSQL.
func (s *Server) serveConn(c net.Conn) {
	s.mu.Lock()
	var delay time.Duration
	if s.instF.slowN.take() {
		delay = s.instF.slowDelay
	}
	resetHS := s.instF.resetHSN.take()
	s.mu.Unlock()

	if !s.wait(context.Background(), delay) {
		return
	}
	if resetHS {
		// Read the client's first handshake record (the ClientHello), then
		// reset the connection: the dialer is waiting for the ServerHello.
		_ = c.SetReadDeadline(time.Now().Add(handshakeTimeout))
		var hdr [5]byte
		if _, err := io.ReadFull(c, hdr[:]); err == nil {
			n := int(hdr[3])<<8 | int(hdr[4])
			_, _ = io.CopyN(io.Discard, c, int64(n))
		}
		s.reset(c)
		return
	}

	tc := tls.Server(c, s.tlsConfig)
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		return
	}
	s.mu.Lock()
	s.stats.Handshakes++
	resetAfter := s.instF.resetAfterN.take()
	s.mu.Unlock()
	if resetAfter {
		s.reset(c)
		return
	}

	var d net.Dialer
	ctx, cancel = context.WithTimeout(context.Background(), handshakeTimeout)
	backend, err := d.DialContext(ctx, "tcp", s.cfg.Backend)
	cancel()
	if err != nil {
		return // the client sees the connection close
	}
	if !s.track(backend) {
		return
	}
	defer s.untrack(backend)
	defer backend.Close()
	s.mu.Lock()
	s.stats.Forwarded++
	s.mu.Unlock()
	pipe(tc, backend)
}

// reset closes c with SO_LINGER 0, so that the peer gets a TCP reset.
func (s *Server) reset(c net.Conn) {
	s.mu.Lock()
	s.stats.Resets++
	s.mu.Unlock()
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
