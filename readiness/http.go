package readiness

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/holdfast-db/holdfast/bluegreen"
)

// ownerHeader is the request header that names the owner of a drain at the
// drain endpoint; the "owner" query parameter works too.
const ownerHeader = "X-Drain-Owner"

// healthJSON is the media type of the JSON bodies.
const healthJSON = "application/health+json"

// ReadyHandler returns the readiness probe handler, for /readyz. It answers
// GET and HEAD (405 otherwise) with 200 when the service is ready (status
// pass or warn) and 503 when it is not (fail), following Kubernetes probe
// conventions, after [Checker.Check]: it never waits longer than
// Config.ProbeTimeout.
//
// The body is plain text ("ok", or "not ready: <reason> (<detail>)"), or,
// when the query has "verbose" or the Accept header asks for
// application/health+json or application/json, a JSON body in the shape of
// the application/health+json draft:
//
//	{
//	  "status": "fail",
//	  "reason": "draining",
//	  "output": "not ready: draining (Disabling by \"deploy-42\")",
//	  "checks": {
//	    "startup": [{"componentId": "orders", "componentType": "system", "status": "pass", "time": "..."}],
//	    "postgres:responseTime": [{"componentId": "orders", "componentType": "datastore", "status": "pass",
//	      "observedValue": 0.42, "observedUnit": "ms", "time": "...", "lastSuccess": "...",
//	      "consecutiveFailures": 0, "failureThreshold": 3}],
//	    "postgres:connections": [{"componentId": "orders", "componentType": "datastore", "status": "pass",
//	      "observedValue": 1, "observedUnit": "connections", "acquired": 1, "idle": 3, "total": 4, "max": 4}],
//	    "drain": [{"componentType": "system", "status": "fail", "state": "Disabling",
//	      "owner": "deploy-42", "since": "...", "inFlight": 2,
//	      "inUse": {"acquiredConns": 1, "inFlight": 2}, "polled": "..."}]
//	  }
//	}
//
// Each target has one entry in "startup", "postgres:responseTime" and
// "postgres:connections" (and "bluegreen" and "failover" when its pool
// has them), in the order of the targets, its "componentId" the target's
// name (Target.Name: by default its pool's given name, else "database",
// never its address); an optional target's entries say "optional": true. A target's
// entries give its own status: "fail" for an optional target whose check
// fails, while the overall "status" only warns. With several targets the
// drain's "inUse" has "byTarget", the acquired connections of each.
//
// A failed check carries "reason" with its classified cause, for example
// "transient/conn-refused". Error texts are logged, never served. Every
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
			writeJSON(w, http.StatusOK, healthJSON, map[string]string{"status": string(Pass)})
			return
		}
		writeText(w, http.StatusOK, "ok")
	}}
}

func (c *Checker) serveReady(w http.ResponseWriter, r *http.Request) {
	if !readOnly(w, r) {
		return
	}
	s := c.Check(r.Context())
	code := http.StatusOK
	if !s.Ready() {
		code = http.StatusServiceUnavailable
	}
	if wantsJSON(r) {
		writeJSON(w, code, healthJSON, healthBody(s))
		return
	}
	writeText(w, code, s.String())
}

// DrainHandler returns the drain endpoint, for /drain. Mount it where only
// operators and the deploy pipeline can reach it (an admin port, or behind
// authentication): whoever can call it can take the service out of service.
//
//   - POST drains ([Checker.Drain]) for the owner named by the
//     X-Drain-Owner header or the "owner" query parameter, bounded by the
//     optional "timeout" query parameter (a Go duration such as "30s") or
//     Config.DrainTimeout. 200 with {"result":"drained",...} when the
//     traffic is gone; 409 with the holder when another owner holds the
//     drain; 503 with what was still in use when the drain did not complete
//     (the service stays Disabling); 400 for a missing or invalid owner or
//     timeout. The drain stops if the client disconnects.
//   - DELETE enables ([Checker.Enable]) for the owner, who must hold the
//     drain (409 otherwise); 200 with the state.
//   - GET and HEAD return the drain state as JSON, without side effects.
//
// Other methods get 405. Every answer is JSON. From a deploy pipeline:
//
//	curl -fsS -X POST -H 'X-Drain-Owner: deploy-1234' 'http://node:8080/drain?timeout=2m'  # 200 drained | 409 locked | 503 not drained: abort
//	# ... deploy ...
//	curl -fsS -X DELETE -H 'X-Drain-Owner: deploy-1234' http://node:8080/drain
func (c *Checker) DrainHandler() http.Handler {
	return &endpoint{c: c, serve: c.serveDrain}
}

