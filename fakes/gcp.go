package fakes

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/auth/oauth2adapt"
	"cloud.google.com/go/cloudsqlconn/errtype"
	"github.com/googleapis/gax-go/v2/apierror"
	"golang.org/x/oauth2"
	"google.golang.org/api/googleapi"
)

// This file builds, from the real types, the errors that cloudsqlconn
// v1.26.0 and its Google client libraries return (see TokenFetch and
// AdminAPI). Each call builds fresh values.

// tokenError is what an auth.TokenProvider adapted from an oauth2.TokenSource
// returns when the token endpoint answers code: *auth.Error wrapping
// *oauth2.RetrieveError, both with Response set.
func tokenError(code int) *auth.Error {
	var body []byte
	re := &oauth2.RetrieveError{}
	switch code {
	case http.StatusBadRequest:
		re.ErrorCode, re.ErrorDescription = "invalid_grant", "Invalid grant: account not found"
	case http.StatusUnauthorized:
		re.ErrorCode, re.ErrorDescription = "invalid_client", "The OAuth client was not found."
	}
	if re.ErrorCode != "" {
		body, _ = json.Marshal(map[string]string{"error": re.ErrorCode, "error_description": re.ErrorDescription})
	} else {
		body = []byte(statusText(code))
	}
	re.Body = body
	re.Response = response(code, http.MethodPost, "https://oauth2.googleapis.com/token", len(body))
	if re.ErrorCode != "" {
		re.Response.Header.Set("Content-Type", "application/json; charset=utf-8")
	} else {
		re.Response.Header.Set("Content-Type", "text/plain; charset=utf-8")
	}
	// The same constructor cloudsqlconn's token provider adapter uses.
	return oauth2adapt.AuthErrorFromRetrieveError(re)
}

// tokenDialError is the dial error of cloudsqlconn when the IAM login token
// fetch fails with code.
func tokenDialError(code int) error {
	return fmt.Errorf("fetch ephemeral cert failed: %w",
		errtype.NewRefreshError("failed to retrieve Oauth2 token", ConnName, tokenError(code)))
}

// apiError is the error the generated Cloud SQL Admin API client returns for
// an HTTP error status: *googleapi.Error wrapping *apierror.APIError.
func apiError(code int) *googleapi.Error {
	msg, reason := statusText(code), ""
	switch {
	case code == http.StatusForbidden:
		msg, reason = "The client is not authorized to make this request.", "notAuthorized"
	case code == http.StatusNotFound:
		msg, reason = "The Cloud SQL instance does not exist.", "instanceDoesNotExist"
	case code == http.StatusTooManyRequests:
		msg, reason = "Quota exceeded for quota metric 'Connect Queries'.", "rateLimitExceeded"
	case code == http.StatusServiceUnavailable:
		msg, reason = "The service is currently unavailable.", "backendError"
	case code >= 500:
		reason = "backendError"
	}
	type item struct {
		Message string `json:"message"`
		Domain  string `json:"domain"`
		Reason  string `json:"reason"`
	}
	type inner struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Errors  []item `json:"errors,omitempty"`
	}
	in := inner{Code: code, Message: msg}
	e := &googleapi.Error{Code: code, Message: msg}
	if reason != "" {
		in.Errors = []item{{Message: msg, Domain: "global", Reason: reason}}
		e.Errors = []googleapi.ErrorItem{{Reason: reason, Message: msg}}
	}
	body, _ := json.Marshal(map[string]inner{"error": in})
	e.Body = string(body)
	e.Header = http.Header{"Content-Type": {"application/json; charset=UTF-8"}}
	// As google.golang.org/api/internal/gensupport.WrapError does.
	if ae, ok := apierror.ParseError(e, false); ok {
		e.Wrap(ae)
	}
	return e
}

// apiDialError is the dial error of cloudsqlconn when the Admin API
// connectSettings call fails with code.
func apiDialError(code int) error {
	return fmt.Errorf("failed to get instance: %w",
		errtype.NewRefreshError("failed to get instance metadata", ConnName, apiError(code)))
}

// response is a consumed HTTP response as the Google client libraries keep
// it in their errors.
func response(code int, method, rawURL string, n int) *http.Response {
	u, _ := url.Parse(rawURL)
	return &http.Response{
		Status:        strconv.Itoa(code) + " " + statusText(code),
		StatusCode:    code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{},
		Body:          http.NoBody,
		ContentLength: int64(n),
		Request:       &http.Request{Method: method, URL: u, Header: http.Header{}},
	}
}

func statusText(code int) string {
	if s := http.StatusText(code); s != "" {
		return s
	}
	return "status code " + strconv.Itoa(code)
}
