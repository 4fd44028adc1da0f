package readiness

import (
	"context"
	"net/http"
	"sync/atomic"
)

// Begin counts one unit of in-flight work (a job, a message, a stream that
// Middleware does not see) until the returned end func is called. A drain
// waits for it. end is idempotent and safe to call from any goroutine;
// forgetting to call it makes every drain time out.
func (c *Checker) Begin() (end func()) {
	t := c.begin()
	return t.end
}

// token is one counted unit of in-flight work.
type token struct {
	c     *Checker
	ended atomic.Bool
}

func (c *Checker) begin() *token {
	c.inflight.Add(1)
	return &token{c: c}
}

func (t *token) end() {
	if t.ended.CompareAndSwap(false, true) {
		t.c.inflight.Add(-1)
	}
}

type tokenKey struct{}

// Middleware counts every request to next as in flight from the moment it
// arrives until next returns, so that a drain waits for it. A nil next means
// http.DefaultServeMux.
//
// With Config.RefuseWhileDraining, a request that arrives while the state is
// not Enabled is answered 503 with "Connection: close" and "Retry-After: 1"
// instead, and not counted; a request already counted runs to the end.
//
// The Checker's own handlers never count: a drain must not wait for the
// request that asked for it. Mount them outside the middleware, or on the
// ServeMux that the middleware wraps, where they are recognised and neither
// counted nor refused.
func (c *Checker) Middleware(next http.Handler) http.Handler {
	if next == nil {
		next = http.DefaultServeMux
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := c.begin() // count first, then look at the state: a drain sees one or the other
		defer t.end()
		if c.cfg.RefuseWhileDraining && c.drainStateNow() != Enabled && !c.own(next, r) {
			t.end()
			w.Header().Set("Connection", "close")
			w.Header().Set("Retry-After", "1")
			http.Error(w, "readiness: draining: not accepting new requests", http.StatusServiceUnavailable)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tokenKey{}, t)))
	})
}

// own reports whether next routes r to one of c's handlers.
func (c *Checker) own(next http.Handler, r *http.Request) bool {
	mux, ok := next.(interface {
		Handler(*http.Request) (http.Handler, string)
	})
	if !ok {
		return false
	}
	h, _ := mux.Handler(r)
	e, ok := h.(*endpoint)
	return ok && e.c == c
}

// endpoint is one of the Checker's own handlers.
type endpoint struct {
	c     *Checker
	serve func(http.ResponseWriter, *http.Request)
}

// ServeHTTP uncounts the request if a Middleware of the same Checker counted
// it, then serves it.
func (e *endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if t, ok := r.Context().Value(tokenKey{}).(*token); ok && t.c == e.c {
		t.end()
	}
	e.serve(w, r)
}