func (c *Checker) serveDrain(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		writeJSON(w, http.StatusOK, "application/json", drainBody(c.Status()))
		return
	case http.MethodPost, http.MethodDelete:
	default:
		w.Header().Set("Allow", "GET, HEAD, POST, DELETE")
		writeJSON(w, http.StatusMethodNotAllowed, "application/json", errorBody{Error: "readiness: method " + r.Method + " not allowed"})
		return
	}
	owner, err := ownerOf(r)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, "application/json", errorBody{Error: err.Error()})
		return
	}
	c.log.LogAttrs(r.Context(), slog.LevelInfo, "readiness: drain endpoint called",
		slog.String("method", r.Method), slog.String("owner", owner), slog.String("remote", r.RemoteAddr))
	if r.Method == http.MethodDelete {
		if err := c.enable(r.Context(), owner); err != nil {
			writeDrainError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, "application/json", drainBody(c.Status()))
		return
	}
	var opts []DrainOption
	if t := r.URL.Query().Get("timeout"); t != "" {
		d, err := time.ParseDuration(t)
		if err != nil || d <= 0 {
			writeJSON(w, http.StatusBadRequest, "application/json", errorBody{Error: "readiness: invalid timeout " + quote(t) + ": want a positive Go duration such as 30s"})
			return
		}
		opts = append(opts, WithDrainTimeout(d))
	}
	res, err := c.Drain(r.Context(), owner, opts...)
	if err != nil {
		writeDrainError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, "application/json", drainResultBody{
		Result:  "drained",
		Owner:   res.Owner,
		State:   c.drainStateNow().String(),
		Elapsed: res.Elapsed.String(),
		Polls:   res.Polls,
	})
}

func writeDrainError(w http.ResponseWriter, err error) {
	body := errorBody{Error: err.Error()}
	code := http.StatusInternalServerError
	var le *LockedError
	var te *DrainTimeoutError
	var ce *ConfigError
	switch {
	case errors.As(err, &le):
		code, body.Holder, body.State = http.StatusConflict, le.Holder, le.State.String()
	case errors.As(err, &te):
		code, body.State = http.StatusServiceUnavailable, te.State.String()
		body.InUse = &inUseJSON{AcquiredConns: te.InUse.AcquiredConns, InFlight: te.InUse.InFlight, ByTarget: byTargetJSON(te.ByTarget)}
	case errors.As(err, &ce):
		code = http.StatusBadRequest
	case errors.Is(err, ErrClosed):
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, "application/json", body)
}

// ownerOf returns the owner named by the request, checked.
func ownerOf(r *http.Request) (string, error) {
	h, q := r.Header.Get(ownerHeader), r.URL.Query().Get("owner")
	if h != "" && q != "" && h != q {
		return "", &ConfigError{Pkg: "readiness", Field: "owner", Why: "the " + ownerHeader + " header and the owner parameter differ"}
	}
	owner := h
	if owner == "" {
		owner = q
	}
	if owner == "" {
		return "", &ConfigError{Pkg: "readiness", Field: "owner", Why: "missing: set the " + ownerHeader + " header or the owner query parameter"}
	}
	return owner, checkOwner(owner)
}

func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return `"` + strings.ToValidUTF8(s, "?") + `"`
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
		writeText(w, http.StatusInternalServerError, "readiness: encoding the answer: "+err.Error())
		return
	}
	noStore(w, contentType)
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

// The JSON bodies.

type healthBodyJSON struct {
	Status string         `json:"status"`
	Reason string         `json:"reason,omitempty"`
	Output string         `json:"output,omitempty"`
	Checks map[string]any `json:"checks"`
}

type startupJSON struct {
	ComponentID   string `json:"componentId"`
	ComponentType string `json:"componentType"`
	Status        string `json:"status"`
	Optional      bool   `json:"optional,omitempty"`
	Time          string `json:"time,omitempty"`
	Reason        string `json:"reason,omitempty"`
}

