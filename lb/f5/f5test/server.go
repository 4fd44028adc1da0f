package f5test

import (
	"cmp"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/holdfast-db/holdfast/lb/internal/lbfake"
)

// Defaults of [Options], and BIG-IP's limits.
const (
	DefaultUsername      = "admin"
	DefaultPassword      = "f5-fake-password"
	DefaultPartition     = "Common"
	DefaultTokenTimeout  = 1200 * time.Second  // a new token's lifetime
	AbsoluteTokenTimeout = 36000 * time.Second // no token lives longer
	DefaultMaxTokens     = 100                 // active tokens per user
)

// Options configures [New]. The zero value is usable.
type Options struct {
	// Username and Password are the one account the fake accepts.
	// Defaults DefaultUsername and DefaultPassword.
	Username string
	Password string
	// Partition is the one partition holding the objects. Default
	// DefaultPartition.
	Partition string
	// TokenTimeout is a new token's lifetime. Default DefaultTokenTimeout.
	TokenTimeout time.Duration
	// MaxTokens is the number of active tokens per user; login fails
	// with 400 beyond it. Default DefaultMaxTokens.
	MaxTokens int
	// Now is the clock tokens expire by. Default time.Now.
	Now func() time.Time
	// EchoBody makes error answers quote the request body, as some
	// devices quote invalid input. It lets a test check that a client
	// redacts what comes back (a login body holds the password).
	EchoBody bool
	// PlainHTTP serves plain HTTP instead of TLS, for tests of a client
	// that must refuse it (the login sends the password). By default the
	// fake serves TLS with httptest's self-signed certificate, which
	// Client trusts and CertificatePEM returns.
	PlainHTTP bool
}

// Member is a pool member or node to add to the fake.
type Member struct {
	// Address is the IP address reported. Default "10.0.0.1".
	Address string
	// Conns is the connection count while the member is enabled.
	Conns int64
	// Decay is what successive reads of the stats report once the member
	// no longer takes new connections (disabled or forced offline): one
	// value per read, the last one repeating. Empty means 0 at once. It
	// starts over each time the member is enabled again.
	Decay []int64
	// Monitor attaches a health monitor: an enabled member then reads back
	// session "monitor-enabled" and state "up" instead of "user-enabled"
	// and "unchecked", as on a real BIG-IP.
	Monitor bool
	// SplitCounters reports serverside.curConns as 32-bit high and low
	// halves instead of a single value.
	SplitCounters bool
}

// FaultKind is what an injected [Fault] does.
type FaultKind = lbfake.FaultKind

// Fault kinds.
const (
	// ExpireToken deletes the token the request carries, which then fails
	// with 401 "X-F5-Auth-Token does not exist.", as when a token expires.
	ExpireToken = lbfake.ExpireSession
	// Busy answers 503, as BIG-IP does while restarting.
	Busy = lbfake.Busy
	// Denied answers 401 "Authorization failed", as BIG-IP does when the
	// account lacks the privilege (a fresh login does not help).
	Denied = lbfake.Denied
	// NotFound answers 404.
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

// State is a member's state in the fake, as written by the last PATCH.
type State struct {
	Session string // "user-enabled" or "user-disabled"
	State   string // "user-up" or "user-down"
}

// core is the server the vendor fakes share; embedded under this name,
// it gives Server its methods without a field of an internal type.
type core = lbfake.Server

// Server is a fake BIG-IP iControl REST API on an httptest server.
// Create it with [New] and Close it. It is safe for concurrent use.
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

	mu      sync.Mutex
	tokens  map[string]*token
	members map[string]*member // by kind+" "+fullPath
	logins  int
}

type token struct {
	user    string
	issued  time.Time
	expires time.Time
	timeout time.Duration
}

type member struct {
	cfg      Member
	name     string // "web-1:80" or "web-1"
	pool     string // "" for a node
	session  string
	state    string
	decayIdx int
}

