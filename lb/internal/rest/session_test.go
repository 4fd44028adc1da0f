package rest

import (
	"context"
	"errors"
	"sync"
	"testing"
)

func TestSession(t *testing.T) {
	ctx := context.Background()
	var s Session
	if cred, gen := s.Get(); cred != "" || gen != 0 {
		t.Fatalf("zero Session: Get() = %q, %d", cred, gen)
	}
	logins := 0
	login := func(context.Context) error { logins++; s.Set("tok" + string(rune('0'+logins))); return nil }
	var ended []string
	end := func(_ context.Context, cred string) { ended = append(ended, cred); s.Drop(cred) }

	if err := s.Login(ctx, end, login); err != nil {
		t.Fatal(err)
	}
	if cred, gen := s.Get(); cred != "tok1" || gen != 1 || len(ended) != 0 {
		t.Fatalf("after first Login: %q, %d, ended %v", cred, gen, ended)
	}
	if err := s.Login(ctx, end, login); err != nil {
		t.Fatal(err)
	}
	if cred, gen := s.Get(); cred != "tok2" || gen != 2 || len(ended) != 1 || ended[0] != "tok1" {
		t.Fatalf("after second Login: %q, %d, ended %v", cred, gen, ended)
	}

	t.Run("Relogin of a stale generation does nothing", func(t *testing.T) {
		before := logins
		if err := s.Relogin(ctx, 1, login); err != nil || logins != before {
			t.Fatalf("Relogin(gen 1) = %v, logins %d -> %d", err, before, logins)
		}
	})
	t.Run("Relogin of the current generation logs in", func(t *testing.T) {
		_, gen := s.Get()
		if err := s.Relogin(ctx, gen, login); err != nil {
			t.Fatal(err)
		}
		if _, now := s.Get(); now != gen+1 {
			t.Fatalf("gen %d after Relogin of %d", now, gen)
		}
	})
	t.Run("Relogin returns the login error", func(t *testing.T) {
		boom := errors.New("boom")
		_, gen := s.Get()
		if err := s.Relogin(ctx, gen, func(context.Context) error { return boom }); !errors.Is(err, boom) {
			t.Fatalf("Relogin = %v, want boom", err)
		}
	})
	t.Run("Drop of another credential keeps the session", func(t *testing.T) {
		cred, _ := s.Get()
		s.Drop("other")
		if now, _ := s.Get(); now != cred {
			t.Fatalf("Drop(other) changed %q to %q", cred, now)
		}
	})
	t.Run("Logout", func(t *testing.T) {
		cred, _ := s.Get()
		var got string
		err := s.Logout(ctx, func(_ context.Context, c string) error { got = c; s.Drop(c); return nil })
		if err != nil || got != cred {
			t.Fatalf("Logout: err %v, logout saw %q, want %q", err, got, cred)
		}
		called := false
		if err := s.Logout(ctx, func(context.Context, string) error { called = true; return nil }); err != nil || called {
			t.Fatalf("Logout with no session: err %v, called %v", err, called)
		}
	})
}

// TestSessionReloginOnce checks that of the calls finding the same
// generation expired, only one logs in again.
func TestSessionReloginOnce(t *testing.T) {
	var s Session
	s.Set("a")
	_, gen := s.Get()
	var mu sync.Mutex
	logins := 0
	login := func(context.Context) error {
		mu.Lock()
		logins++
		mu.Unlock()
		s.Set("b")
		return nil
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = s.Relogin(context.Background(), gen, login)
		}()
	}
	wg.Wait()
	if logins != 1 {
		t.Fatalf("%d logins, want 1", logins)
	}
}
