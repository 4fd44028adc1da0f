package f5

import (
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
	DefaultRequestTimeout = 30 * time.Second
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
	// HTTPClient sends the requests. Default: an http.Client with a
	// DefaultRequestTimeout timeout and the default transport.
	HTTPClient *http.Client
}

// Client is a BIG-IP iControl REST client implementing [lb.Balancer]. It
// uses token authentication (X-F5-Auth-Token) and, on a 401 answer,
// logs in again once and retries. Create it with [New]; it is safe for
// concurrent use.
type Client struct {
	cfg  Config
	rest rest.Client

	sess rest.Session // the token; logins serialised
}

var _ lb.Balancer = (*Client)(nil)

// New validates cfg and returns a Client. It makes no request.
func New(cfg Config) (*Client, error) {
	if err := lb.ValidateEndpoint(cfg.Endpoint); err != nil {
		return nil, err
	}
	switch {
	case cfg.Username == "":
		return nil, &lb.ConfigError{Field: "f5.Username", Why: "must not be empty"}
	case cfg.Password == "":
		return nil, &lb.ConfigError{Field: "f5.Password", Why: "must not be empty"}
	case cfg.TokenTimeout < 0 || cfg.TokenTimeout > MaxTokenTimeout:
		return nil, &lb.ConfigError{Field: "f5.TokenTimeout", Why: "must be between 0 and " + MaxTokenTimeout.String()}
	case strings.ContainsAny(cfg.Partition, "/~?#"):
		return nil, &lb.ConfigError{Field: "f5.Partition", Why: "must not contain '/', '~', '?' or '#'"}
	}
	if cfg.Partition == "" {
		cfg.Partition = DefaultPartition
	}
	if cfg.LoginProvider == "" {
		cfg.LoginProvider = DefaultLoginProvider
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: DefaultRequestTimeout}
	}
	c := &Client{cfg: cfg}
	c.rest = rest.Client{HTTP: cfg.HTTPClient, Base: strings.TrimSuffix(cfg.Endpoint, "/"), Secrets: c.secrets}
	return c, nil
}

// secrets are the values never to show: the password and the token.
func (c *Client) secrets() []string {
	cred, _ := c.sess.Get()
	return []string{c.cfg.Password.Reveal(), cred}
}

// Vendor returns "f5".
func (c *Client) Vendor() string { return Vendor }

// Login gets a token (POST /mgmt/shared/authn/login) and, with a
// TokenTimeout, sets its lifetime. An open session is logged out first, so
// that it does not hold one of the user's 100 token slots.
func (c *Client) Login(ctx context.Context) error {
	return c.sess.Login(ctx, c.deleteToken, c.login)
}

// login must be called through c.sess, which serialises logins.
func (c *Client) login(ctx context.Context) error {
	body := map[string]string{"username": c.cfg.Username, "password": c.cfg.Password.Reveal(), "loginProviderName": c.cfg.LoginProvider}
	resp, err := c.rest.Do(ctx, http.MethodPost, "/mgmt/shared/authn/login", nil, body)
	if err != nil {
		return c.transportError("login", "", err)
	}
	if resp.Status != http.StatusOK {
		e := c.apiError("login", "", resp)
		if resp.Status == http.StatusUnauthorized || resp.Status == http.StatusForbidden || resp.Status == http.StatusBadRequest {
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
		return &lb.APIError{Vendor: Vendor, Op: "login", Kind: lb.KindBadResponse, Status: resp.Status, Message: "no token.token in the login answer"}
	}
	c.sess.Set(lr.Token.Token)
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
	resp, err := c.rest.Do(ctx, http.MethodPatch, "/mgmt/shared/authz/tokens/"+url.PathEscape(tok), c.header(tok), map[string]int64{"timeout": int64(d / time.Second)})
	if err != nil {
		return c.transportError(op, "", err)
	}
	if resp.Status != http.StatusOK {
		e := c.apiError(op, "", resp)
		if resp.Status == http.StatusUnauthorized {
			e.Kind = lb.KindSession
		}
		return e
	}
	return nil
}

// KeepAlive extends the token (PATCH /mgmt/shared/authz/tokens/T with
// {"timeout": TokenTimeout}). When the token has expired (401) or reached
// BIG-IP's absolute lifetime (406), it logs in again. With no session open
// it logs in.
func (c *Client) KeepAlive(ctx context.Context) error {
	tok, gen := c.sess.Get()
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
		return c.sess.Relogin(ctx, gen, c.login)
	}
	return err
}