// New starts a fake BIG-IP.
func New(opts Options) *Server {
	opts.Username = cmp.Or(opts.Username, DefaultUsername)
	opts.Password = cmp.Or(opts.Password, DefaultPassword)
	opts.Partition = cmp.Or(opts.Partition, DefaultPartition)
	opts.TokenTimeout = cmp.Or(opts.TokenTimeout, DefaultTokenTimeout)
	opts.MaxTokens = cmp.Or(opts.MaxTokens, DefaultMaxTokens)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Server{opts: opts, tokens: map[string]*token{}, members: map[string]*member{}}
	lbfake.Start(&s.core, s.serve, opts.PlainHTTP)
	return s
}

// AddPoolMember adds member "node:port" to pool, enabled.
func (s *Server) AddPoolMember(pool, name string, m Member) {
	s.add(pool, name, m)
}

// AddNode adds a node, enabled.
func (s *Server) AddNode(name string, m Member) {
	s.add("", name, m)
}

func (s *Server) add(pool, name string, m Member) {
	m.Address = cmp.Or(m.Address, "10.0.0.1")
	s.mu.Lock()
	defer s.mu.Unlock()
	s.members[s.key(pool, name)] = &member{cfg: m, name: name, pool: pool, session: "user-enabled", state: "user-up"}
}

func (s *Server) key(pool, name string) string {
	p := "/" + s.opts.Partition + "/"
	if pool == "" {
		return "node " + p + name
	}
	return "pool " + p + pool + " " + p + name
}

// MemberState returns the pool member's state as last written, and false
// if there is no such member.
func (s *Server) MemberState(pool, name string) (State, bool) {
	return s.stateOf(pool, name)
}

// NodeState returns the node's state as last written.
func (s *Server) NodeState(name string) (State, bool) {
	return s.stateOf("", name)
}

func (s *Server) stateOf(pool, name string) (State, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.members[s.key(pool, name)]
	if !ok {
		return State{}, false
	}
	return State{Session: m.session, State: m.state}, true
}

// SetConns changes the connections a pool member (pool != "") or node
// has while enabled, and its decay once disabled.
func (s *Server) SetConns(pool, name string, conns int64, decay ...int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.members[s.key(pool, name)]; ok {
		m.cfg.Conns, m.cfg.Decay, m.decayIdx = conns, decay, 0
	}
}

// Logins returns the number of successful logins.
func (s *Server) Logins() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logins
}

// ActiveTokens returns the number of tokens neither deleted nor expired.
func (s *Server) ActiveTokens() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opts.Now()
	n := 0
	for _, t := range s.tokens {
		if now.Before(t.expires) {
			n++
		}
	}
	return n
}

// ExpireTokens makes every token expire now.
func (s *Server) ExpireTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.tokens)
}

// serve answers a request once lbfake is done with holds and Slow faults.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, body []byte, fault FaultKind) {
	switch fault {
	case ExpireToken:
		s.mu.Lock()
		delete(s.tokens, r.Header.Get("X-F5-Auth-Token"))
		s.mu.Unlock()
	case Busy:
		s.fail(w, 503, "Configuration Utility restarting...", body)
		return
	case Denied:
		s.fail(w, 401, "Authorization failed: user=https://localhost/mgmt/shared/authz/users/"+s.opts.Username+" resource="+r.URL.Path+" verb="+r.Method, body)
		return
	case NotFound:
		s.fail(w, 404, "01020036:3: The requested object ("+r.URL.Path+") was not found.", body)
		return
	case ServerError:
		s.fail(w, 500, "java.lang.NullPointerException", body)
		return
	}
	s.route(w, r, body)
}

// fail writes an iControl REST error body.
func (s *Server) fail(w http.ResponseWriter, code int, msg string, body []byte) {
	if s.opts.EchoBody && len(body) > 0 {
		msg += " (request body: " + string(body) + ")"
	}
	writeJSON(w, code, map[string]any{"code": code, "message": msg, "errorStack": []string{}, "apiError": 3})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) route(w http.ResponseWriter, r *http.Request, body []byte) {
	p := r.URL.Path
	switch {
	case p == "/mgmt/shared/authn/login" && r.Method == http.MethodPost:
		s.login(w, body)
		return
	}
	if !s.authenticate(r) {
		s.fail(w, 401, "X-F5-Auth-Token does not exist.", nil)
		return
	}
	switch {
	case strings.HasPrefix(p, "/mgmt/shared/authz/tokens/"):
		s.tokenCall(w, r, strings.TrimPrefix(p, "/mgmt/shared/authz/tokens/"), body)
	case strings.HasPrefix(p, "/mgmt/tm/ltm/pool/"):
		// ~P~pool/members/~P~node:port[/stats]
		rest := strings.TrimPrefix(p, "/mgmt/tm/ltm/pool/")
		pool, after, ok := strings.Cut(rest, "/members/")
		if !ok {
			s.fail(w, 404, "01020036:3: The requested object was not found.", nil)
			return
		}
		s.object(w, r, pool, after, body)
	case strings.HasPrefix(p, "/mgmt/tm/ltm/node/"):
		s.object(w, r, "", strings.TrimPrefix(p, "/mgmt/tm/ltm/node/"), body)
	default:
		s.fail(w, 404, "Public URI path not registered: "+p, nil)
	}
}

