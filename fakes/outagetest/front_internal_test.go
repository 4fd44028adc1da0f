package outagetest

import (
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"
)

// echo is a TCP echo server on 127.0.0.1; its connections can be closed
// from the server's side (drop), as a server that stops does.
type echo struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

func startEcho(t *testing.T) *echo {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echo{ln: ln}
	e.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.mu.Lock()
			e.conns = append(e.conns, c)
			e.mu.Unlock()
			e.wg.Go(func() { _, _ = io.Copy(c, c); c.Close() })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		e.drop()
		e.wg.Wait()
	})
	return e
}

func (e *echo) addr() string { return e.ln.Addr().String() }

// drop closes every connection the server has.
func (e *echo) drop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, c := range e.conns {
		c.Close()
	}
	e.conns = nil
}

func startFront(t *testing.T, target string) *front {
	t.Helper()
	f, err := newFront("127.0.0.1", target, frontHooks{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.close)
	return f
}

// roundTrip writes b on c and reads it back within d.
func roundTrip(c net.Conn, b string, d time.Duration) error {
	_ = c.SetDeadline(time.Now().Add(d))
	if _, err := c.Write([]byte(b)); err != nil {
		return err
	}
	got := make([]byte, len(b))
	if _, err := io.ReadFull(c, got); err != nil {
		return err
	}
	if string(got) != b {
		return errors.New("echoed " + string(got))
	}
	return nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// A silent front drops new connections' SYNs (a dial times out, it is not
// refused) and freezes the connections it has: nothing passes either way,
// not even the server's end. Answering again resets the frozen ones and
// relays new ones.
func TestFrontSilence(t *testing.T) {
	e := startEcho(t)
	f := startFront(t, e.addr())
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := roundTrip(c, "before", time.Second); err != nil {
		t.Fatal(err)
	}

	if err := f.silence(); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		began := time.Now()
		d, err := net.DialTimeout("tcp", f.addr, 300*time.Millisecond)
		if err == nil {
			d.Close()
			t.Fatalf("dial %d to a silent address connected", i)
		}
		if !isTimeout(err) {
			t.Fatalf("dial %d to a silent address: %v; want a timeout (SYN dropped), not a refusal", i, err)
		}
		t.Logf("dial %d: %v after %v", i, err, time.Since(began).Round(time.Millisecond))
	}
	if err := roundTrip(c, "during", 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("frozen connection: %v; want a timeout", err)
	}
	e.drop() // the server goes away: its end is not passed on
	got := make([]byte, 16)
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := c.Read(got); !isTimeout(err) {
		t.Fatalf("frozen connection after the server's end: %d bytes, %v; want a timeout", n, err)
	}

	if err := f.answer(e.addr()); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := c.Read(got); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("frozen connection after the address answers again: %v; want a reset", err)
	}
	d, err := net.DialTimeout("tcp", f.addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := roundTrip(d, "after", time.Second); err != nil {
		t.Fatal(err)
	}
}

// A front moved to another target relays new connections there; reset
// ends those it relayed to the old one with RST, and leaves the others.
func TestFrontReset(t *testing.T) {
	a, b := startEcho(t), startEcho(t)
	f := startFront(t, a.addr())
	toA, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer toA.Close()
	if err := roundTrip(toA, "a", time.Second); err != nil {
		t.Fatal(err)
	}
	f.setTarget(b.addr())
	toB, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer toB.Close()
	if err := roundTrip(toB, "b", time.Second); err != nil {
		t.Fatal(err)
	}
	f.reset(a.addr())
	_ = toA.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := toA.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("connection to the old target after reset: %v; want a reset", err)
	}
	if err := roundTrip(toB, "b again", time.Second); err != nil {
		t.Errorf("connection to the new target after reset: %v", err)
	}
}
