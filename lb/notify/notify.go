package notify

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdfast-db/holdfast/lb"
	"github.com/holdfast-db/holdfast/lb/internal/httpcall"
)

// Defaults of [Config].
const (
	DefaultQueue      = 100
	DefaultAttempts   = 6
	DefaultBackoff    = time.Second
	DefaultMaxBackoff = 30 * time.Second
	DefaultTimeout    = 10 * time.Second
)

// Webhook is one receiver.
type Webhook struct {
	// Name names the webhook in logs and errors; its URL never appears.
	Name string
	// Format is lb.FormatTeams, lb.FormatSlack or lb.FormatJSON.
	Format string
	// URL is where events are posted; it usually holds a token.
	URL lb.Secret
	// Events, when not empty, are the only kinds sent.
	Events []lb.EventKind
	// Groups, when not empty, are the only groups whose events are sent.
	Groups []string
}

// Config configures [New].
type Config struct {
	// Webhooks receive the events. At least one.
	Webhooks []Webhook
	// Queue is how many events wait per webhook; beyond it Notify drops
	// the event (counted in Stats, and logged). Default DefaultQueue.
	Queue int
	// Attempts is how many times a delivery is tried (>= 1). Default
	// DefaultAttempts.
	Attempts int
	// Backoff is the wait before the first retry; it doubles up to
	// MaxBackoff, with ±20% jitter. A 429's Retry-After is honoured within
	// MaxBackoff. Defaults DefaultBackoff and DefaultMaxBackoff.
	Backoff, MaxBackoff time.Duration
	// Timeout bounds each HTTP request. Default DefaultTimeout.
	Timeout time.Duration
	// HTTPClient sends the requests. Default: a client of its own.
	HTTPClient *http.Client
	// Logger receives a line for each event given up or dropped. Default
	// slog.Default().
	Logger *slog.Logger
}

// FromSettings turns the configuration file's notify section into
// webhooks, resolving their URLs with getenv.
func FromSettings(s lb.NotifySettings, getenv func(string) string) ([]Webhook, error) {
	var out []Webhook
	for _, w := range s.Webhooks {
		u, err := w.ResolveURL(getenv)
		if err != nil {
			return nil, err
		}
		out = append(out, Webhook{Name: w.Name, Format: w.Format, URL: u, Events: w.Events, Groups: w.Groups})
	}
	return out, nil
}

// Stats counts a Dispatcher's deliveries.
type Stats struct {
	Sent    int64 // events delivered
	Retried int64 // attempts that failed and were tried again
	Failed  int64 // events given up after the last attempt, or refused for good (4xx)
	Dropped int64 // events not queued: the queue was full, or the Dispatcher closed
}

// Dispatcher sends events to webhooks. It implements [lb.Notifier]:
// Notify never blocks and never fails; each webhook has a queue and a
// goroutine that delivers its events in order, retrying with backoff.
// Create it with [New] and [Dispatcher.Close] it.
type Dispatcher struct {
	cfg    Config
	http   httpcall.Client
	hooks  []*hook
	ctx    context.Context // ends when Close gives up
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.RWMutex // held (read) while queueing, (write) by Close
	closed bool

	sent, retried, failed, dropped atomic.Int64
}

type hook struct {
	Webhook
	queue chan lb.Event
}

