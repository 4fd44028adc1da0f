package rest

import (
	"context"
	"sync"
)

// Session holds a device session's credential (a token or a signature)
// with a generation counted at each login, and serialises logins, so that
// of the calls that find the same session expired only the first logs in
// again. The zero value holds no session. It is safe for concurrent use;
// it must not be copied.
type Session struct {
	mu   sync.Mutex // guards cred and gen
	cred string
	gen  uint64 // incremented at each Set

	loginMu sync.Mutex // serialises Login, Relogin and Logout
}

// Get returns the credential ("" when no session is open) and its
// generation.
func (s *Session) Get() (cred string, gen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cred, s.gen
}

// Set records the credential of a new login and starts a new generation.
func (s *Session) Set(cred string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cred = cred
	s.gen++
}

// Drop forgets cred if it is still the session's credential.
func (s *Session) Drop(cred string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cred == cred {
		s.cred = ""
	}
}

// Login runs login with logins serialised. An open session is first
// passed to end, which should log it out and Drop it.
func (s *Session) Login(ctx context.Context, end func(ctx context.Context, cred string), login func(context.Context) error) error {
	s.loginMu.Lock()
	defer s.loginMu.Unlock()
	if old, _ := s.Get(); old != "" {
		end(ctx, old)
	}
	return login(ctx)
}

// Relogin runs login, serialised, unless another goroutine already logged
// in since the session numbered gen was used.
func (s *Session) Relogin(ctx context.Context, gen uint64, login func(context.Context) error) error {
	s.loginMu.Lock()
	defer s.loginMu.Unlock()
	if _, cur := s.Get(); cur != gen {
		return nil
	}
	return login(ctx)
}

// Logout runs logout on the open session, serialised with logins. With no
// session open it does nothing and returns nil.
func (s *Session) Logout(ctx context.Context, logout func(ctx context.Context, cred string) error) error {
	s.loginMu.Lock()
	defer s.loginMu.Unlock()
	cred, _ := s.Get()
	if cred == "" {
		return nil
	}
	return logout(ctx, cred)
}
