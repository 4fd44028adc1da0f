package f5

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/holdfast-db/holdfast/lb"
	"github.com/holdfast-db/holdfast/lb/internal/rest"
)

// Vendor is the name [Client.Vendor] returns.
const Vendor = "f5"

// Defaults of [Config].
const (
	DefaultPartition      = "Common"
	DefaultLoginProvider  = "tmos"
	DefaultRequestTimeout = rest.DefaultRequestTimeout
	// DeviceTokenTimeout is the token lifetime BIG-IP gives by default.
	DeviceTokenTimeout = 1200 * time.Second
	// MaxTokenTimeout is BIG-IP's absolute token lifetime; extending past
	// it is refused with HTTP 406.
	MaxTokenTimeout = 36000 * time.Second
)

// Config configures [New]. Endpoint, Username and Password are required.
type Config struct {
	// Endpoint is the management address, "https://bigip.example.net".
	Endpoint string
	// Username and Password are the API account's. The password is only
	// sent in the login request; it never appears in errors.
	Username string
	Password lb.Secret
	// Partition holds the nodes and pools. Default DefaultPartition.
	Partition string
	// LoginProvider is loginProviderName. Default DefaultLoginProvider.
	LoginProvider string
	// TokenTimeout, when positive, is the token lifetime set after login
	// and on every KeepAlive (at most MaxTokenTimeout). 0 keeps the
	// device's (DeviceTokenTimeout) and KeepAlive re-sets that.
	TokenTimeout time.Duration
	// AllowInsecureHTTP accepts an http:// Endpoint, which New refuses
	// otherwise: the login would send the password, and every later
	// request the session credential, unencrypted.
	AllowInsecureHTTP bool
	// HTTPClient sends the requests. Default: an http.Client with a
	// DefaultRequestTimeout timeout and the default transport.
	HTTPClient *http.Client
}

// Client is a BIG-IP iControl REST client implementing [lb.Balancer]. It
// uses token authentication (X-F5-Auth-Token) and, on a 401 answer,
// logs in again once and retries. Create it with [New]; it is safe for
// concurrent use.
type Client struct {
	cfg Config
	dev rest.Device // the token; logins serialised
}

var _ lb.Balancer = (*Client)(nil)

// New validates cfg and returns a Client. It makes no request.
func New(cfg Config) (*Client, error) {
	if err := rest.Check(Vendor, cfg.Endpoint, cfg.Username, cfg.Password, cfg.AllowInsecureHTTP); err != nil {
		return nil, err
	}
	switch {
	case cfg.TokenTimeout < 0 || cfg.TokenTimeout > MaxTokenTimeout:
		return nil, &lb.ConfigError{Field: "f5.TokenTimeout", Why: "must be between 0 and " + MaxTokenTimeout.String()}
	case strings.ContainsAny(cfg.Partition, "/~?#"):
		return nil, &lb.ConfigError{Field: "f5.Partition", Why: "must not contain '/', '~', '?' or '#'"}
	}
	cfg.Partition = cmp.Or(cfg.Partition, DefaultPartition)
	cfg.LoginProvider = cmp.Or(cfg.LoginProvider, DefaultLoginProvider)
	c := &Client{cfg: cfg}
	c.dev.Init(dialect, cfg.HTTPClient, cfg.Endpoint, cfg.Password, c.login)
	return c, nil
}

// dialect is how the device answers.
var dialect = rest.Dialect{
	Vendor: Vendor,
	Header: header,
	OK:     func(status int) bool { return status >= 200 && status <= 299 },
	// A 401 is an expired token; a second one, after a fresh login,
	// says that the account lacks the privilege.
	Expired: func(resp *rest.Response) bool { return resp.Status == http.StatusUnauthorized },
	Read:    readError,
}

// Vendor returns "f5".
func (c *Client) Vendor() string { return Vendor }

// DeviceID returns "f5 HOST:PORT PARTITION", naming the device and
// partition the client drives whatever the configuration calls it, for
// member locks ([lb.DeviceIdentifier]).
func (c *Client) DeviceID() string { return rest.DeviceID(Vendor, c.cfg.Endpoint, c.cfg.Partition) }

