package readiness

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/failover"
)

// ownerHeader is the request header that names the owner of a drain at the
// drain endpoint for a local caller; the "owner" query parameter works too.
const ownerHeader = "X-Drain-Owner"

// maxMapping bounds the blue/green mapping entries of one target in the
// admin body; the rest are counted in "mappingOmitted".
const maxMapping = 64

// AdminHandler returns the readiness details, for an admin listener: what
// [Checker.ReadyHandler] no longer tells a probe. It answers GET and HEAD
// (405 otherwise), after [Checker.Check], with 200 when the service is
// ready and 503 when it is not, and an application/health+json body in
// the shape of the IETF draft "Health Check Response Format for HTTP
// APIs":
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
//	    "bluegreen": [{"componentId": "orders", "componentType": "component", "status": "pass",
//	      "phase": "CREATED", "routing": "CREATED", "normal": true,
//	      "mapping": [{"blue": "orders.cluster-...", "blue_addr": "10.0.1.7", "green": "...", "green_addr": "..."}]}],
//	    "failover": [{"componentId": "orders", "componentType": "component", "status": "pass",
//	      "writer": "orders-1", "routing": "normal", "failovers": 0}],
//	    "drain": [{"componentType": "system", "status": "fail", "state": "Disabling",
//	      "owner": "deploy-42", "since": "...", "inFlight": 2,
//	      "inUse": {"acquiredConns": 1, "inFlight": 2}, "polled": "..."}]
//	  }
//	}
//
// Each target has one entry in "startup", "postgres:responseTime" and
// "postgres:connections" (and "bluegreen" and "failover" when its pool
// has them), in the order of the targets, its "componentId" the target's
// name (Target.Name); an optional target's entries say "optional": true
// and give its own status ("fail" while the overall status only warns).
// With several targets the drain's "inUse" has "byTarget". A failed check
// carries "reason" with its classified cause ("transient/conn-refused");
// so does a failover monitor whose last read or connect failed (its
// "reason", beside "off" when routing is off): error texts are logged,
// never served. The blue/green "mapping" (host names and addresses the
// cluster's metadata publishes) lists at most 64 pairs per target, with
// "mappingOmitted" counting the rest.
//
// The handler answers only the callers [Config].Authorize admits, or,
// without it, local callers only (see [Checker.DrainHandler]); others get
// 403. Serve it on an admin listener ([ServeConfig].Admin), never on the
// port that probes and traffic reach: mounting it exposes these names and
// addresses to whoever it admits.
func (c *Checker) AdminHandler() http.Handler {
	return &endpoint{c: c, serve: c.serveAdmin}
}

func (c *Checker) serveAdmin(w http.ResponseWriter, r *http.Request) {
	if _, ok := c.admit(w, r, false); !ok {
		return
	}
	s, code, ok := c.checkRead(w, r)
	if !ok {
		return
	}
	writeJSON(w, code, healthJSON, c.healthBody(s))
}

// DrainHandler returns the drain endpoint, for /drain on an admin
// listener ([ServeConfig].Admin):
//
//   - POST drains ([Checker.Drain]) for the caller, bounded by the
//     optional "timeout" query parameter (a Go duration such as "30s") or
//     Config.DrainTimeout. 200 with {"result":"drained",...} when the
//     traffic is gone; 409 with the holder when another owner holds the
//     drain; 503 with what was still in use when the drain did not complete
//     (the service stays Disabling); 400 for a missing or invalid owner or
//     timeout. The drain stops if the client disconnects.
//   - DELETE enables ([Checker.Enable]) for the caller, who must hold the
//     drain (409 otherwise); 200 with the state.
//   - GET and HEAD return the drain state as JSON, without side effects.
//
// Other methods get 405. Every answer is JSON.
//
// # Who may call it
//
// Whoever can drain can take the service out of traffic, so the handler
// fails closed:
//
//   - With [Config].Authorize set, Authorize decides every request, local
//     ones too, and the owner of a drain or an enable is the owner it
//     returns: the X-Drain-Owner header and the "owner" parameter are
//     ignored, so that no caller can claim another's drain.
//   - Without it, the handler answers local callers only: requests that
//     carry no proxy header (Forwarded, Via, X-Forwarded-*, X-Real-Ip,
//     X-Envoy-*) and come over a Unix socket (its file's permissions
//     decide), or over a connection whose both ends are loopback
//     addresses (127.0.0.0/8, ::1) naming a loopback host (localhost,
//     127.0.0.1, [::1]: against DNS rebinding). The owner is then the one
//     the caller names: the X-Drain-Owner header or the "owner" parameter.
//     A proxy on the same host that connects over loopback and strips
//     those headers (a service-mesh sidecar forwarding to 127.0.0.1) makes
//     every request local: behind one, serve this handler on a listener it
//     does not forward to, or set Authorize.
//
// Anything else gets 403 {"error":"readiness: forbidden"}, and so does a
// POST or DELETE from a browser page of another origin
// (http.CrossOriginProtection). Refusals are logged (at most one line a
// second, with the count of those left out), never explained to the caller.
// From the host, or through kubectl port-forward:
//
//	curl -fsS -X POST -H 'X-Drain-Owner: deploy-1234' 'http://localhost:8081/drain?timeout=2m'  # 200 drained | 409 locked | 503 not drained: abort
//	# ... deploy ...
//	curl -fsS -X DELETE -H 'X-Drain-Owner: deploy-1234' http://localhost:8081/drain
func (c *Checker) DrainHandler() http.Handler {
	return &endpoint{c: c, serve: c.serveDrain}
}

