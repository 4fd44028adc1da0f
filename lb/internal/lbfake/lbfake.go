package lbfake

import (
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// FaultKind is what an injected [Fault] does. The vendor packages alias
// it and name the kinds after what they answer there.
type FaultKind int

// Fault kinds. Every kind but Slow is passed to the [Handler], which
// answers it in the vendor's wire shape.
const (
	// ExpireSession ends the session the request carries.
	ExpireSession FaultKind = iota + 1
	// Busy answers that the device is busy.
	Busy
	// Denied answers that the account lacks the privilege.
	Denied
	// NotFound answers that the object does not exist.
	NotFound
	// ServerError answers 500.
	ServerError
	// Slow waits Fault.Delay, then answers normally; the Server handles
	// it and the Handler sees no fault.
	Slow
)

// Fault is injected with [Server.Inject]. It applies to the requests whose
// method and path match, after skipping Skip of them, Times times (0 means
// once; < 0 means every later one).
type Fault struct {
	Kind   FaultKind
	Method string // "" matches any method
	Path   string // a substring of the request path; "" matches any
	Skip   int
	Times  int
	Delay  time.Duration // for Slow
}

// Request is a request the fake received.
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   string
}

// Handler answers a request once any hold and Slow fault are over. body
// is the request body (at most 64 KiB); fault is the kind of the fault
// matched for the request, or 0 if none (or Slow) matched.
type Handler func(w http.ResponseWriter, r *http.Request, body []byte, fault FaultKind)

// Server is an httptest server with request recording, in-flight
// tracking, holds and fault matching. Start it with [Start] and Close it.
// It is safe for concurrent use.
type Server struct {
	handle Handler
	srv    *httptest.Server
	done   chan struct{}
	once   sync.Once

	mu          sync.Mutex
	faults      []*fault
	reqs        []Request
	inflight    int
	maxInflight int
	hold        *hold
}

type fault struct {
	Fault
	seen int
	hits int
}

type hold struct {
	path    string
	n       int
	held    int
	release chan struct{}
	once    sync.Once
	wait    time.Duration
}

// Start starts s, a zero Server (a vendor fake embeds one), passing each
// request to handle: over TLS (httptest's self-signed certificate for
// 127.0.0.1), or over plain HTTP when plain is set. A function rather than
// a method, so that it is not promoted to the vendor's Server.
func Start(s *Server, handle Handler, plain bool) {
	s.handle, s.done = handle, make(chan struct{})
	if plain {
		s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
		return
	}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // a client refusing the certificate is a test's point, not noise
	s.srv.StartTLS()
}

// URL returns the base URL, "https://127.0.0.1:PORT" ("http://" when
// started plain).
func (s *Server) URL() string { return s.srv.URL }

// Client returns an HTTP client for the server (closed with it), which
// trusts its certificate.
func (s *Server) Client() *http.Client { return s.srv.Client() }

// CertificatePEM returns the server's TLS certificate, PEM-encoded (a CA
// file for it: the certificate is self-signed), or nil when it serves
// plain HTTP.
func (s *Server) CertificatePEM() []byte {
	c := s.srv.Certificate()
	if c == nil {
		return nil
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

// Close ends held and slow requests, then stops the server. It is
// idempotent.
func (s *Server) Close() {
	s.once.Do(func() {
		close(s.done)
		s.srv.Close()
	})
}

// Inject adds a fault.
func (s *Server) Inject(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &fault{Fault: f})
}

// Clear removes every fault and hold.
func (s *Server) Clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
	if s.hold != nil {
		s.hold.open()
		s.hold = nil
	}
}

// Hold makes the next requests whose path contains path wait until n of
// them are waiting at once, or until one has waited for wait; then all
// are released and the hold is over.
func (s *Server) Hold(path string, n int, wait time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold = &hold{path: path, n: n, release: make(chan struct{}), wait: wait}
}

func (h *hold) open() { h.once.Do(func() { close(h.release) }) }

// Requests returns the requests received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Count returns how many requests had the method ("" for any) and a path
// containing path.
func (s *Server) Count(method, path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.reqs {
		if (method == "" || r.Method == method) && strings.Contains(r.Path, path) {
			n++
		}
	}
	return n
}

// MaxInFlight returns the largest number of requests being served at
// once so far.
func (s *Server) MaxInFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxInflight
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<16))
	s.mu.Lock()
	s.reqs = append(s.reqs, Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: string(body)})
	s.inflight++
	s.maxInflight = max(s.maxInflight, s.inflight)
	h := s.hold
	if h != nil && strings.Contains(r.URL.Path, h.path) {
		h.held++
		if h.held >= h.n {
			h.open()
			s.hold = nil
		}
	} else {
		h = nil
	}
	f := s.matchFault(r)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inflight--
		s.mu.Unlock()
	}()
	if h != nil {
		t := time.NewTimer(h.wait)
		select {
		case <-h.release:
		case <-t.C:
			s.mu.Lock()
			if s.hold == h {
				s.hold = nil
			}
			s.mu.Unlock()
			h.open()
		case <-s.done:
		case <-r.Context().Done():
		}
		t.Stop()
	}
	var kind FaultKind
	if f != nil {
		kind = f.Kind
	}
	if kind == Slow {
		t := time.NewTimer(f.Delay)
		select {
		case <-t.C:
		case <-s.done:
		case <-r.Context().Done():
		}
		t.Stop()
		kind = 0
	}
	s.handle(w, r, body, kind)
}

// matchFault returns the fault for r, if any, counting it. Called with mu.
func (s *Server) matchFault(r *http.Request) *fault {
	for _, f := range s.faults {
		if (f.Method != "" && f.Method != r.Method) || !strings.Contains(r.URL.Path, f.Path) {
			continue
		}
		f.seen++
		if f.seen <= f.Skip {
			continue
		}
		times := f.Times
		if times == 0 {
			times = 1
		}
		if times > 0 && f.hits >= times {
			continue
		}
		f.hits++
		return f
	}
	return nil
}