// Login gets a token (POST /mgmt/shared/authn/login) and, with a
// TokenTimeout, sets its lifetime. An open session is logged out first, so
// that it does not hold one of the user's 100 token slots.
func (c *Client) Login(ctx context.Context) error {
	return c.dev.Session.Login(ctx, c.deleteToken, c.login)
}

// login must be called through c.dev.Session, which serialises logins.
func (c *Client) login(ctx context.Context) error {
	body := map[string]string{"username": c.cfg.Username, "password": c.cfg.Password.Reveal(), "loginProviderName": c.cfg.LoginProvider}
	resp, e := c.dev.Send(ctx, "login", http.MethodPost, "/mgmt/shared/authn/login", nil, body)
	if e != nil {
		if e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden || e.Status == http.StatusBadRequest {
			e.Kind = lb.KindAuth // bad credentials, or too many active tokens
		}
		return e
	}
	var lr struct {
		Token struct {
			Token string `json:"token"`
		} `json:"token"`
	}
	if err := json.Unmarshal(resp.Body, &lr); err != nil || lr.Token.Token == "" {
		return c.dev.BadResponse("login", "", resp, "no token.token in the login answer")
	}
	c.dev.Session.Set(lr.Token.Token)
	if c.cfg.TokenTimeout > 0 {
		if err := c.extend(ctx, lr.Token.Token, "login"); err != nil {
			return err
		}
	}
	return nil
}

// extend sets the token's lifetime (PATCH /mgmt/shared/authz/tokens/T).
func (c *Client) extend(ctx context.Context, tok, op string) *lb.APIError {
	d := c.cfg.TokenTimeout
	if d == 0 {
		d = DeviceTokenTimeout
	}
	_, e := c.dev.Send(ctx, op, http.MethodPatch, "/mgmt/shared/authz/tokens/"+url.PathEscape(tok), header(tok), map[string]int64{"timeout": int64(d / time.Second)})
	if e != nil && e.Status == http.StatusUnauthorized {
		e.Kind = lb.KindSession
	}
	return e
}

// KeepAlive extends the token (PATCH /mgmt/shared/authz/tokens/T with
// {"timeout": TokenTimeout}). When the token has expired (401) or reached
// BIG-IP's absolute lifetime (406), it logs in again. With no session open
// it logs in.
func (c *Client) KeepAlive(ctx context.Context) error {
	tok, gen := c.dev.Session.Get()
	if tok == "" {
		return c.Login(ctx)
	}
	err := c.extend(ctx, tok, "keep-alive")
	if err == nil {
		return nil
	}
	if err.Kind == lb.KindSession || err.Status == http.StatusNotAcceptable {
		if err.Status == http.StatusNotAcceptable {
			c.deleteToken(ctx, tok) // still valid until its absolute end: free its slot
		}
		return c.dev.Session.Relogin(ctx, gen, c.login)
	}
	return err
}

// Logout deletes the token (DELETE /mgmt/shared/authz/tokens/T). A token
// that has already expired counts as logged out.
func (c *Client) Logout(ctx context.Context) error { return c.dev.Session.Logout(ctx, c.logout) }

// logout ends the session tok; Session.Logout serialises it with logins.
func (c *Client) logout(ctx context.Context, tok string) error {
	_, e := c.dev.Send(ctx, "logout", http.MethodDelete, "/mgmt/shared/authz/tokens/"+url.PathEscape(tok), header(tok), nil)
	if e != nil && e.Status == 0 {
		return e // no answer: the token is kept
	}
	c.dev.Session.Drop(tok)
	if e != nil && e.Status != http.StatusUnauthorized && e.Status != http.StatusNotFound {
		return e
	}
	return nil
}

func (c *Client) deleteToken(ctx context.Context, tok string) {
	_, _ = c.dev.Do(ctx, http.MethodDelete, "/mgmt/shared/authz/tokens/"+url.PathEscape(tok), header(tok), nil)
	c.dev.Session.Drop(tok)
}

