// Package ports finds free TCP ports for the fakes' PostgreSQL servers
// (fakes/pgtest, fakes/failovertest).
package ports

import "net"

// Free asks the kernel for a free TCP port on host. Another process may
// take it before a server binds it: callers retry in that case.
func Free(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
