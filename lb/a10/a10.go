package a10

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/holdfast-db/holdfast/lb"
	"github.com/holdfast-db/holdfast/lb/internal/rest"
)

// Vendor is the name [Client.Vendor] returns.
const Vendor = "a10"

// Defaults of [Config].
const (
	DefaultPartition      = "shared"
	DefaultRequestTimeout = rest.DefaultRequestTimeout
)

// ACOS error codes this package recognises (response.err.code).
const (
	CodeNotFound       = 1023460352 // "Object specified does not exist"
	CodeNoPrivilege    = 419545856  // "No write privilege of this admin session."
	CodeSystemNotReady = 1023464192
	CodeSystemBusy     = 1023464193
	CodeInvalidSession = 419495936
)

// notFoundCodes are the codes acos-client maps to NotFound.
var notFoundCodes = map[int64]bool{CodeNotFound: true, 1023410176: true, 1023410181: true, 1023475722: true, 1207959957: true}

// Config configures [New]. Endpoint, Username and Password are required.
type Config struct {
	// Endpoint is the management address, "https://thunder.example.net".
	Endpoint string
	// Username and Password are the API account's. The password is only
	// sent in the auth request; it never appears in errors.
	Username string
	Password lb.Secret
	// Partition is made active after every login (POST
	// /axapi/v3/active-partition/NAME) unless it is "" or "shared".
	Partition string
	// AllowInsecureHTTP accepts an http:// Endpoint, which New refuses
	// otherwise: the login would send the password, and every later
	// request the session credential, unencrypted.
	AllowInsecureHTTP bool
	// HTTPClient sends the requests. Default: an http.Client with a
	// DefaultRequestTimeout timeout and the default transport.
	HTTPClient *http.Client
}

// Client is an ACOS aXAPI v3 client implementing [lb.Balancer]. It uses
// signature authentication (Authorization: A10 <signature>) and, when the
// device answers that the session is invalid (HTTP 401, or code
// 419495936), authenticates again once and retries: aXAPI has no session
// extension call. Create it with [New]; it is safe for concurrent use.
type Client struct {
	cfg Config
	dev rest.Device // the signature; logins serialised
}

var _ lb.Balancer = (*Client)(nil)

// New validates cfg and returns a Client. It makes no request.
func New(cfg Config) (*Client, error) {
	if err := rest.Check(Vendor, cfg.Endpoint, cfg.Username, cfg.Password, cfg.AllowInsecureHTTP); err != nil {
		return nil, err
	}
	if strings.ContainsAny(cfg.Partition, "/?#") {
		return nil, &lb.ConfigError{Field: "a10.Partition", Why: "must not contain '/', '?' or '#'"}
	}
	cfg.Partition = cmp.Or(cfg.Partition, DefaultPartition)
	c := &Client{cfg: cfg}
	c.dev.Init(dialect, cfg.HTTPClient, cfg.Endpoint, cfg.Password, c.login)
	return c, nil
}

// dialect is how the device answers.
var dialect = rest.Dialect{
	Vendor: Vendor,
	Header: header,
	OK:     func(status int) bool { return status == http.StatusOK },
	// Code 419495936 or HTTP 401, as readError reads them.
	Expired: func(resp *rest.Response) bool { _, _, kind := readError(resp); return kind == lb.KindSession },
	Read:    readError,
}

// Vendor returns "a10".
func (c *Client) Vendor() string { return Vendor }

// DeviceID returns "a10 HOST:PORT PARTITION", naming the device and
// partition the client drives whatever the configuration calls it, for
// member locks ([lb.DeviceIdentifier]).
func (c *Client) DeviceID() string { return rest.DeviceID(Vendor, c.cfg.Endpoint, c.cfg.Partition) }

func header(sig string) http.Header {
	return http.Header{"Authorization": {"A10 " + sig}}
}

// Login authenticates (POST /axapi/v3/auth) and activates the partition.
// An open session is logged off first.
func (c *Client) Login(ctx context.Context) error {
	return c.dev.Session.Login(ctx, c.logoff, c.login)
}

