package a10test

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/holdfast-db/holdfast/lb/internal/lbfake"
)

// Defaults of [Options].
const (
	DefaultUsername    = "admin"
	DefaultPassword    = "a10-fake-password"
	DefaultIdleTimeout = 10 * time.Minute
	SharedPartition    = "shared"
)

// ACOS error codes the fake answers with.
const (
	CodeNotFound    = 1023460352
	CodeNoPrivilege = 419545856
	CodeSystemBusy  = 1023464193
	// CodeInvalidValue is the fake's own code for a rejected value [not a
	// documented ACOS code].
	CodeInvalidValue = 1023590400
)

// Options configures [New]. The zero value is usable.
type Options struct {
	// Username and Password are the one account the fake accepts.
	// Defaults DefaultUsername and DefaultPassword.
	Username string
	Password string
	// IdleTimeout ends a session not used for this long. Default
	// DefaultIdleTimeout.
	IdleTimeout time.Duration
	// Partitions lists the partitions besides "shared" that
	// /axapi/v3/active-partition accepts.
	Partitions []string
	// Now is the clock sessions idle by. Default time.Now.
	Now func() time.Time
	// EchoBody makes error answers quote the request body, so that a
	// test can check that a client redacts what comes back.
	EchoBody bool
	// PlainHTTP serves plain HTTP instead of TLS, for tests of a client
	// that must refuse it (the login sends the password). By default the
	// fake serves TLS with httptest's self-signed certificate, which
	// Client trusts and CertificatePEM returns.
	PlainHTTP bool
}

// Real is a real server (slb server) to add to the fake.
type Real struct {
	// Partition holds the server. Default "shared".
	Partition string
	// Host is the IP address. Default "10.0.0.1".
	Host string
	// Conns is the server's current connections while enabled.
	Conns int64
	// Decay is what successive stats reads report once the server is
	// disabled: one value per read, the last repeating; empty means 0.
	Decay []int64
	// StatsDisabled sets stats-data-action to stats-data-disable: every
	// counter then reads 0, whatever the traffic.
	StatsDisabled bool
	// Ports of the server.
	Ports []Port
}

// Port is a real server's port.
type Port struct {
	Number        int
	Protocol      string // "tcp" (default) or "udp"
	Conns         int64
	Decay         []int64
	StatsDisabled bool
}

// FaultKind is what an injected [Fault] does.
type FaultKind = lbfake.FaultKind

// Fault kinds.
const (
	// ExpireSession ends the session the request carries, which then
	// fails with 401 "Invalid admin session.".
	ExpireSession = lbfake.ExpireSession
	// Busy answers HTTP 400 with code 1023464193 (system is busy): a
	// client must classify by the code [the HTTP status ACOS uses is
	// unverified].
	Busy = lbfake.Busy
	// Denied answers 400 with code 419545856, "No write privilege of this
	// admin session.".
	Denied = lbfake.Denied
	// NotFound answers 404 with code 1023460352.
	NotFound = lbfake.NotFound
	// ServerError answers 500.
	ServerError = lbfake.ServerError
	// Slow waits Fault.Delay, then answers normally.
	Slow = lbfake.Slow
)

// Fault is injected with [Server.Inject]. It applies to the requests whose
// method and path match, after skipping Skip of them, Times times (0 means
// once; < 0 means every later one). Method "" matches any method; Path is
// a substring of the request path, "" matching any; Delay is for Slow.
type Fault = lbfake.Fault

// Request is a request the fake received: Method, Path, Header and Body.
type Request = lbfake.Request

// core is the server the vendor fakes share; embedded under this name,
// it gives Server its methods without a field of an internal type.
type core = lbfake.Server

// Server is a fake ACOS aXAPI v3 on an httptest server. Create it with
// [New] and Close it. It is safe for concurrent use.
//
// Its core, shared with the other vendor's fake, gives it these methods:
//
//   - URL returns the base URL, "https://127.0.0.1:PORT" ("http://" with
//     [Options].PlainHTTP), Client an HTTP client for the fake that
//     trusts its certificate (closed with it), and CertificatePEM the
//     certificate, for a CA file;
//   - Close ends held and slow requests, then stops the server; it is
//     idempotent;
//   - Inject adds a [Fault], and Clear removes every fault and hold;
//   - Hold(path, n, wait) makes the next requests whose path contains
//     path wait until n of them are waiting at once, or until one has
//     waited for wait; then all are released and the hold is over. With
//     it a test can prove that requests overlap, and that no more than
//     n-1 do when a wait runs out;
//   - Requests returns the requests received so far, in order, and
//     Count(method, path) how many had the method ("" for any) and a path
//     containing path;
//   - MaxInFlight returns the largest number of requests being served at
//     once so far.
type Server struct {
	core
	opts Options

	mu       sync.Mutex
	sessions map[string]*session
	servers  map[string]*real // by partition + "/" + name
	logins   int
}

