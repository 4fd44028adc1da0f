//go:build linux || darwin

package conn

import (
	"net"
	"testing"
	"time"
)

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// peekWithin runs peekSocket on c's socket and fails the test if it has
// not returned within a second: the peek must never wait.
func peekWithin(t *testing.T, c net.Conn) bool {
	t.Helper()
	rc := rawSocket(c)
	if rc == nil {
		t.Fatal("no raw socket under a TCP connection")
	}
	done := make(chan bool, 1)
	go func() { done <- peekSocket(rc) }()
	select {
	case spoke := <-done:
		return spoke
	case <-time.After(time.Second):
		t.Fatal("peekSocket waited (for the descriptor's read lock?)")
		return false
	}
}

// TestPeekSocket: nothing sent is false, a byte sent or the peer's close is
// true, and a read under way on the socket (pgconn's background reader
// left blocked on an idle connection) does not make the peek wait: with
// rc.Read it waited on the descriptor's read lock until the read ended,
// and an Acquire hung with it.
func TestPeekSocket(t *testing.T) {
	t.Run("a read under way", func(t *testing.T) {
		client, server := tcpPair(t)
		read := make(chan error, 1)
		go func() {
			var b [1]byte
			_, err := client.Read(b[:])
			read <- err
		}()
		// Give the reader time to block in Read; the peek must return
		// either way (this is not a synchronisation: the assertion holds
		// whether or not the read has begun).
		time.Sleep(20 * time.Millisecond)
		if peekWithin(t, client) {
			t.Error("peek = true with nothing sent")
		}
		server.Close()
		<-read
	})
	t.Run("a byte sent", func(t *testing.T) {
		client, server := tcpPair(t)
		if peekWithin(t, client) {
			t.Error("peek = true with nothing sent")
		}
		if _, err := server.Write([]byte{'Z'}); err != nil {
			t.Fatal(err)
		}
		if !eventually(t, func() bool { return peekWithin(t, client) }) {
			t.Error("peek = false after the peer sent a byte")
		}
		var b [1]byte // the byte stayed for the reader
		if _, err := client.Read(b[:]); err != nil || b[0] != 'Z' {
			t.Errorf("read %q, %v after the peek; want the byte peeked", b[:], err)
		}
	})
	t.Run("the peer closed", func(t *testing.T) {
		client, server := tcpPair(t)
		server.Close()
		if !eventually(t, func() bool { return peekWithin(t, client) }) {
			t.Error("peek = false after the peer closed")
		}
	})
}

// eventually polls f, non-blocking, until it is true or 5 s have passed:
// a byte on loopback arrives in microseconds, but not within the call.
func eventually(t *testing.T, f func() bool) bool {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if f() {
			return true
		}
	}
	return false
}