func (c *Checker) serveDrain(w http.ResponseWriter, r *http.Request) {
	change := r.Method == http.MethodPost || r.Method == http.MethodDelete
	owner, ok := c.admit(w, r, change)
	if !ok {
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		writeJSON(w, http.StatusOK, "application/json", drainBody(c.Status()))
		return
	case http.MethodPost, http.MethodDelete:
	default:
		w.Header().Set("Allow", "GET, HEAD, POST, DELETE")
		writeJSON(w, http.StatusMethodNotAllowed, "application/json", errorBody{Error: "readiness: method not allowed"})
		return
	}
	c.log.LogAttrs(r.Context(), slog.LevelInfo, "readiness: drain endpoint called",
		slog.String("method", r.Method), slog.String("owner", owner), slog.String("remote", r.RemoteAddr),
		slog.Bool("authorized", c.cfg.Authorize != nil))
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
	default: // not reached: Drain and enable return only the errors above
		body.Error = "readiness: internal error"
	}
	writeJSON(w, code, "application/json", body)
}

// ownerOf returns the owner a local request names, checked.
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

// crossOrigin refuses the POST and DELETE of browser pages of other
// origins (CSRF, also against a local listener).
var crossOrigin http.CrossOriginProtection

// admit decides whether r may use an admin handler (AdminHandler,
// DrainHandler), answering the refusal itself (403, or 400 for a local
// change that names no valid owner). For a change (POST, DELETE) it
// returns the owner: Config.Authorize's, or the one a local caller names.
func (c *Checker) admit(w http.ResponseWriter, r *http.Request, change bool) (owner string, ok bool) {
	if change {
		if err := crossOrigin.Check(r); err != nil {
			c.refuse(w, r, "a cross-origin browser request", nil)
			return "", false
		}
	}
	if c.cfg.Authorize == nil {
		if !isLocal(r) {
			c.refuse(w, r, "not a local request, and Config.Authorize is not set", nil)
			return "", false
		}
		if !change {
			return "", true
		}
		owner, err := ownerOf(r)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, "application/json", errorBody{Error: err.Error()})
			return "", false
		}
		return owner, true
	}
	owner, err := c.authorize(r)
	if err != nil {
		c.refuse(w, r, "Config.Authorize refused it", err)
		return "", false
	}
	if change {
		if err := checkOwner(owner); err != nil {
			c.refuse(w, r, "Config.Authorize admitted it with an invalid owner", err)
			return "", false
		}
	}
	return owner, true
}

// errAuthorizePanicked is the refusal of a request whose Config.Authorize
// panicked.
var errAuthorizePanicked = errors.New("readiness: Config.Authorize panicked")

// authorize calls Config.Authorize, a panic of which refuses the request.
func (c *Checker) authorize(r *http.Request) (owner string, err error) {
	defer func() {
		if v := recover(); v != nil {
			owner, err = "", fmt.Errorf("%w (a %T)", errAuthorizePanicked, v) // its type: the value may hold anything
		}
	}()
	return c.cfg.Authorize(r)
}