// New validates cfg and starts one goroutine per webhook.
func New(cfg Config) (*Dispatcher, error) {
	if len(cfg.Webhooks) == 0 {
		return nil, &lb.ConfigError{Pkg: "notify", Field: "Webhooks", Why: "at least one is required"}
	}
	if cfg.Queue < 0 || cfg.Attempts < 0 || cfg.Backoff < 0 || cfg.MaxBackoff < 0 || cfg.Timeout < 0 {
		return nil, &lb.ConfigError{Pkg: "notify", Field: "Config", Why: "Queue, Attempts, Backoff, MaxBackoff and Timeout must not be negative"}
	}
	names := map[string]bool{}
	for i, w := range cfg.Webhooks {
		field := "Webhooks." + strconv.Itoa(i)
		switch {
		case w.Name == "" || names[w.Name]:
			return nil, &lb.ConfigError{Pkg: "notify", Field: field + ".Name", Why: "must be set and unique"}
		case w.Format != lb.FormatTeams && w.Format != lb.FormatSlack && w.Format != lb.FormatJSON:
			return nil, &lb.ConfigError{Pkg: "notify", Field: field + ".Format", Why: "must be teams, slack or json"}
		}
		u, err := url.Parse(w.URL.Reveal())
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, &lb.ConfigError{Pkg: "notify", Field: field + ".URL", Why: "must be an absolute http or https URL"}
		}
		names[w.Name] = true
	}
	cfg.Queue = cmp.Or(cfg.Queue, DefaultQueue)
	cfg.Attempts = cmp.Or(cfg.Attempts, DefaultAttempts)
	cfg.Backoff = cmp.Or(cfg.Backoff, DefaultBackoff)
	cfg.MaxBackoff = cmp.Or(cfg.MaxBackoff, DefaultMaxBackoff)
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	cfg.HTTPClient = cmp.Or(cfg.HTTPClient, &http.Client{})
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	d := &Dispatcher{cfg: cfg, http: httpcall.Client{HTTP: cfg.HTTPClient, Timeout: cfg.Timeout, Header: http.Header{"User-Agent": {"holdfast-lb"}}, Limit: 64 << 10}}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	for _, w := range cfg.Webhooks {
		h := &hook{Webhook: w, queue: make(chan lb.Event, cfg.Queue)}
		d.hooks = append(d.hooks, h)
		d.wg.Add(1)
		go d.run(h)
	}
	return d, nil
}

var _ lb.Notifier = (*Dispatcher)(nil)

// Notify queues e for every webhook that wants it. It never blocks: when
// a queue is full, or the Dispatcher is closed, the event is dropped.
func (d *Dispatcher) Notify(e lb.Event) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	for _, h := range d.hooks {
		if !h.wants(e) {
			continue
		}
		if d.closed {
			d.dropped.Add(1)
			continue
		}
		select {
		case h.queue <- e:
		default:
			d.dropped.Add(1)
			d.cfg.Logger.Warn("lb notify: queue full, event dropped", slog.String("webhook", h.Name), slog.String("event", string(e.Kind)), slog.String("group", e.Group))
		}
	}
}

func (h *hook) wants(e lb.Event) bool {
	return (len(h.Events) == 0 || slices.Contains(h.Events, e.Kind)) && (len(h.Groups) == 0 || slices.Contains(h.Groups, e.Group))
}

// Stats returns the counts so far.
func (d *Dispatcher) Stats() Stats {
	return Stats{Sent: d.sent.Load(), Retried: d.retried.Load(), Failed: d.failed.Load(), Dropped: d.dropped.Load()}
}

// Close stops taking events and delivers those queued, retries
// included, until ctx ends; then it abandons the rest (counted as
// failed) and returns ctx's error. It waits for its goroutines in every
// case. It is idempotent.
func (d *Dispatcher) Close(ctx context.Context) error {
	d.mu.Lock()
	if !d.closed {
		d.closed = true
		for _, h := range d.hooks {
			close(h.queue)
		}
	}
	d.mu.Unlock()
	done := make(chan struct{})
	go func() {
		d.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		d.cancel()
		return nil
	case <-ctx.Done():
		d.cancel()
		<-done
		return ctx.Err()
	}
}

func (d *Dispatcher) run(h *hook) {
	defer d.wg.Done()
	for e := range h.queue {
		if d.ctx.Err() != nil {
			d.failed.Add(1)
			continue
		}
		d.deliver(h, e)
	}
}

// DeliveryError is a delivery that failed: the receiver answered Status
// (0 when no answer came; Err says why). It is retryable when Status is
// 0, 408, 429 or 5xx. It never holds the webhook's URL.
type DeliveryError struct {
	Webhook string
	Status  int
	Err     error
}

// Error returns for example "notify: webhook ops-teams: HTTP 503".
func (e *DeliveryError) Error() string {
	return httpcall.Text("notify: webhook "+e.Webhook, e.Status, "", e.Err)
}

// Unwrap returns Err.
func (e *DeliveryError) Unwrap() error { return e.Err }

// Retryable reports whether another attempt may succeed.
func (e *DeliveryError) Retryable() bool {
	return e.Status == 0 || e.Status == http.StatusRequestTimeout || e.Status == http.StatusTooManyRequests || e.Status >= 500
}

