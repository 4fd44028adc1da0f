package console

import (
	"cmp"
	"context"
	"embed"
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/holdfast-db/holdfast/lb"
)

// Defaults of [Config].
const (
	DefaultPoll        = 2 * time.Second
	DefaultAuditRows   = 5
	DefaultDetailRows  = 50
	DefaultControlWait = 30 * time.Second
	// MaxWait bounds how long a control request asked to wait (JSON
	// "wait": true, or ?wait=1) keeps the HTTP request open; the control
	// itself goes on after that.
	MaxWait = 15 * time.Minute
)

// StatusReader reads a group's status: [*lb.Monitor].
type StatusReader interface {
	Status(ctx context.Context, group string, nodes ...string) (*lb.GroupStatus, error)
}

// Store is where locks and the audit trail are read: [*lb.PGStore].
type Store interface {
	Holders(ctx context.Context) (map[string]lb.Holder, error)
	Entries(ctx context.Context, group string, limit int) ([]lb.Entry, error)
	Entry(ctx context.Context, id int64) (*lb.Entry, error)
}

// Identity says who the operator of a request is. Set Header (behind the
// organisation's authenticating proxy) or Fixed (a console on one's own
// machine); with neither, the console is read-only.
type Identity struct {
	// Header is the request header the authenticating proxy sets to the
	// signed-in user, such as "X-Forwarded-User" (oauth2-proxy) or
	// "X-Auth-Request-User". It is trusted only on requests from
	// TrustedProxies, and the proxy must overwrite any copy the client
	// sent.
	Header string
	// TrustedProxies are the addresses whose requests may carry Header.
	// Default: the loopback addresses (a proxy on the same machine).
	TrustedProxies []netip.Prefix
	// Fixed, when not empty, is the operator of every request.
	Fixed string
}

// Config configures [New].
type Config struct {
	// Groups and Permissions are the configuration's (lb.Config). Groups
	// is required.
	Groups      map[string][]lb.Target
	Permissions lb.Permissions
	// Status reads the members; an [*lb.Monitor] of balancer clients of
	// its own. Required.
	Status StatusReader
	// Store reads the lock holders and the audit trail. Required.
	Store Store
	// NewController returns the Controller that runs one control request,
	// with balancer clients of its own (it logs in and out). Required.
	NewController func() (*lb.Controller, error)
	// Identity says who the operator is.
	Identity Identity
	// Poll is how often every group's members are read. Default
	// DefaultPoll.
	Poll time.Duration
	// Refresh is how often the page reloads its content. Default Poll.
	Refresh time.Duration
	// AuditRows is how many audit entries the overview shows per group.
	// Default DefaultAuditRows; a group's own page shows DefaultDetailRows.
	AuditRows int
	// ControlWait bounds how long a control request waits to start (to
	// take the lock and write its audit entry) before the answer. Default
	// DefaultControlWait.
	ControlWait time.Duration
	// Metrics, if not nil, is served at /metrics.
	Metrics http.Handler
	// Logger receives the console's own warnings. Default slog.Default().
	Logger *slog.Logger
	// Title is the page title. Default "holdfast-lb".
	Title string
}

// Console serves the web console. Create it with [New], serve
// [Console.Handler] and [Console.Close] it.
type Console struct {
	cfg     Config
	handler http.Handler
	pages   *template.Template
	groups  []string // sorted

	ctx    context.Context // ends at Close: polls and controls
	cancel context.CancelFunc
	wg     sync.WaitGroup // the poller and the controls
	kick   chan struct{}
	first  chan struct{} // closed after the first poll

	mu       sync.Mutex
	closed   bool
	controls int // running
	snap     snapshot
}

type snapshot struct {
	at     time.Time
	groups map[string]groupRead
}

type groupRead struct {
	status *lb.GroupStatus
	err    error
	at     time.Time
}

//go:embed templates/*.html static/*
var files embed.FS

