package fakes_test

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/fakes/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// server is a TCP listener on 127.0.0.1 that writes payload to every client,
// then reads until the client goes away and reports how that read ended on
// ended. Its goroutines are joined in t.Cleanup.
type server struct {
	addr  string
	ended chan error // one read error per finished connection

	ln     net.Listener
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool
}

func startServer(t *testing.T, payload []byte) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	s := &server{
		addr:  ln.Addr().String(),
		ended: make(chan error, 1024),
		ln:    ln,
		conns: map[net.Conn]bool{},
	}
	s.wg.Add(1)
	go s.accept(payload)
	t.Cleanup(s.close)
	return s
}

func (s *server) accept(payload []byte) {
	defer s.wg.Done()
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			conn.Close()
			continue
		}
		s.conns[conn] = true
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(conn, payload)
	}
}

func (s *server) serve(conn net.Conn, payload []byte) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, conn)
		s.mu.Unlock()
		conn.Close()
	}()
	if _, err := conn.Write(payload); err != nil {
		s.ended <- err
		return
	}
	_, err := io.Copy(io.Discard, conn)
	s.ended <- err // nil: the client closed normally (EOF)
}

func (s *server) close() {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.ln.Close()
	s.wg.Wait()
}

// end waits for the next connection to end on the server side and returns
// how its read ended.
func (s *server) end(t *testing.T) error {
	t.Helper()
	select {
	case err := <-s.ended:
		return err
	case <-time.After(10 * time.Second): // a safety net, not a timing assertion
		t.Fatal("the server never saw the connection end")
		return nil
	}
}

// testCtx is a context for one test, canceled at its end.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
