package alertmanager_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/holdfast-db/holdfast/lb"
	"github.com/holdfast-db/holdfast/lb/alertmanager"
	"github.com/holdfast-db/holdfast/lb/internal/amtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Against a real Alertmanager: the silence silences the group's alerts
// and no other, is bounded, and expires.
func TestSilenceLifecycle(t *testing.T) {
	t.Parallel()
	am := amtest.Start(t)
	c, err := alertmanager.New(alertmanager.Config{URL: am.URL})
	if err != nil {
		t.Fatal(err)
	}
	s := &alertmanager.Silencer{Client: c, Max: 30 * time.Minute, Matchers: map[string][]lb.Matcher{
		"payments": {{Name: "service", Value: "payments"}, {Name: "instance", Value: "pay-.*", IsRegex: true}},
	}}
	ctx := context.Background()
	am.PostAlert(t, map[string]string{"alertname": "NodeDown", "service": "payments", "instance": "pay-1"})
	am.PostAlert(t, map[string]string{"alertname": "NodeDown", "service": "search", "instance": "idx-1"})

	// Asked for 2h, bounded to 30m.
	id, d, err := s.Silence(ctx, "payments", "alice", "holdfast-lb deploy payments", 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if d != 30*time.Minute || id == "" {
		t.Errorf("silence %q for %v, want an id for 30m", id, d)
	}
	got, err := c.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != "active" || got.CreatedBy != "alice" || got.Comment != "holdfast-lb deploy payments" || len(got.Matchers) != 2 || !got.Matchers[1].IsRegex {
		t.Errorf("silence = %+v", got)
	}
	if span := got.EndsAt.Sub(got.StartsAt); span < 29*time.Minute || span > 31*time.Minute {
		t.Errorf("silence spans %v, want 30m", span)
	}
	// Alertmanager applies it to the payments alert only.
	waitAlerts(t, am, func(as []amtest.Alert) bool {
		var pay, search bool
		for _, a := range as {
			switch a.Labels["service"] {
			case "payments":
				pay = a.Status.State == "suppressed" && slices.Contains(a.Status.SilencedBy, id)
			case "search":
				search = a.Status.State == "active" && len(a.Status.SilencedBy) == 0
			}
		}
		return pay && search
	})

	if err := s.Expire(ctx, id); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Get(ctx, id); err != nil || got.State != "expired" {
		t.Errorf("after Expire: %+v, %v", got, err)
	}
	if err := s.Expire(ctx, id); err != nil {
		t.Errorf("expiring twice: %v", err)
	}
	waitAlerts(t, am, func(as []amtest.Alert) bool {
		for _, a := range as {
			if a.Labels["service"] == "payments" {
				return a.Status.State == "active"
			}
		}
		return false
	})
	if n := len(am.Silences(t)); n != 1 {
		t.Errorf("%d silences, want 1", n)
	}

	// A group without matchers is not silenced.
	if id, _, err := s.Silence(ctx, "search", "alice", "", 0); id != "" || err != nil {
		t.Errorf("search: %q, %v", id, err)
	}
}

// waitAlerts waits until ok holds for Alertmanager's alerts.
func waitAlerts(t *testing.T, am *amtest.Server, ok func([]amtest.Alert) bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		as := am.Alerts(t)
		if ok(as) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("alerts never matched: %+v", as)
		}
		<-tick.C
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	am := amtest.Start(t)
	c, err := alertmanager.New(alertmanager.Config{URL: am.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Alertmanager refuses a silence of everything: not retryable.
	_, err = c.Create(ctx, alertmanager.Spec{Matchers: []lb.Matcher{{Name: "service", Value: ".*", IsRegex: true}}, Duration: time.Minute, CreatedBy: "alice"})
	ae, ok := errors.AsType[*alertmanager.Error](err)
	if !ok || ae.Status != http.StatusBadRequest || ae.Retryable() || !strings.Contains(err.Error(), "must not match the empty string") {
		t.Errorf("silence of everything: %v", err)
	}
	if err := c.Expire(ctx, "00000000-0000-0000-0000-000000000000"); !errors.Is(err, alertmanager.ErrAlertmanager) {
		t.Errorf("expiring an unknown silence: %v", err)
	}
	for _, spec := range []alertmanager.Spec{
		{Duration: time.Minute, CreatedBy: "a"},
		{Matchers: []lb.Matcher{{Name: "a", Value: "b"}}, CreatedBy: "a"},
		{Matchers: []lb.Matcher{{Name: "a", Value: "b"}}, Duration: time.Minute},
		{Matchers: []lb.Matcher{{Name: "a-b", Value: "b"}}, Duration: time.Minute, CreatedBy: "a"},
	} {
		if _, err := c.Create(ctx, spec); !errors.Is(err, lb.ErrInvalidConfig) {
			t.Errorf("Create(%+v) = %v, want a *lb.ConfigError", spec, err)
		}
	}
	if _, err := alertmanager.New(alertmanager.Config{URL: "http://user:pw@am:9093"}); !errors.Is(err, lb.ErrInvalidConfig) || strings.Contains(err.Error(), "pw") {
		t.Errorf("New with user info: %v", err)
	}
}

// An unreachable or failing Alertmanager is retried, a bounded number of
// times.
func TestRetriesTransientFailures(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) < 3 {
			http.Error(w, `"busy"`, http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte(`{"silenceID":"abc"}`))
	}))
	defer srv.Close()
	c, err := alertmanager.New(alertmanager.Config{URL: srv.URL, Attempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	id, err := c.Create(context.Background(), alertmanager.Spec{Matchers: []lb.Matcher{{Name: "a", Value: "b"}}, Duration: time.Minute, CreatedBy: "x"})
	if err != nil || id != "abc" || calls.Load() != 3 {
		t.Errorf("Create = %q, %v after %d calls", id, err, calls.Load())
	}
	srv.Close()
	_, err = c.Create(context.Background(), alertmanager.Spec{Matchers: []lb.Matcher{{Name: "a", Value: "b"}}, Duration: time.Minute, CreatedBy: "x"})
	if ae, ok := errors.AsType[*alertmanager.Error](err); !ok || !ae.Retryable() || ae.Status != 0 {
		t.Errorf("unreachable: %v", err)
	}
}