// authenticate checks X-F5-Auth-Token.
func (s *Server) authenticate(r *http.Request) bool {
	tok := r.Header.Get("X-F5-Auth-Token")
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tokens[tok]
	if !ok {
		return false
	}
	if !s.opts.Now().Before(t.expires) {
		delete(s.tokens, tok)
		return false
	}
	return true
}

func (s *Server) login(w http.ResponseWriter, body []byte) {
	var req struct {
		Username          string `json:"username"`
		Password          string `json:"password"`
		LoginProviderName string `json:"loginProviderName"`
	}
	if json.Unmarshal(body, &req) != nil {
		s.fail(w, 400, "Found invalid JSON body in the request.", body)
		return
	}
	if req.Username != s.opts.Username || req.Password != s.opts.Password {
		s.fail(w, 401, "Authentication failed.", body)
		return
	}
	s.mu.Lock()
	now := s.opts.Now()
	active := 0
	for _, t := range s.tokens {
		if t.user == req.Username && now.Before(t.expires) {
			active++
		}
	}
	if active >= s.opts.MaxTokens {
		s.mu.Unlock()
		s.fail(w, 400, "user "+req.Username+" has reached maximum active login tokens", nil)
		return
	}
	tok := newToken()
	t := &token{user: req.Username, issued: now, expires: now.Add(s.opts.TokenTimeout), timeout: s.opts.TokenTimeout}
	s.tokens[tok] = t
	s.logins++
	s.mu.Unlock()
	provider := req.LoginProviderName
	provider = cmp.Or(provider, "tmos")
	writeJSON(w, 200, map[string]any{
		"username": req.Username, "loginReference": map[string]string{"link": "https://localhost/mgmt/cm/system/authn/providers/tmos/1f44a60e-11a7-3c51-a49f-82983026b41b/login"},
		"loginProviderName": provider, "token": tokenJSON(tok, t), "generation": 0, "lastUpdateMicros": 0,
	})
}

func tokenJSON(tok string, t *token) map[string]any {
	return map[string]any{
		"token": tok, "name": tok, "userName": t.user, "authProviderName": "tmos",
		"timeout": int64(t.timeout / time.Second), "startTime": t.issued.Format(time.RFC3339Nano),
		"expirationMicros": t.expires.UnixMicro(), "kind": "shared:authz:tokens:authtokenitemstate",
		"selfLink": "https://localhost/mgmt/shared/authz/tokens/" + tok,
	}
}

func newToken() string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	b := make([]byte, 26)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

func (s *Server) tokenCall(w http.ResponseWriter, r *http.Request, tok string, body []byte) {
	s.mu.Lock()
	t, ok := s.tokens[tok]
	if !ok {
		s.mu.Unlock()
		s.fail(w, 404, "Object not found: token "+tok, nil)
		return
	}
	switch r.Method {
	case http.MethodDelete:
		delete(s.tokens, tok)
		s.mu.Unlock()
		writeJSON(w, 200, tokenJSON(tok, t))
	case http.MethodPatch:
		var req struct {
			Timeout *int64 `json:"timeout"`
		}
		if json.Unmarshal(body, &req) != nil || req.Timeout == nil || *req.Timeout <= 0 {
			s.mu.Unlock()
			s.fail(w, 400, "invalid timeout", body)
			return
		}
		d := time.Duration(*req.Timeout) * time.Second
		exp := s.opts.Now().Add(d)
		if exp.Sub(t.issued) > AbsoluteTokenTimeout {
			s.mu.Unlock()
			s.fail(w, 406, "Auth-token absolute timeout (36000 seconds) exceeded", nil)
			return
		}
		t.expires, t.timeout = exp, d
		out := tokenJSON(tok, t)
		s.mu.Unlock()
		writeJSON(w, 200, out)
	default:
		s.mu.Unlock()
		s.fail(w, 405, "method not allowed", nil)
	}
}