// New validates cfg, starts the poller and returns the Console.
func New(cfg Config) (*Console, error) {
	switch {
	case len(cfg.Groups) == 0:
		return nil, &lb.ConfigError{Pkg: "console", Field: "Groups", Why: "at least one is required"}
	case cfg.Status == nil:
		return nil, &lb.ConfigError{Pkg: "console", Field: "Status", Why: "must not be nil"}
	case cfg.Store == nil:
		return nil, &lb.ConfigError{Pkg: "console", Field: "Store", Why: "must not be nil"}
	case cfg.NewController == nil:
		return nil, &lb.ConfigError{Pkg: "console", Field: "NewController", Why: "must not be nil"}
	case cfg.Poll < 0 || cfg.Refresh < 0 || cfg.AuditRows < 0 || cfg.ControlWait < 0:
		return nil, &lb.ConfigError{Pkg: "console", Field: "Config", Why: "Poll, Refresh, AuditRows and ControlWait must not be negative"}
	case cfg.Identity.Fixed != "" && cfg.Identity.Header != "":
		return nil, &lb.ConfigError{Pkg: "console", Field: "Identity", Why: "set Header or Fixed, not both"}
	}
	if cfg.Identity.Fixed != "" {
		if err := validOperator(cfg.Identity.Fixed); err != nil {
			return nil, &lb.ConfigError{Pkg: "console", Field: "Identity.Fixed", Why: err.Error()}
		}
	}
	if h := cfg.Identity.Header; h != "" && !validToken(h) {
		return nil, &lb.ConfigError{Pkg: "console", Field: "Identity.Header", Why: "not a header name: " + strconv.Quote(h)}
	}
	if cfg.Identity.Header != "" && len(cfg.Identity.TrustedProxies) == 0 {
		cfg.Identity.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	}
	cfg.Poll = cmp.Or(cfg.Poll, DefaultPoll)
	cfg.Refresh = cmp.Or(cfg.Refresh, cfg.Poll)
	cfg.AuditRows = cmp.Or(cfg.AuditRows, DefaultAuditRows)
	cfg.ControlWait = cmp.Or(cfg.ControlWait, DefaultControlWait)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	cfg.Title = cmp.Or(cfg.Title, "holdfast-lb")
	pages, err := template.New("").Funcs(funcs).ParseFS(files, "templates/*.html")
	if err != nil {
		return nil, &lb.ConfigError{Pkg: "console", Field: "templates", Why: "do not parse", Err: err}
	}
	c := &Console{cfg: cfg, pages: pages, kick: make(chan struct{}, 1), first: make(chan struct{})}
	for g := range cfg.Groups {
		c.groups = append(c.groups, g)
	}
	sort.Strings(c.groups)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.handler = c.routes()
	c.wg.Add(1)
	go c.poller()
	return c, nil
}

// Handler returns the console's HTTP handler: the pages, the JSON API
// under the same paths, /metrics and /healthz. Cross-origin form posts
// are refused (http.CrossOriginProtection).
func (c *Console) Handler() http.Handler { return c.handler }

// Close stops the poller and waits for the controls in progress to end,
// until ctx ends; then it cancels them (a canceled drain leaves its
// members forced offline, audited as canceled) and waits for them to
// finish their cleanup. New controls are refused from the start of Close.
// It is idempotent.
func (c *Console) Close(ctx context.Context) error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	done := make(chan struct{})
	go func() {
		c.wg.Wait()
		close(done)
	}()
	// The poller ends at once; controls get until ctx ends.
	c.stopPoller()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		c.cancel()
		<-done // controls clean up within lb's own bounded cleanup
	}
	c.cancel()
	return err
}

// stopPoller asks the poller to stop; controls keep c.ctx.
func (c *Console) stopPoller() {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// poller reads every group every Poll, or at once when kicked (after a
// control request), until Close.
func (c *Console) poller() {
	defer c.wg.Done()
	t := time.NewTimer(0)
	defer t.Stop()
	first := true
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		case <-c.kick:
		}
		if c.isClosed() {
			return
		}
		c.poll()
		if first {
			close(c.first)
			first = false
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(c.cfg.Poll)
	}
}