// login must be called through c.dev.Session, which serialises logins.
func (c *Client) login(ctx context.Context) error {
	body := map[string]any{"credentials": map[string]string{"username": c.cfg.Username, "password": c.cfg.Password.Reveal()}}
	resp, e := c.dev.Send(ctx, "login", http.MethodPost, "/axapi/v3/auth", nil, body)
	if e != nil {
		if e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden {
			e.Kind = lb.KindAuth
		}
		return e
	}
	var ar struct {
		AuthResponse struct {
			Signature string `json:"signature"`
		} `json:"authresponse"`
	}
	if err := json.Unmarshal(resp.Body, &ar); err != nil || ar.AuthResponse.Signature == "" {
		return c.dev.BadResponse("login", "", resp, "no authresponse.signature in the auth answer")
	}
	sig := ar.AuthResponse.Signature
	c.dev.Session.Set(sig)
	if c.cfg.Partition != DefaultPartition {
		if _, e := c.dev.Send(ctx, "login", http.MethodPost, "/axapi/v3/active-partition/"+url.PathEscape(c.cfg.Partition), header(sig), nil); e != nil {
			if e.Status != 0 {
				e.Message = "activating partition " + strconv.Quote(c.cfg.Partition) + ": " + e.Message
			}
			return e
		}
	}
	return nil
}

// KeepAlive makes a cheap authenticated call (GET /axapi/v3/version/oper),
// which resets the device's idle timer and re-authenticates if the session
// has already expired. With no session open it logs in.
func (c *Client) KeepAlive(ctx context.Context) error {
	if sig, _ := c.dev.Session.Get(); sig == "" {
		return c.Login(ctx)
	}
	_, err := c.dev.Call(ctx, "keep-alive", "", http.MethodGet, "/axapi/v3/version/oper", nil)
	return err
}

// Logout ends the session (POST /axapi/v3/logoff). An expired session
// counts as logged out.
func (c *Client) Logout(ctx context.Context) error { return c.dev.Session.Logout(ctx, c.logout) }

// logout ends the session sig; Session.Logout serialises it with logins.
func (c *Client) logout(ctx context.Context, sig string) error {
	_, e := c.dev.Send(ctx, "logout", http.MethodPost, "/axapi/v3/logoff", header(sig), nil)
	c.dev.Session.Drop(sig)
	if e != nil && e.Status != http.StatusUnauthorized {
		return e
	}
	return nil
}

func (c *Client) logoff(ctx context.Context, sig string) {
	_, _ = c.dev.Do(ctx, http.MethodPost, "/axapi/v3/logoff", header(sig), nil)
	c.dev.Session.Drop(sig)
}

// readError reads an error answer by its ACOS code, then by its HTTP
// status: not-found codes and 404 not found; 419545856 and 403 no
// privilege; 1023464192/1023464193 (system not ready, busy) and 503 busy;
// 419495936 and 401 session expired (logging in again may help); other
// 5xx unavailable; other 4xx rejected.
func readError(resp *rest.Response) (code int64, msg string, kind lb.Kind) {
	var body struct {
		Response *struct {
			Err *struct {
				Code int64  `json:"code"`
				Msg  string `json:"msg"`
			} `json:"err"`
		} `json:"response"`
		Auth *struct {
			Code  int64  `json:"code"`
			Error string `json:"error"`
		} `json:"authorizationschema"`
	}
	if json.Unmarshal(resp.Body, &body) == nil {
		switch {
		case body.Response != nil && body.Response.Err != nil:
			code, msg = body.Response.Err.Code, body.Response.Err.Msg
		case body.Auth != nil:
			msg = body.Auth.Error
		}
	} else {
		msg = string(resp.Body)
	}
	switch {
	case notFoundCodes[code]:
		kind = lb.KindNotFound
	case code == CodeNoPrivilege:
		kind = lb.KindNoPrivilege
	case code == CodeSystemNotReady || code == CodeSystemBusy:
		kind = lb.KindBusy
	case code == CodeInvalidSession || resp.Status == http.StatusUnauthorized:
		kind = lb.KindSession
	default:
		kind = rest.StatusKind(resp.Status)
	}
	return code, msg, kind
}