type session struct {
	user      string
	partition string
	lastUsed  time.Time
}

type counter struct {
	action   string
	statsOff bool
	conns    int64
	decay    []int64
	decayIdx int
}

type real struct {
	name string
	host string
	counter
	ports []*port
}

type port struct {
	number   int
	protocol string
	counter
}

// New starts a fake ACOS device.
func New(opts Options) *Server {
	opts.Username = cmp.Or(opts.Username, DefaultUsername)
	opts.Password = cmp.Or(opts.Password, DefaultPassword)
	opts.IdleTimeout = cmp.Or(opts.IdleTimeout, DefaultIdleTimeout)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Server{opts: opts, sessions: map[string]*session{}, servers: map[string]*real{}}
	lbfake.Start(&s.core, s.serve, opts.PlainHTTP)
	return s
}

// AddServer adds a real server, enabled.
func (s *Server) AddServer(name string, r Real) {
	r.Partition = cmp.Or(r.Partition, SharedPartition)
	r.Host = cmp.Or(r.Host, "10.0.0.1")
	rs := &real{name: name, host: r.Host, counter: counter{action: "enable", statsOff: r.StatsDisabled, conns: r.Conns, decay: r.Decay}}
	for _, p := range r.Ports {
		p.Protocol = cmp.Or(p.Protocol, "tcp")
		rs.ports = append(rs.ports, &port{number: p.Number, protocol: p.Protocol, counter: counter{action: "enable", statsOff: p.StatsDisabled, conns: p.Conns, decay: p.Decay}})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.servers[r.Partition+"/"+name] = rs
}

// Action returns the server's action ("enable", "disable",
// "disable-with-health-check"), or its port's when port is not 0, and
// false if there is no such object. The partition is "shared" unless
// given.
func (s *Server) Action(name string, portNumber int, partition ...string) (string, bool) {
	part := SharedPartition
	if len(partition) > 0 {
		part = partition[0]
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rs, ok := s.servers[part+"/"+name]
	if !ok {
		return "", false
	}
	if portNumber == 0 {
		return rs.action, true
	}
	for _, p := range rs.ports {
		if p.number == portNumber {
			return p.action, true
		}
	}
	return "", false
}

// SetStatsDisabled turns the server's statistics collection off or on.
func (s *Server) SetStatsDisabled(name string, off bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, rs := range s.servers {
		if strings.HasSuffix(k, "/"+name) {
			rs.statsOff = off
		}
	}
}

// Logins returns the number of successful authentications.
func (s *Server) Logins() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logins
}

// ActiveSessions returns the number of sessions neither logged off nor
// idle past the timeout.
func (s *Server) ActiveSessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opts.Now()
	n := 0
	for _, ss := range s.sessions {
		if now.Sub(ss.lastUsed) <= s.opts.IdleTimeout {
			n++
		}
	}
	return n
}

// ExpireSessions ends every session now.
func (s *Server) ExpireSessions() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.sessions)
}

// serve answers a request once lbfake is done with holds and Slow faults.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, body []byte, fault FaultKind) {
	switch fault {
	case ExpireSession:
		s.mu.Lock()
		delete(s.sessions, signature(r))
		s.mu.Unlock()
	case Busy:
		s.fail(w, 400, CodeSystemBusy, "System is busy. Please try again later.", body)
		return
	case Denied:
		s.fail(w, 400, CodeNoPrivilege, "No write privilege of this admin session.", body)
		return
	case NotFound:
		s.fail(w, 404, CodeNotFound, "Object specified does not exist", body)
		return
	case ServerError:
		s.fail(w, 500, 0, "Internal error", body)
		return
	}
	s.route(w, r, body)
}

