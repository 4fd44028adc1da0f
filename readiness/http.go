package readiness

import (
	"encoding/json"
	"net/http"
	"strings"
)

// healthJSON is the media type of the JSON bodies.
const healthJSON = "application/health+json"

// ReadyHandler returns the readiness probe handler, for /readyz. It answers
// GET and HEAD (405 otherwise) with 200 when the service is ready (status
// pass or warn) and 503 when it is not (fail), following Kubernetes probe
// conventions, after [Checker.Check]: it never waits longer than
// Config.ProbeTimeout.
//
// A probe is told the status and its reason ([Status].Reason), nothing
// more: the body is plain text, "ok", "ok (warn): <reason>" or
// "not ready: <reason>", or, when the query has "verbose" or the Accept
// header asks for application/health+json or application/json, JSON:
//
//	{"status": "fail", "reason": "draining"}
//
// No target, host, address, owner, blue/green mapping, writer or error
// text: those are [Checker.AdminHandler]'s, for an admin listener. Every
// answer has "Cache-Control: no-store".
func (c *Checker) ReadyHandler() http.Handler {
	return &endpoint{c: c, serve: c.serveReady}
}

// LiveHandler returns the liveness probe handler, for /livez. It never
// touches the database, so that a database outage cannot turn into a
// restart storm: it answers 200 "ok" (or {"status":"pass"}) to GET and HEAD
// as long as the process serves HTTP.
func (c *Checker) LiveHandler() http.Handler {
	return &endpoint{c: c, serve: func(w http.ResponseWriter, r *http.Request) {
		if !readOnly(w, r) {
			return
		}
		if wantsJSON(r) {
			writeJSON(w, http.StatusOK, healthJSON, publicBody{Status: string(Pass)})
			return
		}
		writeText(w, http.StatusOK, "ok")
	}}
}

// publicBody is the probe's JSON body: the status and its reason.
type publicBody struct {
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

func (c *Checker) serveReady(w http.ResponseWriter, r *http.Request) {
	s, code, ok := c.checkRead(w, r)
	if !ok {
		return
	}
	if wantsJSON(r) {
		writeJSON(w, code, healthJSON, publicBody{Status: string(s.Health), Reason: s.Reason})
		return
	}
	writeText(w, code, s.probeText())
}

func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return `"` + strings.ToValidUTF8(s, "?") + `"`
}

// checkRead checks, for a GET or HEAD, and returns the status and the
// HTTP status to answer with: 200 when ready, else 503. Other methods get
// 405 and ok false.
func (c *Checker) checkRead(w http.ResponseWriter, r *http.Request) (s Status, code int, ok bool) {
	if !readOnly(w, r) {
		return Status{}, 0, false
	}
	s = c.Check(r.Context())
	code = http.StatusOK
	if !s.Ready() {
		code = http.StatusServiceUnavailable
	}
	return s, code, true
}

// readOnly answers 405 to anything but GET and HEAD.
func readOnly(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	writeText(w, http.StatusMethodNotAllowed, "method not allowed")
	return false
}

// wantsJSON reports whether the request asks for the JSON body.
func wantsJSON(r *http.Request) bool {
	if r.URL.Query().Has("verbose") {
		return true
	}
	for _, a := range r.Header.Values("Accept") {
		for _, part := range strings.Split(a, ",") {
			mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
			switch strings.ToLower(strings.TrimSpace(mt)) {
			case healthJSON, "application/json":
				return true
			}
		}
	}
	return false
}

func noStore(w http.ResponseWriter, contentType string) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
}

func writeText(w http.ResponseWriter, code int, text string) {
	noStore(w, "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(text + "\n"))
}

func writeJSON(w http.ResponseWriter, code int, contentType string, v any) {
	b, err := json.Marshal(v)
	if err != nil { // not reached: every body is plain data
		writeText(w, http.StatusInternalServerError, "readiness: internal error")
		return
	}
	noStore(w, contentType)
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}
