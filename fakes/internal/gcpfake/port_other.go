//go:build !unix

package gcpfake

import "net"

// boundPort is a loopback address with nothing listening. Without Unix
// sockets to hold the port, it is a port that was free a moment ago, which
// another process could take.
type boundPort struct {
	addr string
}

func bindPort() (*boundPort, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		return nil, err
	}
	return &boundPort{addr: addr}, nil
}

// Close does nothing.
func (p *boundPort) Close() error { return nil }