// fail writes an aXAPI error body.
func (s *Server) fail(w http.ResponseWriter, status int, code int64, msg string, body []byte) {
	if s.opts.EchoBody && len(body) > 0 {
		msg += " (request: " + string(body) + ")"
	}
	writeJSON(w, status, map[string]any{"response": map[string]any{"status": "fail", "err": map[string]any{"code": code, "from": "CM", "msg": msg}}})
}

func (s *Server) authFail(w http.ResponseWriter, status int, msg string, body []byte) {
	if s.opts.EchoBody && len(body) > 0 {
		msg += " (request: " + string(body) + ")"
	}
	writeJSON(w, status, map[string]any{"authorizationschema": map[string]any{
		"code": status, "error": msg, "auth_uri": "/axapi/v3/auth", "logoff_uri": "/axapi/v3/logoff",
		"username": "required", "password": "required",
	}})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func signature(r *http.Request) string {
	sig, _ := strings.CutPrefix(r.Header.Get("Authorization"), "A10 ")
	return sig
}

func (s *Server) route(w http.ResponseWriter, r *http.Request, body []byte) {
	p := r.URL.Path
	if p == "/axapi/v3/auth" && r.Method == http.MethodPost {
		s.auth(w, body)
		return
	}
	ss, ok := s.authenticate(r)
	if !ok {
		s.authFail(w, 401, "Invalid admin session.", nil)
		return
	}
	switch {
	case p == "/axapi/v3/logoff" && r.Method == http.MethodPost:
		s.mu.Lock()
		delete(s.sessions, signature(r))
		s.mu.Unlock()
		writeJSON(w, 200, map[string]any{"response": map[string]string{"status": "OK"}})
	case strings.HasPrefix(p, "/axapi/v3/active-partition/") && r.Method == http.MethodPost:
		name := strings.TrimPrefix(p, "/axapi/v3/active-partition/")
		if !s.knownPartition(name) {
			s.fail(w, 404, CodeNotFound, "Object specified does not exist (object: partition)", nil)
			return
		}
		s.mu.Lock()
		ss.partition = name
		s.mu.Unlock()
		writeJSON(w, 200, map[string]any{"response": map[string]string{"status": "OK"}})
	case p == "/axapi/v3/version/oper" && r.Method == http.MethodGet:
		writeJSON(w, 200, map[string]any{"version": map[string]any{"oper": map[string]any{"sw-version": "5.2.1-P9, build 117 (Feb-10-2024,10:03)", "hw-platform": "fake"}}})
	case strings.HasPrefix(p, "/axapi/v3/slb/server/"):
		s.slbServer(w, r, ss, strings.TrimPrefix(p, "/axapi/v3/slb/server/"), body)
	default:
		s.fail(w, 404, CodeNotFound, "Object specified does not exist", nil)
	}
}

func (s *Server) knownPartition(name string) bool {
	if name == SharedPartition {
		return true
	}
	for _, p := range s.opts.Partitions {
		if p == name {
			return true
		}
	}
	return false
}

// authenticate checks the signature and the idle timeout.
func (s *Server) authenticate(r *http.Request) (*session, bool) {
	sig := signature(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.sessions[sig]
	if !ok {
		return nil, false
	}
	now := s.opts.Now()
	if now.Sub(ss.lastUsed) > s.opts.IdleTimeout {
		delete(s.sessions, sig)
		return nil, false
	}
	ss.lastUsed = now
	return ss, true
}

func (s *Server) auth(w http.ResponseWriter, body []byte) {
	var req struct {
		Credentials struct {
			Username string `json:"username"`
			Password string `json:"password"`
		} `json:"credentials"`
	}
	if json.Unmarshal(body, &req) != nil || req.Credentials.Username != s.opts.Username || req.Credentials.Password != s.opts.Password {
		s.authFail(w, 403, "Incorrect user name or password", body)
		return
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	sig := hex.EncodeToString(b)
	s.mu.Lock()
	s.sessions[sig] = &session{user: req.Credentials.Username, partition: SharedPartition, lastUsed: s.opts.Now()}
	s.logins++
	s.mu.Unlock()
	writeJSON(w, 200, map[string]any{"authresponse": map[string]string{
		"signature": sig, "description": "the signature should be set in Authorization header for following request.",
	}})
}

// slbServer serves NAME[/oper|/stats] and NAME/port/P+PROTO[/oper|/stats].
func (s *Server) slbServer(w http.ResponseWriter, r *http.Request, ss *session, rest string, body []byte) {
	name, portSeg, isPort := strings.Cut(rest, "/port/")
	sub := ""
	target := name
	if isPort {
		target = portSeg
	}
	for _, suffix := range []string{"/oper", "/stats"} {
		if t, ok := strings.CutSuffix(target, suffix); ok {
			target, sub = t, suffix
		}
	}
	if !isPort {
		name = target
	}
	s.mu.Lock()
	rs, ok := s.servers[ss.partition+"/"+name]
	s.mu.Unlock()
	if !ok {
		s.fail(w, 404, CodeNotFound, "Object specified does not exist (object: server)", nil)
		return
	}
	if !isPort {
		s.serverCall(w, r, rs, sub, body)
		return
	}
	num, proto, _ := strings.Cut(target, "+")
	n, err := strconv.Atoi(num)
	var pt *port
	s.mu.Lock()
	for _, p := range rs.ports {
		if err == nil && p.number == n && p.protocol == proto {
			pt = p
		}
	}
	s.mu.Unlock()
	if pt == nil {
		s.fail(w, 404, CodeNotFound, "Object specified does not exist (object: port)", nil)
		return
	}
	s.portCall(w, r, rs, pt, sub, body)
}

func validAction(a string) bool {
	return a == "enable" || a == "disable" || a == "disable-with-health-check"
}

func validStatsAction(a string) bool {
	return a == "stats-data-enable" || a == "stats-data-disable"
}

func operState(action string) string {
	if action == "enable" {
		return "Up"
	}
	return "Disabled"
}

// read returns what a stats read reports, advancing the decay. Called
// with mu.
func (c *counter) read() int64 {
	if c.statsOff {
		return 0 // the pitfall: no collection, every counter 0
	}
	if c.action == "enable" {
		return c.conns
	}
	if len(c.decay) == 0 {
		return 0
	}
	v := c.decay[min(c.decayIdx, len(c.decay)-1)]
	c.decayIdx++
	return v
}

func (c *counter) setAction(a string) {
	if a == "enable" && c.action != "enable" {
		c.decayIdx = 0
	}
	c.action = a
}

func statsAction(off bool) string {
	if off {
		return "stats-data-disable"
	}
	return "stats-data-enable"
}

// serverJSON is the server object. Called with mu.
func serverJSON(rs *real) map[string]any {
	ports := []any{}
	for _, p := range rs.ports {
		ports = append(ports, portJSON(rs, p))
	}
	return map[string]any{"server": map[string]any{
		"name": rs.name, "host": rs.host, "action": rs.action, "template-server": "default",
		"health-check-disable": 0, "conn-limit": 64000000, "no-logging": 0, "weight": 1,
		"slow-start": 0, "spoofing-cache": 0, "stats-data-action": statsAction(rs.statsOff),
		"extended-stats": 0, "uuid": "a1b2c3d4-0000-11ee-8000-" + hex.EncodeToString([]byte(rs.name + "000000"))[:12],
		"port-list": ports, "a10-url": "/axapi/v3/slb/server/" + rs.name,
	}}
}

func portJSON(rs *real, p *port) map[string]any {
	return map[string]any{
		"port-number": p.number, "protocol": p.protocol, "range": 0, "template-port": "default",
		"action": p.action, "no-ssl": 0, "health-check-disable": 0, "weight": 1, "conn-limit": 64000000,
		"no-logging": 0, "stats-data-action": statsAction(p.statsOff), "extended-stats": 0,
		"a10-url": "/axapi/v3/slb/server/" + rs.name + "/port/" + strconv.Itoa(p.number) + "+" + p.protocol,
	}
}

// decode reads a POST or PUT body {"<key>": {...}}; when it is not one,
// it answers 400 and returns false.
func (s *Server) decode(w http.ResponseWriter, body []byte, key string) (map[string]any, bool) {
	var req map[string]json.RawMessage
	var obj map[string]any
	if json.Unmarshal(body, &req) != nil || json.Unmarshal(req[key], &obj) != nil || obj == nil {
		s.fail(w, 400, CodeInvalidValue, "Invalid JSON body", body)
		return nil, false
	}
	return obj, true
}

func (s *Server) serverCall(w http.ResponseWriter, r *http.Request, rs *real, sub string, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case sub == "" && r.Method == http.MethodGet:
		writeJSON(w, 200, serverJSON(rs))
	case sub == "" && (r.Method == http.MethodPost || r.Method == http.MethodPut):
		obj, ok := s.decode(w, body, "server")
		if !ok {
			return
		}
		action, _ := obj["action"].(string)
		stats, _ := obj["stats-data-action"].(string)
		if r.Method == http.MethodPut {
			// PUT replaces the object: what the body omits is reset, port
			// list included. Clients must modify with POST.
			action = cmp.Or(action, "enable")
			stats = cmp.Or(stats, "stats-data-enable")
			rs.ports = nil
		}
		if action != "" && !validAction(action) {
			s.fail(w, 400, CodeInvalidValue, "Invalid value for action: "+action, nil)
			return
		}
		if stats != "" && !validStatsAction(stats) {
			s.fail(w, 400, CodeInvalidValue, "Invalid value for stats-data-action: "+stats, nil)
			return
		}
		if action != "" {
			rs.setAction(action)
		}
		if stats != "" {
			rs.statsOff = stats == "stats-data-disable"
		}
		writeJSON(w, 200, serverJSON(rs))
	case sub == "/oper" && r.Method == http.MethodGet:
		ports := []any{}
		for _, p := range rs.ports {
			ports = append(ports, map[string]any{"oper": map[string]string{"state": operState(p.action)}, "port-number": p.number, "protocol": p.protocol,
				"a10-url": "/axapi/v3/slb/server/" + rs.name + "/port/" + strconv.Itoa(p.number) + "+" + p.protocol + "/oper"})
		}
		writeJSON(w, 200, map[string]any{"server": map[string]any{"oper": map[string]string{"state": operState(rs.action)}, "port-list": ports,
			"a10-url": "/axapi/v3/slb/server/" + rs.name + "/oper", "name": rs.name}})
	case sub == "/stats" && r.Method == http.MethodGet:
		ports := []any{}
		for _, p := range rs.ports {
			ports = append(ports, map[string]any{"stats": portStats(p.peek()), "port-number": p.number, "protocol": p.protocol})
		}
		n := rs.read()
		writeJSON(w, 200, map[string]any{"server": map[string]any{"stats": map[string]int64{
			"curr-conn": n, "total-conn": 0, "fwd-pkt": 0, "rev-pkt": 0, "peak-conn": n,
		}, "port-list": ports, "name": rs.name}})
	default:
		s.fail(w, 405, CodeInvalidValue, "Method not allowed", nil)
	}
}

// peek returns the stats value without advancing the decay.
func (c *counter) peek() int64 {
	saved := c.decayIdx
	v := c.read()
	c.decayIdx = saved
	return v
}

func portStats(n int64) map[string]int64 {
	return map[string]int64{"curr_conn": n, "total_conn": 0, "fwd_pkt": 0, "rev_pkt": 0, "peak_conn": n}
}

func (s *Server) portCall(w http.ResponseWriter, r *http.Request, rs *real, p *port, sub string, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case sub == "" && r.Method == http.MethodGet:
		writeJSON(w, 200, map[string]any{"port": portJSON(rs, p)})
	case sub == "" && r.Method == http.MethodPost:
		obj, ok := s.decode(w, body, "port")
		if !ok {
			return
		}
		action, _ := obj["action"].(string)
		if action != "" && !validAction(action) {
			s.fail(w, 400, CodeInvalidValue, "Invalid value for action: "+action, nil)
			return
		}
		if stats, _ := obj["stats-data-action"].(string); stats != "" {
			if !validStatsAction(stats) {
				s.fail(w, 400, CodeInvalidValue, "Invalid value for stats-data-action: "+stats, nil)
				return
			}
			p.statsOff = stats == "stats-data-disable"
		}
		if action != "" {
			p.setAction(action)
		}
		writeJSON(w, 200, map[string]any{"port": portJSON(rs, p)})
	case sub == "/oper" && r.Method == http.MethodGet:
		writeJSON(w, 200, map[string]any{"port": map[string]any{"oper": map[string]string{"state": operState(p.action)}, "port-number": p.number, "protocol": p.protocol}})
	case sub == "/stats" && r.Method == http.MethodGet:
		writeJSON(w, 200, map[string]any{"port": map[string]any{"stats": portStats(p.read()), "port-number": p.number, "protocol": p.protocol}})
	default:
		s.fail(w, 405, CodeInvalidValue, "Method not allowed", nil)
	}
}
