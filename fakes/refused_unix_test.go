//go:build unix

package fakes_test

import (
	"net"
	"reflect"
	"strconv"
	"syscall"
	"testing"

	"github.com/holdfast-db/holdfast/fakes"
)

// TestRefusedMatchesRealDialer compares the Refused step with what
// net.Dialer really returns for a port nobody listens on.
func TestRefusedMatchesRealDialer(t *testing.T) {
	t.Parallel()
	addr := closedPort(t)
	var d net.Dialer
	conn, realErr := d.DialContext(testCtx(t), "tcp", addr)
	if realErr == nil {
		conn.Close()
		t.Fatalf("dialing %s, a bound socket that does not listen, succeeded", addr)
	}
	_, fakeErr := fakes.NewConnector(addr, fakes.Refused()).Dial(testCtx(t), "tcp", addr)
	if got, want := chain(fakeErr), chain(realErr); !reflect.DeepEqual(got, want) {
		t.Errorf("chain = %v, want %v", got, want)
	}
	if fakeErr.Error() != realErr.Error() {
		t.Errorf("Error() = %q, want %q", fakeErr.Error(), realErr.Error())
	}
}

// closedPort returns a 127.0.0.1 address whose port is held, until the test
// ends, by a socket that is bound but not listening: connecting to it is
// refused, and no other socket can take the port meanwhile.
func closedPort(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatalf("socket: %v", err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("bind: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("getsockname: %v", err)
	}
	in4, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		t.Fatalf("getsockname returned %T", sa)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(in4.Port))
}
