package ports

import (
	"net"
	"strconv"
	"testing"
)

func TestFree(t *testing.T) {
	p, err := Free("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		t.Fatalf("port %d: %v", p, err)
	}
	l.Close()
}
