// Package testbin is what the lb module's tests that run a real program
// (PostgreSQL in internal/pgtest, Alertmanager in internal/amtest,
// Chromium in internal/browsertest) share: finding the program, skipping
// the test without it (or failing it, as in CI, when asked to), and
// picking a free loopback port for it.
package testbin

import (
	"net"
	"os"
	"os/exec"
	"testing"
)

// Find returns the value of the environment variable env when it is set,
// else the path of the first of names found on PATH, else "".
func Find(env string, names ...string) string {
	if p := os.Getenv(env); p != "" {
		return p
	}
	for _, name := range names {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Missing ends a test that needs a program not installed: it skips the
// test with msg, or fails it when the environment variable require is
// "1", as in CI.
func Missing(t testing.TB, require, msg string) {
	t.Helper()
	if os.Getenv(require) == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// FreeAddr returns a loopback TCP address, "127.0.0.1:PORT", and its
// port, free when it was asked for; another process may take it before
// the program binds it.
func FreeAddr() (addr string, port int, err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", 0, err
	}
	defer l.Close()
	return l.Addr().String(), l.Addr().(*net.TCPAddr).Port, nil
}
