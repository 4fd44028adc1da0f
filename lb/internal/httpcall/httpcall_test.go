package httpcall

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

var errAgain = errors.New("again")

func retryable(err error) bool { return errors.Is(err, errAgain) }

func TestRetry(t *testing.T) {
	none := func(error) time.Duration { return 0 }
	for _, tt := range []struct {
		name   string
		errs   []error // what the calls return, the last one repeating
		n      int
		want   int
		wantOK bool
	}{
		{"first call succeeds", []error{nil}, 3, 1, true},
		{"succeeds after a retry", []error{errAgain, nil}, 3, 2, true},
		{"bounded", []error{errAgain}, 3, 3, false},
		{"not retryable", []error{errors.New("for good")}, 3, 1, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			n, err := Retry(context.Background(), tt.n, retryable, none, func() error {
				calls++
				return tt.errs[min(calls, len(tt.errs))-1]
			})
			if n != tt.want || calls != tt.want || (err == nil) != tt.wantOK {
				t.Errorf("Retry = %d, %v after %d calls; want %d calls, ok %v", n, err, calls, tt.want, tt.wantOK)
			}
		})
	}
}

func TestRetryEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	start := time.Now()
	n, err := Retry(ctx, 5, retryable, func(error) time.Duration { cancel(); return time.Hour }, func() error {
		calls++
		return errAgain
	})
	if n != 1 || calls != 1 || !errors.Is(err, errAgain) || time.Since(start) > time.Minute {
		t.Errorf("Retry = %d, %v after %d calls, want the first call's error at once", n, err, calls)
	}
}

func TestSend(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Content-Type") != "application/json" || r.Header.Get("X-Test") != "1" {
			w.WriteHeader(http.StatusBadRequest)
		}
		_, _ = w.Write([]byte(strings.Repeat("x", 100)))
	}))
	defer srv.Close()
	c := Client{HTTP: srv.Client(), Timeout: time.Minute, Header: http.Header{"X-Test": {"1"}}, Limit: 10}
	ans, err := c.Send(context.Background(), http.MethodPost, srv.URL, []byte(`{}`))
	if err != nil || !ans.OK() || len(ans.Body) != 10 {
		t.Fatalf("Send = %+v, %v; want 200 and 10 bytes", ans, err)
	}
	srv.Close()
	if _, err := c.Send(context.Background(), http.MethodPost, srv.URL, nil); err == nil || strings.Contains(err.Error(), srv.URL) {
		t.Errorf("Send to a closed server = %v, want a transport error without the URL", err)
	}
}

func TestText(t *testing.T) {
	if got := Text("x: op", 503, "busy", errors.New("eof")); got != "x: op: HTTP 503: busy: eof" {
		t.Errorf("Text = %q", got)
	}
	if got := Text("x: op", 0, "", nil); got != "x: op" {
		t.Errorf("Text = %q", got)
	}
}
