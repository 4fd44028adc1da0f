package alloydbtest

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"

	"cloud.google.com/go/alloydbconn/errtype"
	"github.com/googleapis/gax-go/v2/apierror"

	"github.com/holdfast-db/holdfast/fakes"
	"github.com/holdfast-db/holdfast/fakes/internal/gcpfake"
)

// This file holds script steps for package fakes' Connector and
// PasswordSource that fail as the AlloyDB Go connector (alloydbconn
// v1.19.3) and its Google client libraries do, without any server: the
// errors are built from the real types, wrapped as they arrive in
// production. Each play builds fresh values.

// URI is the instance URI of a [Server] with the default project, region,
// cluster and instance. The connector's errors name it as ConnName
// ([ConnName]).
const URI = "projects/" + DefaultProject + "/locations/" + DefaultRegion + "/clusters/" + DefaultCluster + "/instances/" + DefaultInstance

// ConnName is how the connector writes [URI] in its errors
// (errtype.RefreshError ConnName): project.region.cluster.instance.
const ConnName = DefaultProject + "." + DefaultRegion + "." + DefaultCluster + "." + DefaultInstance

// TokenFetch503 is TokenFetch(503): the token fetch fails because the
// token endpoint answered 503 Service Unavailable. A classifier should
// treat it as transient.
func TokenFetch503() fakes.Step { return TokenFetch(503) }

// TokenFetch fails like alloydbconn v1.19.3 when the OAuth2 token source of
// its Admin API calls fails with the given HTTP status (the first token
// fetch of a dialer built with WithTokenSource or Application Default
// Credentials, whose token the metadata exchange sends too). The dial
// error of a [fakes.Connector] is, outermost first:
//
//	*fmt.wrapError        "failed to get instance IP address: ..."
//	*errtype.RefreshError "failed to get instance metadata", ConnName = [ConnName]
//	*url.Error            the Admin API request
//	*auth.Error           Response.StatusCode = code (Temporary() for 500, 503, 408, 429)
//	*oauth2.RetrieveError Response.StatusCode = code
//
// In a [fakes.PasswordSource] the error is the token-source part alone
// (*auth.Error wrapping *oauth2.RetrieveError). Response is always set, so
// Error() never panics. The step's String is "alloydbtest.TokenFetch(code)".
func TokenFetch(code int) fakes.Step {
	return fakes.Custom("alloydbtest.TokenFetch("+strconv.Itoa(code)+")",
		func() error {
			return fmt.Errorf("failed to get instance IP address: %w",
				errtype.NewRefreshError("failed to get instance metadata", ConnName, &url.Error{
					Op:  "Get",
					URL: "https://alloydb.googleapis.com/v1alpha/" + URI + "/connectionInfo?%24alt=json%3Benum-encoding%3Dint",
					Err: gcpfake.TokenSourceError(code),
				}))
		},
		func() error { return gcpfake.TokenSourceError(code) })
}

// LoginTokenFetch fails like alloydbconn v1.19.3 when the token source of
// IAM database authentication (WithIAMAuthNTokenSource,
// WithIAMAuthNCredentials) fails with the given HTTP status in the metadata
// exchange: the connector returns its *auth.Error (wrapping
// *oauth2.RetrieveError) as it is, with none of its own error types, in a
// [fakes.Connector] and a [fakes.PasswordSource] alike. The step's String
// is "alloydbtest.LoginTokenFetch(code)".
func LoginTokenFetch(code int) fakes.Step {
	return fakes.Custom("alloydbtest.LoginTokenFetch("+strconv.Itoa(code)+")",
		func() error { return gcpfake.TokenSourceError(code) },
		func() error { return gcpfake.TokenSourceError(code) })
}

// AdminAPI fails like alloydbconn v1.19.3 when the AlloyDB Admin API call
// for the instance's addresses (connectionInfo) answers the given HTTP
// status. The dial error of a [fakes.Connector] is, outermost first:
//
//	*fmt.wrapError        "failed to get instance IP address: ..."
//	*errtype.RefreshError "failed to get instance metadata", ConnName = [ConnName]
//	*apierror.APIError    (as the generated client's retry loop converts it)
//	*googleapi.Error      Code = code, with a JSON body as the Admin API sends
//
// 503 and other 5xx are transient; 403 (permission denied) and 404 (no such
// instance) are fatal. The real connector retries a 503 itself before it
// gives up ([Server.Fail] plays that); this step fails at once. In a
// [fakes.PasswordSource] the error is the *googleapi.Error alone. The
// step's String is "alloydbtest.AdminAPI(code)".
func AdminAPI(code int) fakes.Step {
	return fakes.Custom("alloydbtest.AdminAPI("+strconv.Itoa(code)+")",
		func() error {
			var cause error = messages.Plain(code)
			if ae, ok := apierror.FromError(cause); ok {
				cause = ae
			}
			return fmt.Errorf("failed to get instance IP address: %w",
				errtype.NewRefreshError("failed to get instance metadata", ConnName, cause))
		},
		func() error { return messages.Plain(code) })
}

// Forbidden is AdminAPI(403): the caller lacks permission on the instance.
func Forbidden() fakes.Step { return AdminAPI(403) }

// MetadataExchange fails like alloydbconn v1.19.3 when the instance
// refuses its metadata exchange with msg ([DefaultRejection] when empty):
// an error of no particular type whose text is msg, in a
// [fakes.Connector] and a [fakes.PasswordSource] alike. Only package
// alloydb's dial function, which knows where in the Dial it came from,
// can tell it apart from any other message. The step's String is
// "alloydbtest.MetadataExchange".
func MetadataExchange(msg string) fakes.Step {
	if msg == "" {
		msg = DefaultRejection
	}
	return fakes.Custom("alloydbtest.MetadataExchange",
		func() error { return errors.New(msg) },
		func() error { return errors.New(msg) })
}