// refusals limits the log lines of refused admin requests to one a second.
type refusals struct {
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

// refuse answers 403 and logs why, at most once a second (with the count
// of the refusals left out since the last line). err is Config.Authorize's.
func (c *Checker) refuse(w http.ResponseWriter, r *http.Request, why string, err error) {
	writeJSON(w, http.StatusForbidden, "application/json", errorBody{Error: "readiness: forbidden"})
	now := time.Now()
	rl := &c.refused
	rl.mu.Lock()
	if !rl.last.IsZero() && now.Sub(rl.last) < time.Second {
		rl.suppressed++
		rl.mu.Unlock()
		return
	}
	suppressed := rl.suppressed
	rl.last, rl.suppressed = now, 0
	rl.mu.Unlock()
	attrs := []slog.Attr{slog.String("why", why), slog.String("method", r.Method),
		slog.String("remote", r.RemoteAddr), slog.Int("suppressed", suppressed)}
	if err != nil {
		attrs = append(attrs, slog.String("error", c.redact(err.Error())))
	}
	c.log.LogAttrs(r.Context(), slog.LevelWarn, "readiness: admin request refused", attrs...)
}

// isLocal reports whether r comes from this host (see DrainHandler): over
// a Unix socket, or over loopback at both ends, naming a loopback host,
// through no proxy.
func isLocal(r *http.Request) bool {
	for k := range r.Header {
		switch k := http.CanonicalHeaderKey(k); {
		case k == "Forwarded", k == "Via", k == "X-Real-Ip",
			strings.HasPrefix(k, "X-Forwarded-"), strings.HasPrefix(k, "X-Envoy-"):
			return false
		}
	}
	la, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if _, unix := la.(*net.UnixAddr); unix {
		return true // no browser reaches a Unix socket: the socket's permissions decide
	}
	if !loopback(r.RemoteAddr) || (la != nil && !loopback(la.String())) {
		return false
	}
	return r.Host == "" || loopbackHost(r.Host)
}

// loopback reports whether hostport (an address "ip:port") is a loopback
// address.
func loopback(hostport string) bool {
	ap, err := netip.ParseAddrPort(hostport)
	return err == nil && ap.Addr().Unmap().IsLoopback()
}

// loopbackHost reports whether the Host header names this host:
// localhost, a name under .localhost, or a loopback address.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// The JSON bodies of the admin handlers.

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

type failoverJSON struct {
	ComponentID   string `json:"componentId"`
	ComponentType string `json:"componentType"`
	Status        string `json:"status"`
	Writer        string `json:"writer"`
	Routing       string `json:"routing"`
	Failovers     int    `json:"failovers"`
	Off           string `json:"off,omitempty"`    // failover.Status.Off: why routing is off
	Reason        string `json:"reason,omitempty"` // the classified cause of the monitor's last error
}

type blueGreenJSON struct {
	ComponentID    string              `json:"componentId"`
	ComponentType  string              `json:"componentType"`
	Status         string              `json:"status"`
	Phase          bluegreen.Phase     `json:"phase"`
	Routing        bluegreen.Phase     `json:"routing"`
	Normal         bool                `json:"normal"`
	Mapping        []bluegreen.Mapping `json:"mapping,omitempty"`
	MappingOmitted int                 `json:"mappingOmitted,omitempty"`
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// healthBody is the admin body of s, which c's Status returned.
func (c *Checker) healthBody(s Status) healthBodyJSON {
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
	for i, t := range s.Targets {
		startups = append(startups, startupBody(t))
		dbs = append(dbs, databaseBody(t))
		conns = append(conns, connectionsBody(t))
		if bg := t.BlueGreen; bg != nil {
			bgs = append(bgs, blueGreenBody(t.Name, bg))
		}
		if fo := t.Failover; fo != nil {
			fos = append(fos, failoverBody(t.Name, fo, c.targets[i]))
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

func blueGreenBody(name string, bg *bluegreen.Status) blueGreenJSON {
	// warn while a switchover is under way (requests may be held), never
	// fail: the routing keeps the service correct through it.
	st := string(Pass)
	if bg.Phase.Active() && bg.Phase != bluegreen.Completed {
		st = string(Warn)
	}
	b := blueGreenJSON{ComponentID: name, ComponentType: "component", Status: st, Phase: bg.Phase,
		Routing: bg.Routing.Phase, Normal: bg.Routing.Normal, Mapping: bg.Mapping}
	if n := len(b.Mapping); n > maxMapping {
		b.Mapping, b.MappingOmitted = b.Mapping[:maxMapping], n-maxMapping
	}
	return b
}

// failoverBody is the failover entry of target t, whose monitor's status is
// fo: its last error as its classified cause, never its text.
func failoverBody(name string, fo *failover.Status, t *target) failoverJSON {
	// warn while the writer is down or being rerouted to, or while the
	// monitor cannot read the topology (routing off), never fail.
	st := string(Pass)
	if fo.Routing != "normal" || fo.Off != "" {
		st = string(Warn)
	}
	b := failoverJSON{ComponentID: name, ComponentType: "component", Status: st, Writer: fo.Writer,
		Routing: fo.Routing, Failovers: fo.Failovers, Off: fo.Off}
	if fo.Error != "" {
		b.Reason = t.failoverCause().String()
	}
	return b
}

// failoverCause classifies the last error of t's failover monitor:
// Fatal "unknown" when the monitor does not tell it (or it just cleared).
func (t *target) failoverCause() classify.Verdict {
	m, ok := t.factory.Failover(t.pool).(interface{ Err() error })
	if !ok {
		return classify.Verdict{Class: classify.Fatal, Reason: "unknown"}
	}
	err := m.Err()
	if err == nil {
		return classify.Verdict{Class: classify.Fatal, Reason: "unknown"}
	}
	return t.factory.Classify(err)
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
