package rest

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, secret, want string
	}{
		{"plain", "bad password p@ss/w0rd\"x", `p@ss/w0rd"x`, "bad password [REDACTED]"},
		{"json escaped", `{"password":"p@ss/w0rd\"x"}`, `p@ss/w0rd"x`, `{"password":"[REDACTED]"}`},
		{"url escaped", "GET /x?pw=p%40ss%2Fw0rd%22x", `p@ss/w0rd"x`, "GET /x?pw=[REDACTED]"},
		{"empty secret", "nothing", "", "nothing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Redact(tt.in, tt.secret); got != tt.want {
				t.Errorf("Redact = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestMessageIsBoundedAndOneLine(t *testing.T) {
	t.Parallel()
	c := &Client{Secrets: func() []string { return []string{"tok3n"} }}
	got := c.Message("line one\n\tline two tok3n " + strings.Repeat("é", 400))
	if strings.Contains(got, "\n") || strings.Contains(got, "tok3n") || len(got) > 310 || !strings.HasSuffix(got, "...") {
		t.Errorf("Message = %q", got)
	}
	if !strings.HasPrefix(got, "line one line two [REDACTED] ") {
		t.Errorf("Message = %q", got)
	}
}

type failingTransport struct{ err error }

func (f failingTransport) RoundTrip(*http.Request) (*http.Response, error) { return nil, f.err }

func TestTransportErrorsAreRedactedButKeepTheirChain(t *testing.T) {
	t.Parallel()
	c := &Client{
		HTTP:    &http.Client{Transport: failingTransport{err: errors.Join(context.DeadlineExceeded, errors.New("peer said hunter22"))}},
		Base:    "http://device",
		Secrets: func() []string { return []string{"hunter22"} },
	}
	_, err := c.Do(context.Background(), "GET", "/x", nil, nil)
	if err == nil || strings.Contains(err.Error(), "hunter22") || !strings.Contains(err.Error(), Redacted) {
		t.Fatalf("Do = %v", err)
	}
	if !IsContext(err) {
		t.Errorf("the redacted error lost its chain: %v", err)
	}
}