// deliver tries the event until it is sent, refused for good, out of
// attempts, or the Dispatcher gives up.
func (d *Dispatcher) deliver(h *hook, e lb.Event) {
	body, err := Payload(h.Format, e)
	if err != nil {
		d.failed.Add(1)
		d.cfg.Logger.Error("lb notify: cannot encode the event", slog.String("webhook", h.Name), slog.String("error", err.Error()))
		return
	}
	retryable := func(err error) bool {
		de, _ := errors.AsType[*DeliveryError](err)
		return de != nil && de.Retryable()
	}
	var retryAfter time.Duration // the last answer's
	attempt := func() (err error) {
		retryAfter, err = d.post(h, body)
		return err
	}
	wait := d.cfg.Backoff
	pause := func(error) time.Duration {
		d.retried.Add(1)
		p := jitter(wait)
		if retryAfter > 0 {
			p = retryAfter
		}
		wait = min(2*wait, d.cfg.MaxBackoff)
		return min(p, d.cfg.MaxBackoff)
	}
	attempts, err := httpcall.Retry(d.ctx, d.cfg.Attempts, retryable, pause, attempt)
	if err != nil {
		d.failed.Add(1)
		d.cfg.Logger.Warn("lb notify: event not delivered", slog.String("webhook", h.Name), slog.String("event", string(e.Kind)), slog.String("group", e.Group), slog.Int("attempts", attempts), slog.String("error", err.Error()))
		return
	}
	d.sent.Add(1)
}

// jitter returns d ± 20%.
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// post sends one attempt; it returns the receiver's Retry-After.
func (d *Dispatcher) post(h *hook, body []byte) (time.Duration, error) {
	ans, err := d.http.Send(d.ctx, http.MethodPost, h.URL.Reveal(), body)
	if err != nil {
		return 0, &DeliveryError{Webhook: h.Name, Err: redact(err, h.URL.Reveal())}
	}
	if ans.OK() {
		return 0, nil
	}
	var ra time.Duration
	if s, err := strconv.Atoi(ans.Header.Get("Retry-After")); err == nil && s > 0 {
		ra = time.Duration(s) * time.Second
	}
	return ra, &DeliveryError{Webhook: h.Name, Status: ans.Status}
}

// redact drops the URL from a transport error.
func redact(err error, u string) error {
	msg := err.Error()
	if u != "" && strings.Contains(msg, u) {
		msg = strings.ReplaceAll(msg, u, lb.Redacted)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return errors.New("timed out: " + msg)
	}
	return errors.New(msg)
}

// Payload returns the JSON body of e in a webhook format:
//
//   - teams: {"type": "message", "attachments": [{"contentType":
//     "application/vnd.microsoft.card.adaptive", "content": <Adaptive Card
//     1.4 with the title, a fact set and the busy members>}]}, which
//     Teams Workflows ("Post to a channel when a webhook request is
//     received") and incoming webhooks take;
//   - slack: {"text": <title>, "blocks": [header, section, fields,
//     context]}, for an incoming webhook;
//   - json: the event's fields, with "title", "text" and "duration_ms".
func Payload(format string, e lb.Event) ([]byte, error) {
	switch format {
	case lb.FormatTeams:
		return json.Marshal(teams(e))
	case lb.FormatSlack:
		return json.Marshal(slack(e))
	case lb.FormatJSON:
		return json.Marshal(generic(e))
	}
	return nil, &lb.ConfigError{Pkg: "notify", Field: "format", Why: "unknown format " + strconv.Quote(format)}
}

type fact struct{ title, value string }

// facts are the event's details, in order.
func facts(e lb.Event) []fact {
	f := []fact{{"Group", e.Group}, {"Operator", e.Operator + "@" + e.Host}, {"Action", string(e.Action)}, {"Members", strconv.Itoa(len(e.Members))}}
	if e.Holder != nil {
		f = append(f, fact{"Lock holder", e.Holder.String()})
	}
	if e.Duration > 0 {
		f = append(f, fact{"Took", e.Duration.Round(time.Millisecond).String()})
	}
	if e.AuditID != 0 {
		f = append(f, fact{"Audit", "#" + strconv.FormatInt(e.AuditID, 10)})
	}
	return f
}

// severity is how bad the event is: "good", "warning" or "attention".
func severity(k lb.EventKind) string {
	switch k {
	case lb.EventTimedOut, lb.EventFailed, lb.EventDeployFailed:
		return "attention"
	case lb.EventLockRefused, lb.EventDrainStarted, lb.EventForcedOffline, lb.EventDisabled:
		return "warning"
	}
	return "good"
}

func busyLines(e lb.Event) []string {
	var out []string
	for _, b := range e.Busy {
		n := "connections not read"
		if b.Conns >= 0 {
			n = strconv.FormatInt(b.Conns, 10) + " connections"
		}
		out = append(out, b.Member+": "+n)
	}
	return out
}