// parseName turns "~Common~web" into ("Common", "web").
func parseName(s string) (partition, name string, ok bool) {
	parts := strings.Split(s, "~")
	if len(parts) != 3 || parts[0] != "" {
		return "", "", false
	}
	return parts[1], parts[2], true
}

func (s *Server) object(w http.ResponseWriter, r *http.Request, poolSeg, memberSeg string, body []byte) {
	stats := false
	if m, ok := strings.CutSuffix(memberSeg, "/stats"); ok {
		memberSeg, stats = m, true
	}
	var pool, kind string
	if poolSeg != "" {
		part, name, ok := parseName(poolSeg)
		if !ok || part != s.opts.Partition {
			s.fail(w, 404, "01020036:3: The requested Pool (/"+part+"/"+name+") was not found.", nil)
			return
		}
		pool, kind = name, "Pool Member"
	} else {
		kind = "Node"
	}
	part, name, ok := parseName(memberSeg)
	s.mu.Lock()
	m, found := s.members[s.key(pool, name)]
	s.mu.Unlock()
	if !ok || part != s.opts.Partition || !found {
		what := "/" + part + "/" + name
		if pool != "" {
			what = "/" + s.opts.Partition + "/" + pool + " " + what
		}
		s.fail(w, 404, "01020036:3: The requested "+kind+" ("+what+") was not found.", nil)
		return
	}
	switch {
	case stats && r.Method == http.MethodGet:
		s.writeStats(w, r, m)
	case !stats && r.Method == http.MethodGet:
		s.mu.Lock()
		obj := s.objectJSON(m)
		s.mu.Unlock()
		writeJSON(w, 200, obj)
	case !stats && (r.Method == http.MethodPatch || r.Method == http.MethodPut):
		var req struct {
			Session *string `json:"session"`
			State   *string `json:"state"`
		}
		if json.Unmarshal(body, &req) != nil {
			s.fail(w, 400, "Found invalid JSON body in the request.", body)
			return
		}
		if req.Session != nil && *req.Session != "user-enabled" && *req.Session != "user-disabled" {
			s.fail(w, 400, "invalid property value \"session\":\""+*req.Session+"\"", nil)
			return
		}
		if req.State != nil && *req.State != "user-up" && *req.State != "user-down" {
			s.fail(w, 400, "invalid property value \"state\":\""+*req.State+"\"", nil)
			return
		}
		s.mu.Lock()
		if req.Session != nil {
			m.session = *req.Session
		}
		if req.State != nil {
			m.state = *req.State
		}
		if m.session == "user-enabled" && m.state == "user-up" {
			m.decayIdx = 0
		}
		obj := s.objectJSON(m)
		s.mu.Unlock()
		writeJSON(w, 200, obj)
	default:
		s.fail(w, 405, "method "+r.Method+" not allowed", nil)
	}
}

// readBack returns the (session, state) pair BIG-IP reports.
func readBack(m *member) (session, state string) {
	session, state = m.session, m.state
	if session == "user-enabled" && m.cfg.Monitor {
		session = "monitor-enabled"
	}
	if state == "user-up" {
		state = "unchecked"
		if m.cfg.Monitor {
			state = "up"
		}
	}
	return session, state
}