func (c *Console) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// pollTimeout bounds one group's read.
func (c *Console) pollTimeout() time.Duration { return max(5*c.cfg.Poll, 10*time.Second) }

// poll reads every group, four at a time.
func (c *Console) poll() {
	reads := make([]groupRead, len(c.groups))
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i, g := range c.groups {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(c.ctx, c.pollTimeout())
			defer cancel()
			st, err := c.cfg.Status.Status(ctx, g)
			reads[i] = groupRead{status: st, err: err, at: time.Now()}
		}()
	}
	wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.snap.groups == nil {
		c.snap.groups = map[string]groupRead{}
	}
	for i, g := range c.groups {
		if reads[i].status == nil && reads[i].err != nil && errors.Is(reads[i].err, context.Canceled) {
			continue // closing
		}
		c.snap.groups[g] = reads[i]
	}
	c.snap.at = time.Now()
}

// kickPoll asks for a read now.
func (c *Console) kickPoll() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// snapshotFor waits (bounded) for the first poll, then returns the reads.
func (c *Console) snapshotFor(ctx context.Context) snapshot {
	t := time.NewTimer(c.pollTimeout())
	defer t.Stop()
	select {
	case <-c.first:
	case <-ctx.Done():
	case <-t.C:
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := snapshot{at: c.snap.at, groups: make(map[string]groupRead, len(c.snap.groups))}
	for k, v := range c.snap.groups {
		s.groups[k] = v
	}
	return s
}

// operator returns who is asking, or "" and why the console is read-only
// for this request.
func (c *Console) operator(r *http.Request) (string, string) {
	id := c.cfg.Identity
	if id.Fixed != "" {
		return id.Fixed, ""
	}
	if id.Header == "" {
		return "", "no operator identity is configured (serve -operator-header or -operator): read-only"
	}
	vals := r.Header.Values(id.Header)
	v := ""
	if len(vals) > 0 {
		v = strings.TrimSpace(vals[0])
	}
	if v == "" {
		return "", "not signed in (no " + id.Header + " header from the proxy): read-only"
	}
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	trusted := false
	if err == nil {
		for _, p := range id.TrustedProxies {
			if p.Contains(ap.Addr().Unmap()) {
				trusted = true
				break
			}
		}
	}
	if !trusted {
		c.cfg.Logger.Warn("lb console: ignoring the operator header of a request from an untrusted address", slog.String("header", id.Header), slog.String("remote", r.RemoteAddr))
		return "", "the " + id.Header + " header comes from an address that is not a trusted proxy: read-only"
	}
	// A proxy that appends its header to the client's copy instead of
	// replacing it gives two values, or one joined with a comma: which
	// one is the proxy's cannot be told, so neither is believed.
	if len(vals) > 1 || strings.Contains(v, ",") {
		c.cfg.Logger.Warn("lb console: ignoring an operator header with several values (the proxy must overwrite the client's copy)", slog.String("header", id.Header), slog.String("remote", r.RemoteAddr))
		return "", "the " + id.Header + " header has several values (the proxy must replace the client's copy, not add to it): read-only"
	}
	if err := validOperator(v); err != nil {
		return "", "the " + id.Header + " header is not a usable operator name: read-only"
	}
	return v, ""
}

// operatorVia says how the operator of r was established, for the audit
// (lb.Request.OperatorVia).
func (c *Console) operatorVia(r *http.Request) string {
	if c.cfg.Identity.Fixed != "" {
		return "console: fixed operator"
	}
	return "console: header " + c.cfg.Identity.Header + " from trusted proxy " + r.RemoteAddr
}

func validOperator(s string) error {
	if s == "" || len(s) > 200 {
		return errors.New("must be 1 to 200 bytes")
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return errors.New("must not contain control characters")
		}
	}
	return nil
}

func validToken(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		ok := r == '-' || r == '_' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')
		if !ok {
			return false
		}
	}
	return true
}
