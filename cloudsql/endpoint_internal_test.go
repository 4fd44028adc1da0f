package cloudsql

import (
	"context"
	"errors"
	"net"
	"testing"
)

// TestWatchRetiresOldConnections: when the name moves, every connection
// to the old instance is closed at once and fails its next write with a
// *SwitchoverError naming both instances, before sending anything; a
// connection to the new instance stays.
func TestWatchRetiresOldConnections(t *testing.T) {
	w := newWatch("db.example.com", EndpointConfig{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	conn := func(inst string) (*endpointConn, net.Conn) {
		a, err := (&net.Dialer{}).DialContext(context.Background(), "tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		b, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
		c := &endpointConn{Conn: a, w: w, inst: inst}
		w.conns[c] = struct{}{}
		return c, b
	}
	w.observe("p:r:a")
	old1, _ := conn("p:r:a")
	old2, _ := conn("p:r:a")
	nw, peer := conn("p:r:b")
	var got []Switchover
	w.cfg.OnSwitchover = func(s Switchover) { got = append(got, s) }
	if _, moved := w.observe("p:r:b"); !moved || len(got) != 1 || got[0].From != "p:r:a" || got[0].To != "p:r:b" {
		t.Fatalf("observe = %v, events %+v; want one move from p:r:a to p:r:b", moved, got)
	}
	for _, c := range []*endpointConn{old1, old2} {
		_, err := c.Write([]byte("x"))
		var se *SwitchoverError
		if !errors.As(err, &se) || se.From != "p:r:a" || se.To != "p:r:b" || !errors.Is(err, net.ErrClosed) {
			t.Errorf("write on an old connection = %v, want a *SwitchoverError wrapping net.ErrClosed", err)
		}
	}
	_ = peer
	if _, err := nw.Write([]byte("x")); err != nil {
		t.Errorf("write on the new instance's connection: %v", err)
	}
	if len(w.conns) != 1 {
		t.Errorf("%d connections tracked, want the new one", len(w.conns))
	}
	// A connection pgx closed itself is not a switchover.
	_ = nw.Close()
	if _, err := nw.Write([]byte("x")); errors.As(err, new(*SwitchoverError)) {
		t.Errorf("write after pgx's own Close = %v, want no *SwitchoverError", err)
	}
}
