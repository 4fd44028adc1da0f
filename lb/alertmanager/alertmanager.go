package alertmanager

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/holdfast-db/holdfast/lb"
	"github.com/holdfast-db/holdfast/lb/internal/httpcall"
)

// Defaults of [Config].
const (
	DefaultTimeout  = 10 * time.Second
	DefaultAttempts = 3
	retryPause      = 500 * time.Millisecond
)

// Config configures [New].
type Config struct {
	// URL is Alertmanager's address, "http://alertmanager:9093", with
	// its path prefix if it has one. Required.
	URL string
	// HTTPClient sends the requests. Default: a client of its own.
	HTTPClient *http.Client
	// Timeout bounds each request. Default DefaultTimeout.
	Timeout time.Duration
	// Attempts is how many times a request that found Alertmanager
	// unreachable or failing (5xx) is tried, 500 ms apart. Default
	// DefaultAttempts.
	Attempts int
}

// Client is an Alertmanager API v2 client for silences. It is safe for
// concurrent use.
type Client struct {
	cfg  Config
	base string
	http httpcall.Client
}

// New validates cfg and returns a Client. It makes no request.
func New(cfg Config) (*Client, error) {
	if err := lb.ValidateEndpointPath(cfg.URL); err != nil {
		var ce *lb.ConfigError
		if errors.As(err, &ce) {
			c := *ce
			c.Pkg, c.Field = "alertmanager", "URL"
			return nil, &c
		}
		return nil, err
	}
	if cfg.Timeout < 0 || cfg.Attempts < 0 {
		return nil, &lb.ConfigError{Pkg: "alertmanager", Field: "Config", Why: "Timeout and Attempts must not be negative"}
	}
	cfg.HTTPClient = cmp.Or(cfg.HTTPClient, &http.Client{})
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	cfg.Attempts = cmp.Or(cfg.Attempts, DefaultAttempts)
	hc := httpcall.Client{HTTP: cfg.HTTPClient, Timeout: cfg.Timeout, Header: http.Header{"Accept": {"application/json"}}, Limit: 1 << 20}
	return &Client{cfg: cfg, base: strings.TrimSuffix(cfg.URL, "/"), http: hc}, nil
}

// Spec describes a silence to create.
type Spec struct {
	Matchers  []lb.Matcher  // at least one; not all matching the empty value
	Duration  time.Duration // from now; > 0
	CreatedBy string        // the operator
	Comment   string        // why, for the people who see it
}

// Silence is a silence read back.
type Silence struct {
	ID        string
	State     string // "active", "pending" or "expired"
	Matchers  []lb.Matcher
	StartsAt  time.Time
	EndsAt    time.Time
	CreatedBy string
	Comment   string
}

type apiMatcher struct {
	Name    string `json:"name"`
	Value   string `json:"value"`
	IsRegex bool   `json:"isRegex"`
	IsEqual bool   `json:"isEqual"`
}

type apiSilence struct {
	ID     string `json:"id,omitempty"`
	Status *struct {
		State string `json:"state"`
	} `json:"status,omitempty"`
	Matchers  []apiMatcher `json:"matchers"`
	StartsAt  time.Time    `json:"startsAt"`
	EndsAt    time.Time    `json:"endsAt"`
	CreatedBy string       `json:"createdBy"`
	Comment   string       `json:"comment"`
}

// Create creates a silence from now for s.Duration and returns its id
// (POST /api/v2/silences).
func (c *Client) Create(ctx context.Context, s Spec) (string, error) {
	if len(s.Matchers) == 0 {
		return "", &lb.ConfigError{Pkg: "alertmanager", Field: "Spec.Matchers", Why: "at least one is required"}
	}
	if s.Duration <= 0 {
		return "", &lb.ConfigError{Pkg: "alertmanager", Field: "Spec.Duration", Why: "must be positive"}
	}
	if s.CreatedBy == "" {
		return "", &lb.ConfigError{Pkg: "alertmanager", Field: "Spec.CreatedBy", Why: "must not be empty"}
	}
	body := apiSilence{CreatedBy: s.CreatedBy, Comment: s.Comment}
	for i, m := range s.Matchers {
		if err := m.Validate(); err != nil {
			return "", &lb.ConfigError{Pkg: "alertmanager", Field: "Spec.Matchers." + strconv.Itoa(i), Why: err.Error()}
		}
		body.Matchers = append(body.Matchers, apiMatcher{Name: m.Name, Value: m.Value, IsRegex: m.IsRegex, IsEqual: !m.NotEqual})
	}
	body.Comment = cmp.Or(body.Comment, "holdfast-lb")
	now := time.Now().UTC()
	body.StartsAt, body.EndsAt = now, now.Add(s.Duration)
	var out struct {
		SilenceID string `json:"silenceID"`
	}
	if err := c.do(ctx, "create silence", http.MethodPost, "/api/v2/silences", body, &out); err != nil {
		return "", err
	}
	if out.SilenceID == "" {
		return "", &Error{Op: "create silence", Status: http.StatusOK, Message: "no silenceID in the answer"}
	}
	return out.SilenceID, nil
}

