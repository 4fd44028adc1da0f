package gcpfake

import (
	"net/http"
	"sync"
	"time"
)

// Budget counts how many more requests or connections a fault applies to;
// a negative count means every one until it is cleared.
type Budget int

// Take uses one play of the fault and reports whether it applies.
func (b *Budget) Take() bool {
	switch {
	case *b < 0:
		return true
	case *b > 0:
		*b--
		return true
	}
	return false
}

// httpFault is the fault state of one HTTP endpoint.
type httpFault struct {
	failN  Budget
	status int
	slowN  Budget
	delay  time.Duration
}

// HTTPFaults holds the faults of a fake's HTTP endpoints, numbered from 1
// to n, and counts their requests. It is safe for concurrent use.
type HTTPFaults struct {
	mu     sync.Mutex
	f      []httpFault
	count  []int
	failed int
}

// NewHTTPFaults returns the fault state of endpoints 1 to n.
func NewHTTPFaults(n int) *HTTPFaults {
	return &HTTPFaults{f: make([]httpFault, n+1), count: make([]int, n+1)}
}

func (h *HTTPFaults) valid(e int) bool { return e >= 1 && e < len(h.f) }

// Fail makes the next n requests to endpoint e fail with HTTP status code
// (n < 0: every request until Clear), replacing an earlier Fail of e. code
// must be 400 to 599; other values and unknown endpoints are ignored.
func (h *HTTPFaults) Fail(e, code, n int) {
	if !h.valid(e) || code < 400 || code > 599 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.f[e].failN, h.f[e].status = Budget(n), code
}

// Slow delays the next n requests to endpoint e by d (n < 0: every request
// until Clear), replacing an earlier Slow of e.
func (h *HTTPFaults) Slow(e int, d time.Duration, n int) {
	if !h.valid(e) {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.f[e].slowN, h.f[e].delay = Budget(n), d
}

// Clear removes every fault.
func (h *HTTPFaults) Clear() {
	h.mu.Lock()
	defer h.mu.Unlock()
	clear(h.f)
}

// Inject counts a request to endpoint e, applies its injected delay (cut
// short by the request's end or l's closing) and returns the injected
// failure status, or 0. It returns ok=false, having answered 503, when the
// client went away or the fake closed during the delay.
func (h *HTTPFaults) Inject(l *Life, w http.ResponseWriter, r *http.Request, e int) (status int, ok bool) {
	if !h.valid(e) {
		return 0, true
	}
	h.mu.Lock()
	h.count[e]++
	f := &h.f[e]
	var delay time.Duration
	if f.slowN.Take() {
		delay = f.delay
	}
	if f.failN.Take() {
		status = f.status
	}
	h.mu.Unlock()
	if !l.Pause(r.Context(), delay) {
		http.Error(w, "fake closed or request canceled during an injected delay", http.StatusServiceUnavailable)
		return 0, false
	}
	if status != 0 {
		h.mu.Lock()
		h.failed++
		h.mu.Unlock()
	}
	return status, true
}

// Requests returns how many requests endpoint e received, failed ones
// included.
func (h *HTTPFaults) Requests(e int) int {
	if !h.valid(e) {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.count[e]
}

// Failed returns how many requests were answered with an injected status.
func (h *HTTPFaults) Failed() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.failed
}