// paths returns the server path and, for a port, the port path.
func paths(m lb.Member) (server, port string, err error) {
	if err := m.Validate(); err != nil {
		return "", "", err
	}
	if m.Pool != "" {
		return "", "", &lb.ConfigError{Field: "member", Why: "a10: service-group members are not supported; name the server (and port) (got " + m.String() + ")"}
	}
	server = "/axapi/v3/slb/server/" + url.PathEscape(m.Node)
	if m.Port != 0 {
		port = server + "/port/" + strconv.Itoa(m.Port) + "+" + cmp.Or(m.Protocol, "tcp")
	}
	return server, port, nil
}

// resource returns the path of the member's object (the server, or its
// port) followed by suffix ("", "/oper", "/stats"), and the key its
// answers hold it under. m has been validated by paths.
func resource(m lb.Member, suffix string) (path, key string) {
	server, port, _ := paths(m)
	if port != "" {
		return port + suffix, "port"
	}
	return server + suffix, "server"
}

// serverObject is the part of GET /axapi/v3/slb/server/NAME this package
// reads.
type serverObject struct {
	Server struct {
		Action          string `json:"action"`
		StatsDataAction string `json:"stats-data-action"`
		PortList        []struct {
			PortNumber      int    `json:"port-number"`
			Protocol        string `json:"protocol"`
			Action          string `json:"action"`
			StatsDataAction string `json:"stats-data-action"`
		} `json:"port-list"`
	} `json:"server"`
}

// object reads the server and returns the action and stats-data-action of
// the member (the server, or its port).
func (c *Client) object(ctx context.Context, op string, m lb.Member) (action, serverAction string, statsOff bool, err error) {
	sp, _, err := paths(m)
	if err != nil {
		return "", "", false, err
	}
	resp, err := c.dev.Call(ctx, op, m.String(), http.MethodGet, sp, nil)
	if err != nil {
		return "", "", false, err
	}
	var obj serverObject
	if err := json.Unmarshal(resp.Body, &obj); err != nil || obj.Server.Action == "" {
		return "", "", false, c.dev.BadResponse(op, m.String(), resp, "no server.action in the server object")
	}
	s := obj.Server
	statsOff = s.StatsDataAction == "stats-data-disable"
	if m.Port == 0 {
		return s.Action, s.Action, statsOff, nil
	}
	proto := cmp.Or(m.Protocol, "tcp")
	for _, p := range s.PortList {
		if p.PortNumber == m.Port && (p.Protocol == proto || p.Protocol == "") {
			return p.Action, s.Action, statsOff || p.StatsDataAction == "stats-data-disable", nil
		}
	}
	return "", "", false, &lb.APIError{Vendor: Vendor, Op: op, Member: m.String(), Kind: lb.KindNotFound, Status: resp.Status, Message: "server has no port " + strconv.Itoa(m.Port) + "+" + proto}
}

// AdminState maps an aXAPI action: "enable" is Enabled, "disable"
// ForcedOffline, "disable-with-health-check" Disabled (our judgement: ACOS
// has no persistence-only equivalent of F5's Disabled; the health monitor
// keeps running, as with F5's).
func AdminState(action string) lb.AdminState {
	switch action {
	case "enable":
		return lb.Enabled
	case "disable":
		return lb.ForcedOffline
	case "disable-with-health-check":
		return lb.Disabled
	}
	return lb.StateUnknown
}

func actionOf(s lb.AdminState) (string, bool) {
	switch s {
	case lb.Enabled:
		return "enable", true
	case lb.ForcedOffline:
		return "disable", true
	case lb.Disabled:
		return "disable-with-health-check", true
	}
	return "", false
}