type databaseJSON struct {
	ComponentID         string   `json:"componentId"`
	ComponentType       string   `json:"componentType"`
	Status              string   `json:"status"`
	Optional            bool     `json:"optional,omitempty"`
	ObservedValue       *float64 `json:"observedValue,omitempty"`
	ObservedUnit        string   `json:"observedUnit,omitempty"`
	Time                string   `json:"time,omitempty"`
	LastSuccess         string   `json:"lastSuccess,omitempty"`
	ConsecutiveFailures int      `json:"consecutiveFailures"`
	FailureThreshold    int      `json:"failureThreshold"`
	Reason              string   `json:"reason,omitempty"`
}

type connectionsJSON struct {
	ComponentID   string `json:"componentId"`
	ComponentType string `json:"componentType"`
	Status        string `json:"status"`
	Optional      bool   `json:"optional,omitempty"`
	ObservedValue int32  `json:"observedValue"`
	ObservedUnit  string `json:"observedUnit"`
	Acquired      int32  `json:"acquired"`
	Idle          int32  `json:"idle"`
	Total         int32  `json:"total"`
	Max           int32  `json:"max"`
}

type inUseJSON struct {
	AcquiredConns int64            `json:"acquiredConns"`
	InFlight      int64            `json:"inFlight"`
	ByTarget      map[string]int64 `json:"byTarget,omitempty"` // acquired connections per target, with several
}

// byTargetJSON is the acquired connections per target, or nil for fewer
// than two targets.
func byTargetJSON(by []TargetInUse) map[string]int64 {
	if len(by) < 2 {
		return nil
	}
	m := make(map[string]int64, len(by))
	for _, t := range by {
		m[t.Name] = t.AcquiredConns
	}
	return m
}

type drainJSON struct {
	ComponentType string     `json:"componentType"`
	Status        string     `json:"status"`
	State         string     `json:"state"`
	Owner         string     `json:"owner,omitempty"`
	Since         string     `json:"since,omitempty"`
	LockedAt      string     `json:"lockedAt,omitempty"`
	InFlight      int64      `json:"inFlight"`
	InUse         *inUseJSON `json:"inUse,omitempty"`
	Polled        string     `json:"polled,omitempty"`
}

type drainResultBody struct {
	Result  string `json:"result"`
	Owner   string `json:"owner"`
	State   string `json:"state"`
	Elapsed string `json:"elapsed"`
	Polls   int    `json:"polls"`
}