func header(tok string) http.Header {
	return http.Header{"X-F5-Auth-Token": {tok}}
}

// readError reads an error answer by its HTTP status (never by its
// text): 401 (after the one re-login) and 403 no privilege, 404 not found,
// 503 busy (BIG-IP restarting), other 5xx unavailable, other 4xx rejected.
func readError(resp *rest.Response) (code int64, msg string, kind lb.Kind) {
	var body struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(resp.Body, &body) == nil {
		msg = body.Message
	} else {
		msg = string(resp.Body)
	}
	kind = rest.StatusKind(resp.Status)
	if resp.Status == http.StatusUnauthorized {
		kind = lb.KindNoPrivilege
	}
	return 0, msg, kind
}

// path returns the object URL path of m: a pool member
// (/mgmt/tm/ltm/pool/~P~pool/members/~P~node:port) or a node
// (/mgmt/tm/ltm/node/~P~node).
func (c *Client) path(m lb.Member) (string, error) {
	if err := m.Validate(); err != nil {
		return "", err
	}
	if (m.Pool == "") != (m.Port == 0) {
		return "", &lb.ConfigError{Field: "member", Why: "f5: a pool member needs both pool and port; a node has neither (got " + m.String() + ")"}
	}
	p := "~" + c.cfg.Partition + "~"
	if m.Pool != "" {
		return "/mgmt/tm/ltm/pool/" + url.PathEscape(p+m.Pool) + "/members/" + url.PathEscape(p+m.Node+":"+strconv.Itoa(m.Port)), nil
	}
	return "/mgmt/tm/ltm/node/" + url.PathEscape(p+m.Node), nil
}

// State reads the member (or node) object and maps its session/state pair
// (see [AdminState]).
func (c *Client) State(ctx context.Context, m lb.Member) (lb.State, error) {
	p, err := c.path(m)
	if err != nil {
		return lb.State{}, err
	}
	resp, err := c.dev.Call(ctx, "state", m.String(), http.MethodGet, p, nil)
	if err != nil {
		return lb.State{}, err
	}
	var obj struct {
		Session string `json:"session"`
		State   string `json:"state"`
	}
	if err := json.Unmarshal(resp.Body, &obj); err != nil || obj.Session == "" || obj.State == "" {
		return lb.State{}, c.dev.BadResponse("state", m.String(), resp, "no session and state in the object")
	}
	return lb.State{
		Admin:        AdminState(obj.Session, obj.State),
		Availability: obj.State,
		Detail:       "session=" + obj.Session + " state=" + obj.State,
	}, nil
}

// AdminState maps BIG-IP's read-back (session, state) pair, which differs
// from the pair written (a monitor turns user-enabled into
// monitor-enabled, and user-up into up, down, checking or unchecked):
//
//	| session                        | state                  | AdminState    |
//	|--------------------------------|------------------------|---------------|
//	| user-disabled                  | user-down              | ForcedOffline |
//	| user-disabled                  | anything else          | Disabled      |
//	| user-enabled, monitor-enabled  | user-down              | Disabled      |
//	| user-enabled, monitor-enabled  | anything else          | Enabled       |
//	| anything else                  |                        | StateUnknown  |
func AdminState(session, state string) lb.AdminState {
	switch session {
	case "user-disabled":
		if state == "user-down" {
			return lb.ForcedOffline
		}
		return lb.Disabled
	case "user-enabled", "monitor-enabled":
		if state == "user-down" {
			return lb.Disabled
		}
		return lb.Enabled
	}
	return lb.StateUnknown
}

// Connections reads serverside.curConns from the object's /stats. The
// envelope's inner key (a self link whose form varies by version) is not
// relied on: the single entry is taken. 64-bit counters are read whether
// they come as {"value": n} or split into high and low 32-bit halves.
func (c *Client) Connections(ctx context.Context, m lb.Member) (int64, error) {
	p, err := c.path(m)
	if err != nil {
		return 0, err
	}
	resp, err := c.dev.Call(ctx, "connections", m.String(), http.MethodGet, p+"/stats", nil)
	if err != nil {
		return 0, err
	}
	n, err := ParseCurConns(resp.Body)
	if err != nil {
		return 0, c.dev.BadResponse("connections", m.String(), resp, err.Error())
	}
	return n, nil
}

