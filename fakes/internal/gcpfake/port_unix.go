//go:build unix

package gcpfake

import (
	"net"
	"strconv"
	"syscall"
)

// boundPort holds a loopback TCP port that is bound but not listening: a
// connect to it is refused (ECONNREFUSED), and no other socket can take the
// port while it is held.
type boundPort struct {
	fd   int
	addr string
}

func bindPort() (*boundPort, error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		return nil, err
	}
	syscall.CloseOnExec(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		_ = syscall.Close(fd)
		return nil, err
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		_ = syscall.Close(fd)
		return nil, err
	}
	in4, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		_ = syscall.Close(fd)
		return nil, syscall.EAFNOSUPPORT
	}
	return &boundPort{fd: fd, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(in4.Port))}, nil
}

// Close releases the port. It is idempotent.
func (p *boundPort) Close() error {
	if p.fd < 0 {
		return nil
	}
	err := syscall.Close(p.fd)
	p.fd = -1
	return err
}
