package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"
)

// Redacted replaces secrets.
const Redacted = "[REDACTED]"

// maxBody bounds the response bytes read.
const maxBody = 1 << 20

// maxMessage bounds a device message kept in an error.
const maxMessage = 300

// Client sends JSON requests to one device.
type Client struct {
	HTTP    *http.Client
	Base    string          // "https://host:port", no trailing slash
	Secrets func() []string // values to redact from messages and errors
}

// Response is a device's answer.
type Response struct {
	Status int
	Body   []byte
}

// Do sends a request with a JSON body (when body is not nil) and the given
// headers, and reads the answer. The error is a transport error, redacted.
func (c *Client) Do(ctx context.Context, method, path string, hdr http.Header, body any) (*Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, rd)
	if err != nil {
		return nil, c.redactErr(err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, c.redactErr(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, c.redactErr(err)
	}
	return &Response{Status: resp.StatusCode, Body: b}, nil
}

// Message returns s redacted, on one line, and bounded.
func (c *Client) Message(s string) string {
	s = Redact(s, c.secrets()...)
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxMessage {
		cut := maxMessage
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}

func (c *Client) secrets() []string {
	if c.Secrets == nil {
		return nil
	}
	return c.Secrets()
}

func (c *Client) redactErr(err error) error {
	msg := err.Error()
	r := Redact(msg, c.secrets()...)
	if r == msg {
		return err
	}
	return &redactedError{msg: r, err: err}
}

// redactedError hides a message holding a secret while keeping the chain
// for errors.Is and errors.As.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// Redact replaces every non-empty secret in s, and its JSON- and
// URL-escaped forms, with Redacted.
func Redact(s string, secrets ...string) string {
	for _, sec := range secrets {
		if sec == "" {
			continue
		}
		s = strings.ReplaceAll(s, sec, Redacted)
		forms := []string{url.QueryEscape(sec), url.PathEscape(sec)}
		if j, err := json.Marshal(sec); err == nil && len(j) >= 2 {
			forms = append(forms, string(j[1:len(j)-1]))
		}
		for _, f := range forms {
			if f != sec {
				s = strings.ReplaceAll(s, f, Redacted)
			}
		}
	}
	return s
}

// IsContext reports whether err comes from a canceled or expired context.
func IsContext(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