// Get reads a silence (GET /api/v2/silence/{id}).
func (c *Client) Get(ctx context.Context, id string) (*Silence, error) {
	if id == "" {
		return nil, &lb.ConfigError{Pkg: "alertmanager", Field: "id", Why: "must not be empty"}
	}
	var s apiSilence
	if err := c.do(ctx, "get silence", http.MethodGet, "/api/v2/silence/"+url.PathEscape(id), nil, &s); err != nil {
		return nil, err
	}
	out := &Silence{ID: s.ID, StartsAt: s.StartsAt, EndsAt: s.EndsAt, CreatedBy: s.CreatedBy, Comment: s.Comment}
	if s.Status != nil {
		out.State = s.Status.State
	}
	for _, m := range s.Matchers {
		out.Matchers = append(out.Matchers, lb.Matcher{Name: m.Name, Value: m.Value, IsRegex: m.IsRegex, NotEqual: !m.IsEqual})
	}
	return out, nil
}

// Expire ends a silence now (DELETE /api/v2/silence/{id}). Expiring an
// expired silence succeeds.
func (c *Client) Expire(ctx context.Context, id string) error {
	if id == "" {
		return &lb.ConfigError{Pkg: "alertmanager", Field: "id", Why: "must not be empty"}
	}
	return c.do(ctx, "expire silence", http.MethodDelete, "/api/v2/silence/"+url.PathEscape(id), nil, nil)
}

// ErrAlertmanager is matched by every [*Error].
var ErrAlertmanager = errors.New("alertmanager: request failed")

// Error is a failed Alertmanager request: it answered Status (0 when no
// answer came, Err says why) with Message. It is retryable when
// Alertmanager was unreachable or answered 5xx; a 4xx (a bad silence, a
// silence not found) is not.
type Error struct {
	Op      string // "create silence", "get silence", "expire silence"
	Status  int
	Message string
	Err     error
}

// Error returns for example
// "alertmanager: create silence: HTTP 400: silence invalid: ...".
func (e *Error) Error() string {
	return httpcall.Text("alertmanager: "+e.Op, e.Status, e.Message, e.Err)
}

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

// Is matches [ErrAlertmanager].
func (e *Error) Is(target error) bool { return target == ErrAlertmanager }

// Retryable reports whether a later attempt may succeed.
func (e *Error) Retryable() bool {
	return (e.Status == 0 || e.Status >= 500 || e.Status == http.StatusTooManyRequests) && !errors.Is(e.Err, context.Canceled)
}

// do sends a request, retrying transient failures, and decodes the JSON
// answer into out.
func (c *Client) do(ctx context.Context, op, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return &Error{Op: op, Err: err}
		}
	}
	retryable := func(err error) bool {
		ae, _ := errors.AsType[*Error](err)
		return ae != nil && ae.Retryable()
	}
	_, err := httpcall.Retry(ctx, c.cfg.Attempts, retryable, func(error) time.Duration { return retryPause }, func() error {
		return c.once(ctx, op, method, path, body, out)
	})
	return err
}

func (c *Client) once(ctx context.Context, op, method, path string, body []byte, out any) error {
	ans, err := c.http.Send(ctx, method, c.base+path, body)
	if err != nil {
		return &Error{Op: op, Err: err}
	}
	if !ans.OK() {
		msg := strings.TrimSpace(string(ans.Body))
		var s string
		if json.Unmarshal(ans.Body, &s) == nil { // Alertmanager answers errors as a JSON string
			msg = s
		}
		if len(msg) > 300 {
			msg = msg[:300] + "..."
		}
		return &Error{Op: op, Status: ans.Status, Message: msg}
	}
	if out != nil {
		if err := json.Unmarshal(ans.Body, out); err != nil {
			return &Error{Op: op, Status: ans.Status, Message: "unparsable answer"}
		}
	}
	return nil
}

// Silencer silences a deploy's window: it creates the silence of a
// group's matchers before the drain and expires it at the end, bounded by
// a maximum duration after which Alertmanager ends it by itself (a
// deploy that crashed cannot silence alerts forever).
type Silencer struct {
	Client   *Client
	Matchers map[string][]lb.Matcher // by group
	Max      time.Duration           // the bound; default lb.DefaultSilenceMax
}

// FromSettings builds the Silencer of the configuration file's
// alertmanager section (nil when there is none).
func FromSettings(s *lb.AlertmanagerSettings, hc *http.Client) (*Silencer, error) {
	if s == nil {
		return nil, nil
	}
	c, err := New(Config{URL: s.URL, HTTPClient: hc})
	if err != nil {
		return nil, err
	}
	return &Silencer{Client: c, Matchers: s.Matchers, Max: s.SilenceMax()}, nil
}

// Silence creates the group's silence for d (at most Max; 0 means Max)
// and returns its id, or "" and no error when the group has no matchers.
func (s *Silencer) Silence(ctx context.Context, group, operator, comment string, d time.Duration) (string, time.Duration, error) {
	ms := s.Matchers[group]
	if len(ms) == 0 {
		return "", 0, nil
	}
	limit := s.Max
	if limit <= 0 {
		limit = lb.DefaultSilenceMax
	}
	if d <= 0 || d > limit {
		d = limit
	}
	id, err := s.Client.Create(ctx, Spec{Matchers: ms, Duration: d, CreatedBy: operator, Comment: comment})
	return id, d, err
}

// Expire expires the silence id.
func (s *Silencer) Expire(ctx context.Context, id string) error {
	return s.Client.Expire(ctx, id)
}
