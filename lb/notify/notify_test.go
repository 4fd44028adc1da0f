package notify_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/holdfast-db/holdfast/lb"
	"github.com/holdfast-db/holdfast/lb/notify"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// receiver is a local HTTP server that records what it is sent and
// answers with the statuses of script, in order (200 after them).
type receiver struct {
	srv *httptest.Server

	mu     sync.Mutex
	script []int
	got    []received
	seen   chan struct{} // one token per request
}

type received struct {
	path string
	body []byte
	at   time.Time
	ct   string
}

func newReceiver(t *testing.T, script ...int) *receiver {
	r := &receiver{script: script, seen: make(chan struct{}, 1000)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, received{path: req.URL.Path, body: b, at: time.Now(), ct: req.Header.Get("Content-Type")})
		code := 200
		if len(r.script) > 0 {
			code, r.script = r.script[0], r.script[1:]
		}
		r.mu.Unlock()
		if code == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "1")
		}
		w.WriteHeader(code)
		r.seen <- struct{}{}
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) requests() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

// wait waits for n requests in all.
func (r *receiver) wait(t *testing.T, n int) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for len(r.requests()) < n {
		select {
		case <-r.seen:
		case <-deadline.C:
			t.Fatalf("the receiver got %d requests, want %d", len(r.requests()), n)
		}
	}
}

func dispatcher(t *testing.T, cfg notify.Config) *notify.Dispatcher {
	t.Helper()
	if cfg.Backoff == 0 {
		cfg.Backoff = 20 * time.Millisecond
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = 200 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	d, err := notify.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = d.Close(ctx)
	})
	return d
}

var since = time.Date(2026, 12, 1, 9, 14, 3, 0, time.UTC)

var events = map[lb.EventKind]lb.Event{
	lb.EventDrainStarted: {Kind: lb.EventDrainStarted, Group: "payments", Operator: "alice", Host: "ci-7", Action: lb.ActionDrain, AuditID: 12, Members: []string{"f5 web/web-1:443", "a10 app-1:8443"}},
	lb.EventDrained:      {Kind: lb.EventDrained, Group: "payments", Operator: "alice", Host: "ci-7", Action: lb.ActionDrain, AuditID: 12, Members: []string{"f5 web/web-1:443", "a10 app-1:8443"}, Duration: 3200 * time.Millisecond},
	lb.EventTimedOut: {Kind: lb.EventTimedOut, Group: "payments", Operator: "alice", Host: "ci-7", Action: lb.ActionDrain, AuditID: 12, Members: []string{"f5 web/web-1:443", "a10 app-1:8443"},
		Busy: []lb.BusyMember{{Member: "f5 web/web-1:443", Conns: 3}}, Error: "lb: f5 web/web-1:443 not drained: 3 current connections after 2m0s"},
	lb.EventEnabled:      {Kind: lb.EventEnabled, Group: "payments", Operator: "alice", Host: "ci-7", Action: lb.ActionEnable, AuditID: 13, Members: []string{"f5 web/web-1:443"}},
	lb.EventLockRefused:  {Kind: lb.EventLockRefused, Group: "payments", Operator: "bob", Host: "ci-8", Action: lb.ActionDrain, AuditID: 14, Holder: &lb.Holder{Group: "payments", Owner: "alice", Host: "ci-7", Since: since}},
	lb.EventDeployFailed: {Kind: lb.EventDeployFailed, Group: "payments", Operator: "alice", Host: "ci-7", Action: lb.ActionDrain, Error: "./deploy.sh: exit status 3", Note: "left forced offline: 2 members"},
}