// State reads the member's action from the server object and its
// operational state from /oper.
func (c *Client) State(ctx context.Context, m lb.Member) (lb.State, error) {
	action, serverAction, _, err := c.object(ctx, "state", m)
	if err != nil {
		return lb.State{}, err
	}
	operPath, key := resource(m, "/oper")
	resp, err := c.dev.Call(ctx, "state", m.String(), http.MethodGet, operPath, nil)
	if err != nil {
		return lb.State{}, err
	}
	var oper map[string]struct {
		Oper struct {
			State string `json:"state"`
		} `json:"oper"`
	}
	if err := json.Unmarshal(resp.Body, &oper); err != nil {
		return lb.State{}, c.dev.BadResponse("state", m.String(), resp, "oper answer is not JSON")
	}
	detail := "action=" + action
	if key == "port" {
		detail += " server-action=" + serverAction
	}
	return lb.State{Admin: AdminState(action), Availability: oper[key].Oper.State, Detail: detail}, nil
}

// Connections reads curr-conn (server) or curr_conn (port), accepting both
// spellings at both levels. When statistics collection is disabled
// (stats-data-action "stats-data-disable" on the server or the port) the
// counters read 0 whatever the traffic, so it refuses with an
// [*lb.APIError] of Kind [lb.KindStatsDisabled] instead of returning a
// false 0.
func (c *Client) Connections(ctx context.Context, m lb.Member) (int64, error) {
	_, _, statsOff, err := c.object(ctx, "connections", m)
	if err != nil {
		return 0, err
	}
	if statsOff {
		return 0, &lb.APIError{Vendor: Vendor, Op: "connections", Member: m.String(), Kind: lb.KindStatsDisabled,
			Message: "stats-data-action is stats-data-disable: the counters read 0 whatever the traffic; enable statistics (stats-data-enable) to drain this member"}
	}
	statsPath, key := resource(m, "/stats")
	resp, err := c.dev.Call(ctx, "connections", m.String(), http.MethodGet, statsPath, nil)
	if err != nil {
		return 0, err
	}
	n, err := ParseCurrConn(resp.Body, key)
	if err != nil {
		return 0, c.dev.BadResponse("connections", m.String(), resp, err.Error())
	}
	return n, nil
}

// ParseCurrConn extracts <key>.stats.curr-conn (or curr_conn) from an
// aXAPI /stats answer; key is "server" or "port".
func ParseCurrConn(body []byte, key string) (int64, error) {
	var env map[string]struct {
		Stats map[string]json.Number `json:"stats"`
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.UseNumber()
	if err := dec.Decode(&env); err != nil {
		return 0, errors.New("stats answer is not JSON")
	}
	st := env[key].Stats
	for _, k := range []string{"curr-conn", "curr_conn"} {
		if v, ok := st[k]; ok {
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil || n < 0 {
				return 0, errors.New(key + ".stats." + k + " is not a non-negative integer")
			}
			return n, nil
		}
	}
	return 0, errors.New("stats answer has no " + key + ".stats.curr-conn")
}

// SetState posts the action to the server (POST /axapi/v3/slb/server/NAME
// {"server":{"action":...}}) or its port, and checks the action echoed
// back.
func (c *Client) SetState(ctx context.Context, m lb.Member, s lb.AdminState) error {
	action, ok := actionOf(s)
	if !ok {
		return &lb.ConfigError{Field: "state", Why: "cannot set " + s.String()}
	}
	if _, _, err := paths(m); err != nil {
		return err
	}
	path, key := resource(m, "")
	var body any = map[string]any{"server": map[string]string{"action": action}}
	if key == "port" {
		body = map[string]any{"port": map[string]any{"port-number": m.Port, "protocol": cmp.Or(m.Protocol, "tcp"), "action": action}}
	}
	resp, err := c.dev.Call(ctx, "set-state", m.String(), http.MethodPost, path, body)
	if err != nil {
		return err
	}
	var echo map[string]struct {
		Action string `json:"action"`
	}
	if json.Unmarshal(resp.Body, &echo) == nil {
		if got := echo[key].Action; got != "" && got != action {
			return &lb.StateMismatchError{Member: Vendor + " " + m.String(), Want: s, Got: lb.State{Admin: AdminState(got), Detail: "action=" + got}}
		}
	}
	return nil
}