func teams(e lb.Event) map[string]any {
	color := map[string]string{"attention": "Attention", "warning": "Warning", "good": "Good"}[severity(e.Kind)]
	var fs []map[string]string
	for _, f := range facts(e) {
		fs = append(fs, map[string]string{"title": f.title, "value": f.value})
	}
	body := []any{
		map[string]any{"type": "TextBlock", "text": e.Title(), "weight": "Bolder", "size": "Medium", "wrap": true, "color": color},
		map[string]any{"type": "FactSet", "facts": fs},
	}
	if lines := busyLines(e); len(lines) > 0 {
		body = append(body, map[string]any{"type": "TextBlock", "text": "Still in use:\n\n- " + strings.Join(lines, "\n- "), "wrap": true})
	}
	for _, s := range []string{e.Error, e.Note} {
		if s != "" {
			body = append(body, map[string]any{"type": "TextBlock", "text": s, "wrap": true, "isSubtle": true})
		}
	}
	return map[string]any{
		"type": "message",
		"attachments": []any{map[string]any{
			"contentType": "application/vnd.microsoft.card.adaptive",
			"contentUrl":  nil,
			"content": map[string]any{
				"$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
				"type":    "AdaptiveCard",
				"version": "1.4",
				"body":    body,
			},
		}},
	}
}

func slack(e lb.Event) map[string]any {
	title := e.Title()
	header := title
	if len(header) > 150 { // Slack's limit for a header block
		header = header[:147] + "..."
	}
	var fields []any
	for _, f := range facts(e) {
		fields = append(fields, map[string]any{"type": "mrkdwn", "text": "*" + f.title + "*\n" + f.value})
	}
	if len(fields) > 10 { // Slack's limit for a section's fields
		fields = fields[:10]
	}
	blocks := []any{
		map[string]any{"type": "header", "text": map[string]any{"type": "plain_text", "text": header}},
		map[string]any{"type": "section", "fields": fields},
	}
	if lines := busyLines(e); len(lines) > 0 {
		blocks = append(blocks, map[string]any{"type": "section", "text": map[string]any{"type": "mrkdwn", "text": "*Still in use*\n• " + strings.Join(lines, "\n• ")}})
	}
	var notes []string
	for _, s := range []string{e.Error, e.Note} {
		if s != "" {
			notes = append(notes, s)
		}
	}
	if len(notes) > 0 {
		blocks = append(blocks, map[string]any{"type": "context", "elements": []any{map[string]any{"type": "mrkdwn", "text": strings.Join(notes, "\n")}}})
	}
	return map[string]any{"text": title, "blocks": blocks}
}

// genericEvent is the json format's body.
type genericEvent struct {
	Source     string          `json:"source"`
	Kind       lb.EventKind    `json:"kind"`
	Severity   string          `json:"severity"`
	Title      string          `json:"title"`
	Text       string          `json:"text"`
	Time       time.Time       `json:"time"`
	Group      string          `json:"group"`
	Operator   string          `json:"operator"`
	Host       string          `json:"host"`
	Action     lb.Action       `json:"action"`
	AuditID    int64           `json:"audit_id,omitempty"`
	Members    []string        `json:"members"`
	Busy       []lb.BusyMember `json:"busy,omitempty"`
	Holder     *holder         `json:"holder,omitempty"`
	DurationMS int64           `json:"duration_ms,omitempty"`
	Error      string          `json:"error,omitempty"`
	Note       string          `json:"note,omitempty"`
}

type holder struct {
	Owner string    `json:"owner"`
	Host  string    `json:"host"`
	Since time.Time `json:"since"`
}

func generic(e lb.Event) genericEvent {
	g := genericEvent{
		Source: "holdfast-lb", Kind: e.Kind, Severity: severity(e.Kind), Title: e.Title(), Text: e.Text(), Time: e.Time,
		Group: e.Group, Operator: e.Operator, Host: e.Host, Action: e.Action, AuditID: e.AuditID, Members: e.Members,
		Busy: e.Busy, DurationMS: e.Duration.Milliseconds(), Error: e.Error, Note: e.Note,
	}
	if g.Members == nil {
		g.Members = []string{}
	}
	if e.Holder != nil {
		g.Holder = &holder{Owner: e.Holder.Owner, Host: e.Holder.Host, Since: e.Holder.Since}
	}
	return g
}