// Logout deletes the token (DELETE /mgmt/shared/authz/tokens/T). A token
// that has already expired counts as logged out.
func (c *Client) Logout(ctx context.Context) error { return c.sess.Logout(ctx, c.logout) }

// logout ends the session tok; Session.Logout serialises it with logins.
func (c *Client) logout(ctx context.Context, tok string) error {
	resp, err := c.rest.Do(ctx, http.MethodDelete, "/mgmt/shared/authz/tokens/"+url.PathEscape(tok), c.header(tok), nil)
	if err != nil {
		return c.transportError("logout", "", err)
	}
	c.sess.Drop(tok)
	if resp.Status == http.StatusOK || resp.Status == http.StatusUnauthorized || resp.Status == http.StatusNotFound {
		return nil
	}
	return c.apiError("logout", "", resp)
}

func (c *Client) deleteToken(ctx context.Context, tok string) {
	_, _ = c.rest.Do(ctx, http.MethodDelete, "/mgmt/shared/authz/tokens/"+url.PathEscape(tok), c.header(tok), nil)
	c.sess.Drop(tok)
}

func (c *Client) header(tok string) http.Header {
	return http.Header{"X-F5-Auth-Token": {tok}}
}

// call sends an authenticated request; on 401 it logs in again once and
// retries. A second 401 means the account lacks the privilege.
func (c *Client) call(ctx context.Context, op string, m lb.Member, method, path string, body any) (*rest.Response, error) {
	tok, gen := c.sess.Get()
	if tok == "" {
		return nil, &lb.APIError{Vendor: Vendor, Op: op, Member: m.String(), Kind: lb.KindSession, Message: "not logged in"}
	}
	resp, err := c.rest.Do(ctx, method, path, c.header(tok), body)
	if err != nil {
		return nil, c.transportError(op, m.String(), err)
	}
	if resp.Status == http.StatusUnauthorized {
		if err := c.sess.Relogin(ctx, gen, c.login); err != nil {
			return nil, err
		}
		tok, _ = c.sess.Get()
		resp, err = c.rest.Do(ctx, method, path, c.header(tok), body)
		if err != nil {
			return nil, c.transportError(op, m.String(), err)
		}
	}
	if resp.Status < 200 || resp.Status > 299 {
		return nil, c.apiError(op, m.String(), resp)
	}
	return resp, nil
}

// apiError classifies an error answer by its HTTP status (never by its
// text): 401 (after the one re-login) and 403 no privilege, 404 not found,
// 503 busy (BIG-IP restarting), other 5xx unavailable, other 4xx rejected.
func (c *Client) apiError(op, member string, resp *rest.Response) *lb.APIError {
	var body struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	}
	msg := ""
	if json.Unmarshal(resp.Body, &body) == nil {
		msg = body.Message
	} else {
		msg = string(resp.Body)
	}
	e := &lb.APIError{Vendor: Vendor, Op: op, Member: member, Status: resp.Status, Message: c.rest.Message(msg)}
	switch s := resp.Status; {
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		e.Kind = lb.KindNoPrivilege
	case s == http.StatusNotFound:
		e.Kind = lb.KindNotFound
	case s == http.StatusServiceUnavailable:
		e.Kind = lb.KindBusy
	case s >= 500:
		e.Kind = lb.KindUnavailable
	case s >= 400:
		e.Kind = lb.KindRejected
	default:
		e.Kind = lb.KindBadResponse
	}
	return e
}

func (c *Client) transportError(op, member string, err error) *lb.APIError {
	return &lb.APIError{Vendor: Vendor, Op: op, Member: member, Kind: lb.KindUnavailable, Err: err}
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
	resp, err := c.call(ctx, "state", m, http.MethodGet, p, nil)
	if err != nil {
		return lb.State{}, err
	}
	var obj struct {
		Session string `json:"session"`
		State   string `json:"state"`
	}
	if err := json.Unmarshal(resp.Body, &obj); err != nil || obj.Session == "" || obj.State == "" {
		return lb.State{}, &lb.APIError{Vendor: Vendor, Op: "state", Member: m.String(), Kind: lb.KindBadResponse, Status: resp.Status, Message: "no session and state in the object"}
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
	resp, err := c.call(ctx, "connections", m, http.MethodGet, p+"/stats", nil)
	if err != nil {
		return 0, err
	}
	n, err := ParseCurConns(resp.Body)
	if err != nil {
		return 0, &lb.APIError{Vendor: Vendor, Op: "connections", Member: m.String(), Kind: lb.KindBadResponse, Status: resp.Status, Message: err.Error()}
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
	_, err = c.call(ctx, "set-state", m, http.MethodPatch, p, body)
	return err
}