// Each format's body is the receiver's JSON shape, and says what
// happened.
func TestPayloadShapes(t *testing.T) {
	t.Parallel()
	for kind, e := range events {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			// Teams: a message with one Adaptive Card attachment.
			var tm struct {
				Type        string `json:"type"`
				Attachments []struct {
					ContentType string `json:"contentType"`
					Content     struct {
						Schema  string `json:"$schema"`
						Type    string `json:"type"`
						Version string `json:"version"`
						Body    []struct {
							Type  string `json:"type"`
							Text  string `json:"text"`
							Facts []struct{ Title, Value string }
						} `json:"body"`
					} `json:"content"`
				} `json:"attachments"`
			}
			decode(t, lb.FormatTeams, e, &tm)
			if tm.Type != "message" || len(tm.Attachments) != 1 || tm.Attachments[0].ContentType != "application/vnd.microsoft.card.adaptive" {
				t.Fatalf("teams = %+v", tm)
			}
			card := tm.Attachments[0].Content
			if card.Type != "AdaptiveCard" || card.Version != "1.4" || !strings.Contains(card.Schema, "adaptivecards.io") || len(card.Body) < 2 {
				t.Fatalf("card = %+v", card)
			}
			if card.Body[0].Type != "TextBlock" || card.Body[0].Text != e.Title() || card.Body[1].Type != "FactSet" || card.Body[1].Facts[0].Value != "payments" {
				t.Errorf("card body = %+v", card.Body)
			}
			all := mustJSON(t, lb.FormatTeams, e)
			// Slack: text for notifications, blocks for the channel.
			var sl struct {
				Text   string `json:"text"`
				Blocks []struct {
					Type string `json:"type"`
					Text *struct {
						Type string `json:"type"`
						Text string `json:"text"`
					} `json:"text"`
					Fields []struct {
						Type string `json:"type"`
						Text string `json:"text"`
					} `json:"fields"`
				} `json:"blocks"`
			}
			decode(t, lb.FormatSlack, e, &sl)
			if sl.Text != e.Title() || len(sl.Blocks) < 2 || sl.Blocks[0].Type != "header" || sl.Blocks[0].Text.Type != "plain_text" || sl.Blocks[1].Fields[0].Text != "*Group*\npayments" {
				t.Errorf("slack = %+v", sl)
			}
			slAll := mustJSON(t, lb.FormatSlack, e)
			// JSON: the event, with a title and a text.
			var js struct {
				Source, Kind, Severity, Title, Text, Group, Operator string
				AuditID                                              int64 `json:"audit_id"`
				Busy                                                 []lb.BusyMember
				Holder                                               *struct{ Owner string }
			}
			decode(t, lb.FormatJSON, e, &js)
			if js.Source != "holdfast-lb" || js.Kind != string(kind) || js.Title != e.Title() || js.Group != "payments" || js.AuditID != e.AuditID {
				t.Errorf("json = %+v", js)
			}
			switch kind {
			case lb.EventTimedOut:
				for _, body := range []string{all, slAll} {
					if !strings.Contains(body, "web/web-1:443: 3 connections") {
						t.Errorf("the timed-out message does not name the busy member:\n%s", body)
					}
				}
				if len(js.Busy) != 1 || js.Busy[0].Conns != 3 || js.Severity != "attention" || !strings.Contains(e.Title(), "TIMED OUT") {
					t.Errorf("json = %+v", js)
				}
			case lb.EventLockRefused:
				if js.Holder == nil || js.Holder.Owner != "alice" || !strings.Contains(all, "alice@ci-7 since 2026-12-01T09:14:03Z") {
					t.Errorf("the refusal does not name the holder: %+v\n%s", js, all)
				}
			case lb.EventDeployFailed:
				if !strings.Contains(slAll, "left forced offline") || !strings.Contains(all, "exit status 3") {
					t.Errorf("the deploy failure lacks its note or error:\n%s\n%s", slAll, all)
				}
			}
		})
	}
	if _, err := notify.Payload("irc", events[lb.EventDrained]); !errors.Is(err, lb.ErrInvalidConfig) {
		t.Errorf("Payload(irc) = %v", err)
	}
}