// objectJSON is the GET answer. Called with mu.
func (s *Server) objectJSON(m *member) map[string]any {
	session, state := readBack(m)
	p := s.opts.Partition
	obj := map[string]any{
		"name": m.name, "partition": p, "fullPath": "/" + p + "/" + m.name, "generation": 1,
		"address": m.cfg.Address, "connectionLimit": 0, "dynamicRatio": 1, "logging": "disabled",
		"rateLimit": "disabled", "ratio": 1, "session": session, "state": state,
	}
	monitor := "none"
	if m.cfg.Monitor {
		monitor = "/Common/tcp"
	}
	if m.pool != "" {
		obj["kind"] = "tm:ltm:pool:members:membersstate"
		obj["selfLink"] = "https://localhost/mgmt/tm/ltm/pool/~" + p + "~" + m.pool + "/members/~" + p + "~" + m.name + "?ver=16.1.3"
		obj["monitor"] = "default"
		obj["priorityGroup"] = 0
		obj["ephemeral"] = "false"
		obj["inheritProfile"] = "enabled"
	} else {
		obj["kind"] = "tm:ltm:node:nodestate"
		obj["selfLink"] = "https://localhost/mgmt/tm/ltm/node/~" + p + "~" + m.name + "?ver=16.1.3"
		obj["monitor"] = monitor
	}
	return obj
}

// conns returns the connections a stats read reports, advancing the decay.
// Called with mu.
func (m *member) conns() int64 {
	if m.session == "user-enabled" && m.state == "user-up" {
		return m.cfg.Conns
	}
	if len(m.cfg.Decay) == 0 {
		return 0
	}
	v := m.cfg.Decay[min(m.decayIdx, len(m.cfg.Decay)-1)]
	m.decayIdx++
	return v
}

func (s *Server) writeStats(w http.ResponseWriter, r *http.Request, m *member) {
	s.mu.Lock()
	n := m.conns()
	session, state := readBack(m)
	s.mu.Unlock()
	p := s.opts.Partition
	avail := "unknown"
	switch {
	case state == "user-down":
		avail = "offline"
	case m.cfg.Monitor:
		avail = "available"
	}
	enabled := "enabled"
	if session == "user-disabled" {
		enabled = "disabled"
	}
	inner := map[string]any{
		"serverside.totConns":      map[string]int64{"value": 42},
		"serverside.maxConns":      map[string]int64{"value": max(n, 3)},
		"curSessions":              map[string]int64{"value": 0},
		"sessionStatus":            map[string]string{"description": enabled},
		"status.availabilityState": map[string]string{"description": avail},
		"status.enabledState":      map[string]string{"description": enabled},
		"status.statusReason":      map[string]string{"description": "fake"},
		"serverside.bitsIn":        map[string]int64{"value": 0},
		"serverside.pktsIn":        map[string]int64{"value": 0},
		"totRequests":              map[string]int64{"value": 0},
		"monitorRule":              map[string]string{"description": "none"},
	}
	if m.cfg.SplitCounters {
		inner["serverside.curConns"] = map[string]uint64{"high": uint64(n) >> 32, "low": uint64(n) & 0xffffffff}
	} else {
		inner["serverside.curConns"] = map[string]int64{"value": n}
	}
	var self, kind string
	if m.pool != "" {
		inner["nodeName"] = map[string]string{"description": "/" + p + "/" + strings.Split(m.name, ":")[0]}
		inner["poolName"] = map[string]string{"description": "/" + p + "/" + m.pool}
		if i := strings.LastIndexByte(m.name, ':'); i >= 0 {
			port, _ := strconv.Atoi(m.name[i+1:])
			inner["port"] = map[string]int{"value": port}
		}
		kind = "tm:ltm:pool:members:membersstats"
		self = "https://localhost/mgmt/tm/ltm/pool/~" + p + "~" + m.pool + "/members/~" + p + "~" + m.name + "/stats"
	} else {
		inner["addr"] = map[string]string{"description": m.cfg.Address}
		inner["monitorStatus"] = map[string]string{"description": avail}
		kind = "tm:ltm:node:nodestats"
		self = "https://localhost/mgmt/tm/ltm/node/~" + p + "~" + m.name + "/stats"
	}
	writeJSON(w, 200, map[string]any{
		"kind": kind, "generation": 1, "selfLink": self + "?ver=16.1.3",
		"entries": map[string]any{self: map[string]any{"nestedStats": map[string]any{"entries": inner}}},
	})
}

// Members lists the objects in the fake, sorted, for debugging.
func (s *Server) Members() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k, m := range s.members {
		out = append(out, fmt.Sprintf("%s session=%s state=%s", k, m.session, m.state))
	}
	sort.Strings(out)
	return out
}
