package cloudsqltest

import (
	"fmt"
	"strconv"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/cloudsqlconn/errtype"
	"google.golang.org/api/googleapi"

	"github.com/holdfast-db/holdfast/fakes"
	"github.com/holdfast-db/holdfast/fakes/internal/gcpfake"
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
// oauth2.TokenSource returns when the token endpoint answers code.
func tokenSourceError(code int) *auth.Error { return gcpfake.TokenSourceError(code) }

// tokenDialError is the dial error of cloudsqlconn when the IAM login token
// fetch fails with code.
func tokenDialError(code int) error {
	return fmt.Errorf("fetch ephemeral cert failed: %w",
		errtype.NewRefreshError("failed to retrieve Oauth2 token", ConnName, tokenSourceError(code)))
}

// adminAPIError is the error the generated Cloud SQL Admin API client
// returns for an HTTP error status: *googleapi.Error wrapping
// *apierror.APIError.
func adminAPIError(code int) *googleapi.Error { return messages.Error(code) }

// adminDialError is the dial error of cloudsqlconn when the Admin API
// connectSettings call fails with code.
func adminDialError(code int) error {
	return fmt.Errorf("failed to get instance: %w",
		errtype.NewRefreshError("failed to get instance metadata", ConnName, adminAPIError(code)))
}