// ParseCurConns extracts serverside.curConns from a BIG-IP /stats answer:
// entries.<single key>.nestedStats.entries["serverside.curConns"], as
// {"value": n}, {"high": h, "low": l}, or sibling entries
// "serverside.curConns.high" and "serverside.curConns.low".
func ParseCurConns(body []byte) (int64, error) {
	var env struct {
		Entries map[string]struct {
			NestedStats struct {
				Entries map[string]json.RawMessage `json:"entries"`
			} `json:"nestedStats"`
		} `json:"entries"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return 0, errors.New("stats answer is not JSON")
	}
	if len(env.Entries) != 1 {
		return 0, errors.New("stats answer has " + strconv.Itoa(len(env.Entries)) + " entries, want 1")
	}
	var inner map[string]json.RawMessage
	for _, e := range env.Entries {
		inner = e.NestedStats.Entries
	}
	const key = "serverside.curConns"
	if raw, ok := inner[key]; ok {
		return counter(raw)
	}
	hi, okH := inner[key+".high"]
	lo, okL := inner[key+".low"]
	if okH && okL {
		h, err := counter(hi)
		if err != nil {
			return 0, err
		}
		l, err := counter(lo)
		if err != nil {
			return 0, err
		}
		return join64(uint64(h), uint64(l))
	}
	return 0, errors.New("stats answer has no " + key)
}

// counter reads {"value": n} or {"high": h, "low": l}.
func counter(raw json.RawMessage) (int64, error) {
	var v struct {
		Value *json.Number `json:"value"`
		High  *json.Number `json:"high"`
		Low   *json.Number `json:"low"`
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return 0, errors.New("counter is not an object")
	}
	switch {
	case v.Value != nil:
		return number(*v.Value)
	case v.High != nil && v.Low != nil:
		h, err := number(*v.High)
		if err != nil {
			return 0, err
		}
		l, err := number(*v.Low)
		if err != nil {
			return 0, err
		}
		return join64(uint64(h), uint64(l))
	}
	return 0, errors.New("counter has neither value nor high and low")
}

func number(n json.Number) (int64, error) {
	u, err := strconv.ParseUint(string(n), 10, 64)
	if err != nil {
		return 0, errors.New("counter is not a non-negative integer")
	}
	if u > math.MaxInt64 {
		return math.MaxInt64, nil
	}
	return int64(u), nil
}

func join64(h, l uint64) (int64, error) {
	if h > math.MaxUint32 || l > math.MaxUint32 {
		return 0, errors.New("split counter half exceeds 32 bits")
	}
	v := h<<32 | l
	if v > math.MaxInt64 {
		return math.MaxInt64, nil
	}
	return int64(v), nil
}

// SetState sends PATCH with the (session, state) pair:
//
//	| AdminState    | session       | state     |
//	|---------------|---------------|-----------|
//	| Enabled       | user-enabled  | user-up   |
//	| Disabled      | user-disabled | user-up   |
//	| ForcedOffline | user-disabled | user-down |
func (c *Client) SetState(ctx context.Context, m lb.Member, s lb.AdminState) error {
	p, err := c.path(m)
	if err != nil {
		return err
	}
	var body map[string]string
	switch s {
	case lb.Enabled:
		body = map[string]string{"session": "user-enabled", "state": "user-up"}
	case lb.Disabled:
		body = map[string]string{"session": "user-disabled", "state": "user-up"}
	case lb.ForcedOffline:
		body = map[string]string{"session": "user-disabled", "state": "user-down"}
	default:
		return &lb.ConfigError{Field: "state", Why: "cannot set " + s.String()}
	}
	_, err = c.dev.Call(ctx, "set-state", m.String(), http.MethodPatch, p, body)
	return err
}
