package gcpfake

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/auth/oauth2adapt"
	"github.com/googleapis/gax-go/v2/apierror"
	"golang.org/x/oauth2"
	"google.golang.org/api/googleapi"
)

// APIMessages are the texts an Admin API answers its errors with where
// they differ between services.
type APIMessages struct {
	Forbidden string // 403, reason "notAuthorized"
	NotFound  string // 404
	// NotFoundReason is the reason of a 404.
	NotFoundReason string
}

// Describe returns the message, the reason and the status an Admin API
// answers for HTTP status code (an empty reason or status when it gives
// none).
func (m APIMessages) Describe(code int) (msg, reason, status string) {
	msg = StatusText(code)
	switch {
	case code == http.StatusForbidden:
		msg, reason, status = m.Forbidden, "notAuthorized", "PERMISSION_DENIED"
	case code == http.StatusNotFound:
		msg, reason, status = m.NotFound, m.NotFoundReason, "NOT_FOUND"
	case code == http.StatusTooManyRequests:
		msg, reason, status = "Quota exceeded for quota metric 'Connect Queries'.", "rateLimitExceeded", "RESOURCE_EXHAUSTED"
	case code == http.StatusUnauthorized:
		status = "UNAUTHENTICATED"
	case code == http.StatusServiceUnavailable:
		msg, reason, status = "The service is currently unavailable.", "backendError", "UNAVAILABLE"
	case code >= 500:
		reason, status = "backendError", "INTERNAL"
	}
	return msg, reason, status
}

// WriteError answers a Google API error, as JSON. An empty message or
// reason gets the one of Describe.
func (m APIMessages) WriteError(w http.ResponseWriter, code int, msg, reason string) {
	dmsg, dreason, status := m.Describe(code)
	if msg == "" {
		msg = dmsg
	}
	if reason == "" {
		reason = dreason
	}
	type item struct {
		Message string `json:"message"`
		Domain  string `json:"domain"`
		Reason  string `json:"reason,omitempty"`
	}
	type body struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Errors  []item `json:"errors"`
		Status  string `json:"status,omitempty"`
	}
	WriteJSON(w, code, map[string]body{"error": {
		Code: code, Message: msg, Status: status,
		Errors: []item{{Message: msg, Domain: "global", Reason: reason}},
	}})
}

// Error is the error a generated Google API client returns for an Admin
// API answer of HTTP status code: *googleapi.Error with the JSON body the
// API sends, wrapping *apierror.APIError, as
// google.golang.org/api/internal/gensupport.WrapError builds it.
func (m APIMessages) Error(code int) *googleapi.Error {
	e := m.Plain(code)
	if ae, ok := apierror.ParseError(e, false); ok {
		e.Wrap(ae)
	}
	return e
}

// Plain is Error without the wrapped *apierror.APIError: what
// googleapi.CheckResponseWithBody returns, in a GAPIC REST client (whose
// retry loop then wraps it in an *apierror.APIError itself).
func (m APIMessages) Plain(code int) *googleapi.Error {
	msg, reason, _ := m.Describe(code)
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
	return e
}

// TokenSourceError is what an auth.TokenProvider adapted from an
// oauth2.TokenSource returns when the token endpoint answers code:
// *auth.Error wrapping *oauth2.RetrieveError, both with Response set (so
// that Error never panics), with an OAuth2 error body for 400
// ("invalid_grant") and 401 ("invalid_client") and plain text otherwise.
func TokenSourceError(code int) *auth.Error {
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
		body = []byte(StatusText(code))
	}
	re.Body = body
	re.Response = errorResponse(code, http.MethodPost, "https://oauth2.googleapis.com/token", len(body))
	if re.ErrorCode != "" {
		re.Response.Header.Set("Content-Type", "application/json; charset=utf-8")
	} else {
		re.Response.Header.Set("Content-Type", "text/plain; charset=utf-8")
	}
	// The same constructor the connectors' token provider adapter uses.
	return oauth2adapt.AuthErrorFromRetrieveError(re)
}

// errorResponse is a consumed HTTP response as the Google client libraries
// keep it in their errors.
func errorResponse(code int, method, rawURL string, n int) *http.Response {
	u, _ := url.Parse(rawURL)
	return &http.Response{
		Status:        strconv.Itoa(code) + " " + StatusText(code),
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

// StatusText is http.StatusText, or "status code N" for a code it does not
// know.
func StatusText(code int) string {
	if s := http.StatusText(code); s != "" {
		return s
	}
	return "status code " + strconv.Itoa(code)
}

// WriteJSON answers code with v as JSON.
func WriteJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
