// Package httpcall is what the lb module's clients of the services it
// reports to (notify's webhooks, alertmanager's silences) share: one
// request with a JSON body within a timeout and a bounded read of the
// answer, a retry loop, and the text of a failed call.
package httpcall

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Client sends requests to a service.
type Client struct {
	HTTP    *http.Client
	Timeout time.Duration // bounds each request, the answer's read included
	Header  http.Header   // sent with every request
	Limit   int64         // the most bytes of an answer read
}

// Answer is the service's answer to a request.
type Answer struct {
	Status int
	Header http.Header
	Body   []byte // at most Client.Limit bytes; as far as it could be read
}

// OK reports whether the status is 2xx.
func (a *Answer) OK() bool { return a.Status >= 200 && a.Status <= 299 }

// Send sends a request, with body as its JSON body when it is not nil,
// and reads the answer. Its error is a transport error, without the
// *url.Error around it (which quotes the URL), or "bad request" when no
// request could be made of method and url.
func (c *Client) Send(ctx context.Context, method, url string, body []byte) (*Answer, error) {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, errors.New("bad request")
	}
	for k, v := range c.Header {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, unwrapURL(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, c.Limit))
	return &Answer{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

func unwrapURL(err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return ue.Err
	}
	return err
}

// Retry calls attempt until it returns nil or an error retryable
// rejects, attempts calls have been made, or ctx ends (during a pause
// too). Before each call but the first it waits pause(err), err being
// the previous call's error. It returns the calls made and the last
// call's error.
func Retry(ctx context.Context, attempts int, retryable func(error) bool, pause func(error) time.Duration, attempt func() error) (int, error) {
	for n := 1; ; n++ {
		err := attempt()
		if err == nil || !retryable(err) || n >= attempts || ctx.Err() != nil {
			return n, err
		}
		t := time.NewTimer(pause(err))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return n, err
		}
	}
}

// Text is the text of a failed call: what, then ": HTTP status" unless
// status is 0, ": msg" unless msg is empty, and ": " and err's text
// unless err is nil.
func Text(what string, status int, msg string, err error) string {
	s := what
	if status != 0 {
		s += ": HTTP " + strconv.Itoa(status)
	}
	if msg != "" {
		s += ": " + msg
	}
	if err != nil {
		s += ": " + err.Error()
	}
	return s
}
