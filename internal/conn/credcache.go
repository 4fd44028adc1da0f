package conn

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdfast-db/holdfast/internal/obs"
)

// Credentials are what a credentials function returns for a connection
// (the face's Credentials): the user and the password (or token) it logs
// in with, and how long they may be reused for other connections.
type Credentials struct {
	User     string
	Password string
	TTL      time.Duration
}

// refusedKey marks the context of a credentials call forced by a refusal.
type refusedKey struct{}

// Refused returns, in the context of a call of a credentials function,
// the credentials whose refusal by the server (SQLSTATE 28P01 or 28000)
// forced the call, and true; false when the call was not forced (the
// face's RefusedCredentials).
func Refused(ctx context.Context) (Credentials, bool) {
	cr, ok := ctx.Value(refusedKey{}).(Credentials)
	return cr, ok
}

// credCache is the factory's cache of a credentials function's answers, by
// host, with one call of the function in flight at a time.
type credCache struct {
	cn *connector
	fn func(ctx context.Context, host string) (Credentials, error)

	calls atomic.Int64 // calls of fn, for tests (Engine.CredentialsCalls)

	mu      sync.Mutex
	entries map[string]*credEntry
	call    *credCall // the call in flight; nil when none
}

// credEntry is the last answer for a host.
type credEntry struct {
	cr        Credentials
	started   time.Time // when the call that answered started
	expires   time.Time
	refused   bool      // the server refused cr: never served again
	refusedAt time.Time // when
}

// credCall is a call of fn in flight, which concurrent connects wait for.
type credCall struct {
	host    string
	started time.Time
	done    chan struct{}
	// Set before done is closed.
	cr        Credentials
	err       error
	abandoned bool // failed because its caller's context ended: others call again
}

func newCredCache(cn *connector, fn func(ctx context.Context, host string) (Credentials, error)) *credCache {
	return &credCache{cn: cn, fn: fn, entries: map[string]*credEntry{}}
}

// get returns the credentials for a connection to host: the cached answer
// while it lives and was not refused, else the answer of a call of fn,
// made by this caller or, when one is in flight, waited for (within ctx).
func (cc *credCache) get(ctx context.Context, host string) (Credentials, error) {
	for {
		cc.mu.Lock()
		e := cc.entries[host]
		now := time.Now()
		if e != nil && !e.refused && now.Before(e.expires) {
			cc.mu.Unlock()
			return e.cr, nil
		}
		if call := cc.call; call != nil {
			// A call for this host that started after the refusal (if
			// any) answers this one too; any other is waited for, then
			// the cache is looked at again.
			usable := call.host == host && (e == nil || !e.refused || !call.started.Before(e.refusedAt))
			cc.mu.Unlock()
			select {
			case <-call.done:
			case <-ctx.Done():
				return Credentials{}, context.Cause(ctx)
			}
			if usable && !call.abandoned {
				return call.cr, call.err
			}
			continue
		}
		call := &credCall{host: host, started: now, done: make(chan struct{})}
		cc.call = call
		var refused *Credentials
		if e != nil && e.refused {
			refused = &e.cr
		}
		cc.mu.Unlock()
		return cc.lead(ctx, call, refused)
	}
}

// lead makes call: one call of fn, told of the refused credentials that
// forced it, if any.
func (cc *credCache) lead(ctx context.Context, call *credCall, refused *Credentials) (Credentials, error) {
	fctx := ctx
	if refused != nil {
		fctx = context.WithValue(ctx, refusedKey{}, Credentials{User: refused.User, Password: refused.Password})
	}
	cr, err := cc.guarded(fctx, call.host)
	if err == nil {
		cc.cn.tel.Secret(cr.Password) // before anything can log it
	}
	cc.mu.Lock()
	if err == nil {
		e := &credEntry{cr: cr, started: call.started, expires: call.started.Add(max(cr.TTL, 0))}
		if old := cc.entries[call.host]; old != nil && old.refused && sameCredentials(old.cr, cr) && old.refusedAt.After(call.started) {
			// Refused while this call ran, which returned the same:
			// still refused.
			e.refused, e.refusedAt = true, old.refusedAt
		}
		cc.entries[call.host] = e
	}
	call.cr, call.err = cr, err
	call.abandoned = err != nil && ctx.Err() != nil
	cc.call = nil
	cc.mu.Unlock()
	close(call.done)
	return cr, err
}

// guarded calls fn, recovering a panic into a Fatal error (Errors.Panic), logged
// once (every waiter gets the error).
func (cc *credCache) guarded(ctx context.Context, host string) (cr Credentials, err error) {
	cc.calls.Add(1)
	defer func() {
		if r := recover(); r != nil {
			stack := debug.Stack()
			cc.cn.tel.Error(ctx, obs.MsgPasswordPanicked, LayerPassword, "panic",
				slog.String("panic", fmt.Sprintf("%T", r)), slog.String("stack", string(stack)))
			cr, err = Credentials{}, &panicError{value: r}
		}
	}()
	return cc.fn(ctx, host)
}

// refuse drops the cached credentials that the server refused (user,
// password): the next connection calls the function again.
func (cc *credCache) refuse(user, password string) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	now := time.Now()
	for _, e := range cc.entries {
		if !e.refused && e.cr.Password == password && (e.cr.User == "" || e.cr.User == user) {
			e.refused, e.refusedAt = true, now
		}
	}
}

func sameCredentials(a, b Credentials) bool { return a.User == b.User && a.Password == b.Password }

// password is the connector's password function in credentials mode,
// which keeps its checks for a password source working; the connect path
// takes the user too (connector.callPassword).
func (cc *credCache) password(ctx context.Context, host string) (string, error) {
	cr, err := cc.get(ctx, host)
	return cr.Password, err
}