func mustJSON(t *testing.T, format string, e lb.Event) string {
	t.Helper()
	b, err := notify.Payload(format, e)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func decode(t *testing.T, format string, e lb.Event, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader([]byte(mustJSON(t, format, e))))
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", format, err)
	}
}

// Every webhook gets the events it wants, in order, as JSON posts.
func TestDeliversToEveryWebhook(t *testing.T) {
	t.Parallel()
	r := newReceiver(t)
	d := dispatcher(t, notify.Config{Webhooks: []notify.Webhook{
		{Name: "teams", Format: lb.FormatTeams, URL: lb.Secret(r.srv.URL + "/teams")},
		{Name: "slack", Format: lb.FormatSlack, URL: lb.Secret(r.srv.URL + "/slack"), Events: []lb.EventKind{lb.EventTimedOut}},
		{Name: "json", Format: lb.FormatJSON, URL: lb.Secret(r.srv.URL + "/json"), Groups: []string{"search"}},
	}})
	d.Notify(events[lb.EventDrainStarted])
	d.Notify(events[lb.EventTimedOut])
	r.wait(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}
	paths := map[string]int{}
	for _, rq := range r.requests() {
		paths[rq.path]++
		if rq.ct != "application/json" {
			t.Errorf("Content-Type %q", rq.ct)
		}
	}
	if paths["/teams"] != 2 || paths["/slack"] != 1 || paths["/json"] != 0 {
		t.Errorf("requests by path = %v, want teams 2, slack 1 (timed-out only), json 0 (other group)", paths)
	}
	if s := d.Stats(); s.Sent != 3 || s.Failed != 0 || s.Dropped != 0 {
		t.Errorf("stats = %+v", s)
	}
	d.Notify(events[lb.EventDrained]) // after Close: dropped, not blocked
	if s := d.Stats(); s.Dropped != 1 {
		t.Errorf("after Close, stats = %+v, want 1 dropped", s)
	}
}

// A failing receiver is retried with a growing backoff; a refusal for
// good (4xx) is not retried; attempts are bounded.
func TestRetries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		script   []int
		attempts int
		requests int
		sent     int64
		failed   int64
	}{
		{"5xx then ok", []int{503, 500}, 6, 3, 1, 0},
		{"429 then ok", []int{429}, 6, 2, 1, 0},
		{"bad request not retried", []int{400}, 6, 1, 0, 1},
		{"gone not retried", []int{410}, 6, 1, 0, 1},
		{"attempts bounded", []int{502, 502, 502, 502}, 3, 3, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newReceiver(t, tt.script...)
			d := dispatcher(t, notify.Config{Attempts: tt.attempts, Webhooks: []notify.Webhook{{Name: "w", Format: lb.FormatJSON, URL: lb.Secret(r.srv.URL)}}})
			d.Notify(events[lb.EventDrained])
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := d.Close(ctx); err != nil {
				t.Fatal(err)
			}
			got := r.requests()
			if len(got) != tt.requests {
				t.Fatalf("%d requests, want %d", len(got), tt.requests)
			}
			if s := d.Stats(); s.Sent != tt.sent || s.Failed != tt.failed {
				t.Errorf("stats = %+v", s)
			}
			// Backoff 20 ms doubling (±20%): the gaps grow.
			for i := 1; i < len(got); i++ {
				if gap := got[i].at.Sub(got[i-1].at); gap < 15*time.Millisecond {
					t.Errorf("retry %d came %v after the previous attempt, want a backoff", i, gap)
				}
			}
			if len(got) >= 3 && got[2].at.Sub(got[1].at) < got[1].at.Sub(got[0].at)*6/10 {
				t.Errorf("backoff did not grow: %v then %v", got[1].at.Sub(got[0].at), got[2].at.Sub(got[1].at))
			}
		})
	}
}

