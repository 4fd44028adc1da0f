package cloudsqltest

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

	"github.com/holdfast-db/holdfast/fakes"
)

// This file holds script steps for package fakes' Connector and
// PasswordSource that fail as the Cloud SQL Go connector (cloudsqlconn
// v1.26.0) and its Google client libraries do, without any server: the
// errors are built from the real types, wrapped as they arrive in
// production. Each play builds fresh values.

// ConnName is the instance connection name that the errors of
// [TokenFetch] and [AdminAPI] carry, as [errtype.RefreshError] ConnName. It
// is also the ConnName of a [Server] with the default project, region and
// instance.
//
// [errtype.RefreshError]: https://pkg.go.dev/cloud.google.com/go/cloudsqlconn/errtype#RefreshError
const ConnName = DefaultProject + ":" + DefaultRegion + ":" + DefaultInstance

// TokenFetch503 is TokenFetch(503): the IAM login token fetch fails because
// the token endpoint answered 503 Service Unavailable. A classifier should
// treat it as transient.
func TokenFetch503() fakes.Step { return TokenFetch(503) }

// TokenFetch fails like cloudsqlconn v1.26.0 when the OAuth2 token source
// for IAM database login fails with the given HTTP status. The dial error
// of a [fakes.Connector] is, outermost first:
//
//	*fmt.wrapError        "fetch ephemeral cert failed: ..."
//	*errtype.RefreshError "failed to retrieve Oauth2 token", ConnName = [ConnName]
//	*auth.Error           Response.StatusCode = code (Temporary() for 500, 503, 408, 429)
//	*oauth2.RetrieveError Response.StatusCode = code
//
// In a [fakes.PasswordSource] the error is the token-source part alone
// (*auth.Error wrapping *oauth2.RetrieveError), as an
// [auth.TokenProvider] built from an [oauth2.TokenSource] returns it.
//
// Response is always set, so Error() never panics at any depth of the
// chain. For 400 the body is an OAuth2 "invalid_grant" error and for 401 an
// "invalid_client" one (both mean bad credentials: fatal); other codes get
// a plain-text body. The step's String is "cloudsqltest.TokenFetch(code)".
//
// [auth.TokenProvider]: https://pkg.go.dev/cloud.google.com/go/auth#TokenProvider
// [oauth2.TokenSource]: https://pkg.go.dev/golang.org/x/oauth2#TokenSource
func TokenFetch(code int) fakes.Step {
	return fakes.Custom("cloudsqltest.TokenFetch("+strconv.Itoa(code)+")",
		func() error { return tokenDialError(code) },
		func() error { return tokenSourceError(code) })
}

// AdminAPI fails like cloudsqlconn v1.26.0 when the Cloud SQL Admin API call
// for the instance metadata (connectSettings) answers the given HTTP status.
// The dial error of a [fakes.Connector] is, outermost first:
//
//	*fmt.wrapError        "failed to get instance: ..."
//	*errtype.RefreshError "failed to get instance metadata", ConnName = [ConnName]
//	*googleapi.Error      Code = code, with a JSON body as the Admin API sends
//	*apierror.APIError    (as the generated API client wraps it)
//
// 503 and other 5xx are transient; 403 (permission denied) and 404 (no such
// instance) are fatal. The real connector spends several seconds retrying
// 5xx before it gives up ([Server.Fail] plays that); this step fails at
// once. In a [fakes.PasswordSource] the error is the *googleapi.Error
// alone. The step's String is "cloudsqltest.AdminAPI(code)".
func AdminAPI(code int) fakes.Step {
	return fakes.Custom("cloudsqltest.AdminAPI("+strconv.Itoa(code)+")",
		func() error { return adminDialError(code) },
		func() error { return adminAPIError(code) })
}

// Forbidden is AdminAPI(403): the caller lacks permission on the instance.
func Forbidden() fakes.Step { return AdminAPI(403) }

// tokenSourceError is what an auth.TokenProvider adapted from an
// oauth2.TokenSource returns when the token endpoint answers code:
// *auth.Error wrapping *oauth2.RetrieveError, both with Response set.
func tokenSourceError(code int) *auth.Error {
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
	re.Response = errorResponse(code, http.MethodPost, "https://oauth2.googleapis.com/token", len(body))
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
		errtype.NewRefreshError("failed to retrieve Oauth2 token", ConnName, tokenSourceError(code)))
}

// adminAPIError is the error the generated Cloud SQL Admin API client
// returns for an HTTP error status: *googleapi.Error wrapping
// *apierror.APIError.
func adminAPIError(code int) *googleapi.Error {
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

// adminDialError is the dial error of cloudsqlconn when the Admin API
// connectSettings call fails with code.
func adminDialError(code int) error {
	return fmt.Errorf("failed to get instance: %w",
		errtype.NewRefreshError("failed to get instance metadata", ConnName, adminAPIError(code)))
}

// errorResponse is a consumed HTTP response as the Google client libraries
// keep it in their errors.
func errorResponse(code int, method, rawURL string, n int) *http.Response {
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
