// Package gcpfake holds what the fakes of Google Cloud's database
// connectors share (fakes/cloudsqltest for the Cloud SQL Go connector,
// fakes/alloydbtest for the AlloyDB one): the lifetime of a fake's
// goroutines and connections, the faults of its HTTP endpoints, the OAuth2
// token endpoint and the token sources that fetch from it, Google API
// error answers and the errors the client libraries build from them, and
// the instance: a TLS 1.3 listener that checks the connector's client
// certificate and forwards to a real PostgreSQL server, with its faults.
// Everything listens on 127.0.0.1.
package gcpfake

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/holdfast-db/holdfast/internal/pause"
)

// Life tracks a fake's goroutines and connections so that its Close can end
// them all and wait for them. The zero Life is not usable; use [NewLife].
type Life struct {
	mu      sync.Mutex
	closed  bool
	closing chan struct{}
	wg      sync.WaitGroup
	conns   map[net.Conn]struct{}
}

// NewLife returns a Life that is not closed.
func NewLife() *Life {
	return &Life{closing: make(chan struct{}), conns: map[net.Conn]struct{}{}}
}

// Enter counts one goroutine that [Life.Wait] waits for, unless the fake
// is closed; it reports whether it counted. Call [Life.Leave] when it ends.
func (l *Life) Enter() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.wg.Add(1)
	return true
}

// Leave ends what [Life.Enter] counted.
func (l *Life) Leave() { l.wg.Done() }

// Go runs f in a goroutine that [Life.Wait] waits for (even when the fake
// is closed: f is expected to see that and return).
func (l *Life) Go(f func()) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		f()
	}()
}

// Track registers c so that [Life.Shut] closes it, and counts one
// goroutine for the caller to release with [Life.Untrack]. It returns
// false, having closed c, if the fake is closed.
func (l *Life) Track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		_ = c.Close()
		return false
	}
	l.conns[c] = struct{}{}
	l.wg.Add(1)
	return true
}

// Untrack ends what [Life.Track] registered.
func (l *Life) Untrack(c net.Conn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
	l.wg.Done()
}

// Closed reports whether [Life.Shut] was called.
func (l *Life) Closed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// Shut marks the fake closed, ends pending [Life.Pause] calls and closes
// every tracked connection. It reports whether this call closed it (false:
// it was closed already).
func (l *Life) Shut() bool {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return false
	}
	l.closed = true
	close(l.closing)
	conns := make([]net.Conn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
	return true
}

// Wait waits for every goroutine counted by Enter, Go and Track.
func (l *Life) Wait() { l.wg.Wait() }

// Pause sleeps for d, or until ctx is done or the fake closes; it reports
// whether d elapsed.
func (l *Life) Pause(ctx context.Context, d time.Duration) bool {
	return pause.For(ctx, d, l.closing)
}