// A receiver that never answers blocks nothing: Notify returns at once,
// a full queue drops, and Close gives up at its deadline and still joins
// its goroutines (goleak checks in TestMain).
func TestHangingReceiverNeverBlocks(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hang.Close()
	defer close(release)
	d, err := notify.New(notify.Config{Queue: 2, Timeout: time.Minute, Webhooks: []notify.Webhook{{Name: "w", Format: lb.FormatSlack, URL: lb.Secret(hang.URL)}}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for range 10 {
		d.Notify(events[lb.EventDrainStarted])
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("10 Notify calls took %v", took)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := d.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close = %v, want the deadline", err)
	}
	s := d.Stats()
	if s.Dropped < 7 || s.Sent != 0 || s.Dropped+s.Failed != 10 {
		t.Errorf("stats = %+v, want at least 7 dropped (queue 2, one in flight) and the rest failed", s)
	}
}

// The webhook's URL (and its token) shows in no log line and no error.
func TestURLNeverLogged(t *testing.T) {
	t.Parallel()
	const token = "T0KEN-xoxb-very-secret"
	dead := httptest.NewServer(http.NotFoundHandler())
	u := dead.URL + "/services/" + token
	dead.Close() // connection refused from now on
	var logs bytes.Buffer
	var mu sync.Mutex
	d, err := notify.New(notify.Config{Attempts: 2, Backoff: time.Millisecond, Webhooks: []notify.Webhook{{Name: "ops-slack", Format: lb.FormatSlack, URL: lb.Secret(u)}},
		Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	d.Notify(events[lb.EventTimedOut])
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	out := logs.String()
	mu.Unlock()
	if !strings.Contains(out, "webhook=ops-slack") || !strings.Contains(out, "event not delivered") {
		t.Errorf("no log line for the failed delivery:\n%s", out)
	}
	if strings.Contains(out, token) {
		t.Errorf("the webhook's token is in the log:\n%s", out)
	}
	if s := d.Stats(); s.Failed != 1 || s.Retried != 1 {
		t.Errorf("stats = %+v", s)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	ok := notify.Webhook{Name: "w", Format: lb.FormatJSON, URL: "https://hooks.example/x"}
	tests := []struct {
		name string
		cfg  notify.Config
	}{
		{"no webhooks", notify.Config{}},
		{"no name", notify.Config{Webhooks: []notify.Webhook{{Format: lb.FormatJSON, URL: ok.URL}}}},
		{"duplicate", notify.Config{Webhooks: []notify.Webhook{ok, ok}}},
		{"bad format", notify.Config{Webhooks: []notify.Webhook{{Name: "w", Format: "irc", URL: ok.URL}}}},
		{"bad url", notify.Config{Webhooks: []notify.Webhook{{Name: "w", Format: lb.FormatJSON, URL: "hooks.example/x"}}}},
		{"negative", notify.Config{Webhooks: []notify.Webhook{ok}, Attempts: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := notify.New(tt.cfg)
			if !errors.Is(err, lb.ErrInvalidConfig) {
				t.Fatalf("New = %v", err)
			}
			if strings.Contains(err.Error(), "hooks.example") {
				t.Errorf("the error quotes the URL: %v", err)
			}
		})
	}
}

func TestFromSettings(t *testing.T) {
	t.Parallel()
	s := lb.NotifySettings{Webhooks: []lb.WebhookConfig{{Name: "t", Format: lb.FormatTeams, URLEnv: "TEAMS_URL"}}}
	ws, err := notify.FromSettings(s, func(k string) string { return map[string]string{"TEAMS_URL": "https://x.example/hook"}[k] })
	if err != nil || len(ws) != 1 || ws[0].URL.Reveal() != "https://x.example/hook" {
		t.Errorf("FromSettings = %+v, %v", ws, err)
	}
	if _, err := notify.FromSettings(s, func(string) string { return "" }); !errors.Is(err, lb.ErrInvalidConfig) || !strings.Contains(err.Error(), "TEAMS_URL is unset") {
		t.Errorf("unset variable: %v", err)
	}
}