type errorBody struct {
	Error  string     `json:"error"`
	Holder string     `json:"holder,omitempty"`
	State  string     `json:"state,omitempty"`
	InUse  *inUseJSON `json:"inUse,omitempty"`
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func healthBody(s Status) healthBodyJSON {
	b := healthBodyJSON{Status: string(s.Health), Reason: s.Reason, Checks: map[string]any{}}
	if s.Health != Pass {
		b.Output = s.String()
	}
	var (
		startups []startupJSON
		dbs      []databaseJSON
		conns    []connectionsJSON
		bgs      []blueGreenJSON
		fos      []failoverJSON
	)
	for _, t := range s.Targets {
		startups = append(startups, startupBody(t))
		dbs = append(dbs, databaseBody(t))
		conns = append(conns, connectionsBody(t))
		if bg := t.BlueGreen; bg != nil {
			// warn while a switchover is under way (requests may be held),
			// never fail: the routing keeps the service correct through it.
			st := string(Pass)
			if bg.Phase.Active() && bg.Phase != bluegreen.Completed {
				st = string(Warn)
			}
			bgs = append(bgs, blueGreenJSON{ComponentID: t.Name, ComponentType: "component", Status: st, Phase: bg.Phase,
				Routing: bg.Routing.Phase, Normal: bg.Routing.Normal, Mapping: bg.Mapping})
		}
		if fo := t.Failover; fo != nil {
			// warn while the writer is down or being rerouted to, or while
			// the monitor cannot read the topology (routing off), never fail.
			st := string(Pass)
			if fo.Routing != "normal" || fo.Off != "" {
				st = string(Warn)
			}
			fos = append(fos, failoverJSON{ComponentID: t.Name, ComponentType: "component", Status: st, Writer: fo.Writer,
				Routing: fo.Routing, Failovers: fo.Failovers, Off: fo.Off, Error: fo.Error})
		}
	}
	b.Checks["startup"] = startups
	b.Checks["postgres:responseTime"] = dbs
	b.Checks["postgres:connections"] = conns
	b.Checks["drain"] = []drainJSON{drainBody(s)}
	if bgs != nil {
		b.Checks["bluegreen"] = bgs
	}
	if fos != nil {
		b.Checks["failover"] = fos
	}
	return b
}

func startupBody(t TargetStatus) startupJSON {
	st := startupJSON{ComponentID: t.Name, ComponentType: "system", Status: string(Fail), Time: stamp(t.Startup.At), Optional: t.Optional}
	switch {
	case t.Startup.Done:
		st.Status = string(Pass)
	case t.Startup.Running:
		st.Reason = reasonStarting
	case !t.Startup.At.IsZero():
		st.Reason = t.Startup.Cause.String()
	default:
		st.Reason = reasonStarting
	}
	return st
}

func databaseBody(t TargetStatus) databaseJSON {
	db := databaseJSON{
		ComponentID:         t.Name,
		ComponentType:       "datastore",
		Status:              string(Pass),
		Optional:            t.Optional,
		Time:                stamp(t.Database.Checked),
		LastSuccess:         stamp(t.Database.LastSuccess),
		ConsecutiveFailures: t.Database.ConsecutiveFailures,
		FailureThreshold:    t.Database.Threshold,
	}
	switch n := t.Database.ConsecutiveFailures; {
	case n >= t.Database.Threshold:
		db.Status, db.Reason = string(Fail), t.Database.Cause.String()
	case n > 0:
		db.Status, db.Reason = string(Warn), t.Database.Cause.String()
	case t.Database.Checked.IsZero():
		db.Status = string(Fail)
		db.Reason = "not checked yet"
	}
	if !t.Database.LastSuccess.IsZero() && t.Database.Latency > 0 {
		ms := float64(t.Database.Latency.Microseconds()) / 1000
		db.ObservedValue, db.ObservedUnit = &ms, "ms"
	}
	return db
}

func connectionsBody(t TargetStatus) connectionsJSON {
	conns := connectionsJSON{
		ComponentID: t.Name, ComponentType: "datastore", Status: string(Pass), Optional: t.Optional,
		ObservedValue: t.Pool.Acquired, ObservedUnit: "connections",
		Acquired: t.Pool.Acquired, Idle: t.Pool.Idle, Total: t.Pool.Total, Max: t.Pool.Max,
	}
	if t.Pool.Max > 0 && t.Pool.Acquired >= t.Pool.Max {
		conns.Status = string(Warn)
	}
	return conns
}

type failoverJSON struct {
	ComponentID   string `json:"componentId"`
	ComponentType string `json:"componentType"`
	Status        string `json:"status"`
	Writer        string `json:"writer"`
	Routing       string `json:"routing"`
	Failovers     int    `json:"failovers"`
	Off           string `json:"off,omitempty"`   // failover.Status.Off: why routing is off
	Error         string `json:"error,omitempty"` // failover.Status.Error: the monitor's last error
}

type blueGreenJSON struct {
	ComponentID   string              `json:"componentId"`
	ComponentType string              `json:"componentType"`
	Status        string              `json:"status"`
	Phase         bluegreen.Phase     `json:"phase"`
	Routing       bluegreen.Phase     `json:"routing"`
	Normal        bool                `json:"normal"`
	Mapping       []bluegreen.Mapping `json:"mapping,omitempty"`
}

func drainBody(s Status) drainJSON {
	d := drainJSON{
		ComponentType: "system",
		Status:        string(Pass),
		State:         s.Drain.State.String(),
		Owner:         s.Drain.Owner,
		Since:         stamp(s.Drain.Since),
		LockedAt:      stamp(s.Drain.LockedAt),
		InFlight:      s.Drain.InFlight,
		Polled:        stamp(s.Drain.Polled),
	}
	if s.Drain.State != Enabled {
		d.Status = string(Fail)
	}
	if !s.Drain.Polled.IsZero() {
		d.InUse = &inUseJSON{AcquiredConns: s.Drain.InUse.AcquiredConns, InFlight: s.Drain.InUse.InFlight,
			ByTarget: byTargetJSON(s.Drain.ByTarget)}
	}
	return d
}
