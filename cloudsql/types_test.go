package cloudsql_test

// The classification of Google's and the Cloud SQL connector's error types
// by TypeRules, on chains built by hand from the real types as the
// connector in go.mod returns them (chains_test.go gets them from the real
// connector). Package classify's own tests check the walk and the ranking
// of TypeRule verdicts with stand-in types and import no vendor.

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/auth/oauth2adapt"
	"cloud.google.com/go/cloudsqlconn/errtype"
	"cloud.google.com/go/compute/metadata"
	"golang.org/x/oauth2"
	"google.golang.org/api/googleapi"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/cloudsql"
	"github.com/holdfast-db/holdfast/internal/gcpconn/gcptest"
)

// secret appears in every message built by these tests; no Reason may
// contain it.
const secret = gcptest.Secret

const connName = "proj:region:inst"

// withGoogle classifies with TypeRules only, as WithTypes adds them.
var withGoogle = classify.New().WithTypes(cloudsql.TypeRules()...)

// Google's errors as the client libraries build them.
var (
	googleErr   = gcptest.GoogleErr
	resp        = gcptest.Resp
	retrieveErr = gcptest.RetrieveErr
	syscallErr  = gcptest.SyscallErr
	urlErr      = gcptest.URLErr
)

// The core's classifier leaves Google's types to this package.
func TestCoreKnowsNoGoogleTypes(t *testing.T) {
	t.Parallel()
	for _, err := range []error{googleErr(503), &auth.Error{Response: resp(503)}, &metadata.Error{Code: 503},
		retrieveErr(503), errtype.NewConfigError("x", connName), errtype.NewRefreshError("x", connName, nil)} {
		if got := classify.Classify(err); got != gcptest.Fatal(classify.ReasonUnknown) {
			t.Errorf("classify.Classify(%T) = %v, want fatal/unknown without TypeRules", err, got)
		}
		if got := withGoogle.Classify(err); got == gcptest.Fatal(classify.ReasonUnknown) {
			t.Errorf("withGoogle.Classify(%T) = %v, want a verdict", err, got)
		}
	}
}

func TestTypeRules(t *testing.T) {
	t.Parallel()

	refused := syscallErr("dial", syscall.ECONNREFUSED)
	unknownCA := &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}
	var nilRefresh *errtype.RefreshError

	tests := []struct {
		name string
		err  error
		want classify.Verdict
	}{
		// cloudsqlconn chains as the connector in go.mod returns them (cloudsql/chains_test.go checks the real ones).
		{"connectSettings 503",
			fmt.Errorf("failed to get instance: %w", errtype.NewRefreshError("failed to get instance metadata", connName, googleErr(503))),
			gcptest.Transient("admin-api-503")},
		{"generateEphemeralCert 503",
			fmt.Errorf("fetch ephemeral cert failed: %w", errtype.NewRefreshError("create ephemeral cert failed", connName, googleErr(503))),
			gcptest.Transient("admin-api-503")},
		{"connectSettings 403",
			fmt.Errorf("failed to get instance: %w", errtype.NewRefreshError("failed to get instance metadata", connName, googleErr(403))),
			gcptest.Fatal("permission-denied")},
		{"connectSettings 404",
			fmt.Errorf("failed to get instance: %w", errtype.NewRefreshError("failed to get instance metadata", connName, googleErr(404))),
			gcptest.Fatal("instance-not-found")},
		{"admin api 400", googleErr(400), gcptest.Fatal("bad-request")},
		{"admin api 401", googleErr(401), gcptest.Fatal("permission-denied")},
		{"admin api 409", googleErr(409), gcptest.Fatal("admin-api-409")},
		{"admin api 429", googleErr(429), gcptest.Transient("admin-api-429")},
		{"admin api 500", googleErr(500), gcptest.Transient("admin-api-500")},
		{"admin api 502", googleErr(502), gcptest.Transient("admin-api-502")},
		{"admin api 504", googleErr(504), gcptest.Transient("admin-api-504")},
		{"IAM login token 503 (auth.Error → RetrieveError)",
			fmt.Errorf("fetch ephemeral cert failed: %w", errtype.NewRefreshError("failed to retrieve Oauth2 token", connName,
				oauth2adapt.AuthErrorFromRetrieveError(retrieveErr(503)))),
			gcptest.Transient("token-fetch-503")},
		{"API token source 503 (url.Error → auth.Error → RetrieveError)",
			fmt.Errorf("failed to get instance: %w", errtype.NewRefreshError("failed to get instance metadata", connName,
				urlErr(oauth2adapt.AuthErrorFromRetrieveError(retrieveErr(503))))),
			gcptest.Transient("token-fetch-503")},
		{"metadata server token 503",
			fmt.Errorf("failed to get instance: %w", errtype.NewRefreshError("failed to get instance metadata", connName,
				urlErr(fmt.Errorf("credentials: cannot fetch token: %w", &metadata.Error{Code: 503, Message: secret})))),
			gcptest.Transient("token-fetch-503")},
		{"service-account token_uri 503 (auth.Error only)",
			fmt.Errorf("failed to get instance: %w", errtype.NewRefreshError("failed to get instance metadata", connName,
				urlErr(&auth.Error{Response: resp(503), Body: []byte(secret)}))),
			gcptest.Transient("token-fetch-503")},
		{"token 429", &auth.Error{Response: resp(429)}, gcptest.Transient("token-fetch-429")},
		{"token 401", urlErr(&auth.Error{Response: resp(401)}), gcptest.Fatal("token-denied")},
		{"token 404", &auth.Error{Response: resp(404)}, gcptest.Fatal("token-fetch-404")},
		{"auth.Error without Response (its Error panics)", errtype.NewRefreshError("x", connName, &auth.Error{}), gcptest.Fatal("token-error")},
		{"RetrieveError without Response", &oauth2.RetrieveError{}, gcptest.Fatal("token-error")},
		{"invalid_grant",
			errtype.NewRefreshError("failed to retrieve Oauth2 token", connName,
				oauth2adapt.AddRetrieveErrorToAuthError(&auth.Error{Response: resp(400), Body: []byte(`{"error":"invalid_grant"}`)})),
			gcptest.Fatal("token-invalid-grant")},
		{"innermost token error decides (outer 503, inner invalid_grant)",
			&auth.Error{Response: resp(503), Err: &oauth2.RetrieveError{Response: resp(400), ErrorCode: "invalid_grant"}},
			gcptest.Fatal("token-invalid-grant")},
		{"innermost token error decides (googleapi wrapping a token 503)",
			func() error { ge := &googleapi.Error{Code: 401}; ge.Wrap(&metadata.Error{Code: 503}); return ge }(),
			gcptest.Transient("token-fetch-503")},
		{"metadata 403", &metadata.Error{Code: 403}, gcptest.Fatal("token-denied")},
		{"invalid instance connection name", errtype.NewConfigError("invalid instance connection name", "proj:inst"), gcptest.Fatal("cloudsql-config")},
		{"region mismatch", fmt.Errorf("failed to get instance: %w", errtype.NewConfigError("region mismatch", connName)), gcptest.Fatal("cloudsql-config")},
		{"config beats refused", errors.Join(refused, errtype.NewConfigError("x", connName)), gcptest.Fatal("cloudsql-config")},
		{"dial refused via cloudsqlconn",
			errtype.NewDialError("failed to dial", connName, errors.Join(refused)),
			gcptest.Transient("conn-refused")},
		{"server cert from unknown CA via cloudsqlconn",
			errtype.NewDialError("handshake failed", connName, errtype.NewDialError("failed to verify certificate", connName, unknownCA)),
			gcptest.Fatal("tls-verification")},
		{"RefreshError with nil Err (cert parse)", errtype.NewRefreshError("failed to decode valid PEM cert", connName, nil), gcptest.Transient("cloudsql-refresh")},
		{"RefreshError with unknown cause", errtype.NewRefreshError("failed to retrieve Oauth2 token", connName, errors.New(secret)), gcptest.Fatal("unknown")},
		{"typed nil RefreshError", nilRefresh, gcptest.Fatal("unknown")},
		{"DialError with nil Err", errtype.NewDialError("context was canceled or expired before refresh completed", connName, nil), gcptest.Transient("cloudsql-dial")},
		{"ResourceExhaustedError", errtype.NewResourceExhaustedError("quota", connName, errors.New(secret)), gcptest.Transient("cloudsql-resource-exhausted")},

		// Through pgx's own wrapping (ConnectError → Join[perDialConnectError → …]).
		{"pgx: connectSettings 403",
			viaPgx(t, fmt.Errorf("failed to get instance: %w", errtype.NewRefreshError("m", connName, googleErr(403)))),
			gcptest.Fatal("permission-denied")},
		{"pgx: connectSettings 503", viaPgx(t, errtype.NewRefreshError("m", connName, googleErr(503))), gcptest.Transient("admin-api-503")},
		{"pgx: one host refused, one forbidden",
			viaPgx(t, refused, errtype.NewRefreshError("m", connName, googleErr(403))),
			gcptest.Fatal("permission-denied")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := withGoogle.Classify(tt.err)
			if got != tt.want {
				t.Fatalf("Classify() = %v, want %v", got, tt.want)
			}
			if strings.Contains(got.Reason, secret) {
				t.Fatalf("Reason %q contains message text", got.Reason)
			}
		})
	}
}

func TestTypeRulesDoNotCallError(t *testing.T) {
	t.Parallel()
	// auth.Error.Error panics without a Response; so does
	// oauth2.RetrieveError.Error without an ErrorCode.
	for _, err := range []error{
		&auth.Error{},
		&oauth2.RetrieveError{},
		errors.Join(&auth.Error{}, &oauth2.RetrieveError{}),
		errtype.NewDialError("x", connName, &auth.Error{Err: &oauth2.RetrieveError{}}),
	} {
		if got := withGoogle.Classify(err); got.Class != classify.Fatal || got.Reason != "token-error" {
			t.Errorf("Classify(%T) = %v, want fatal/token-error", err, got)
		}
	}
}
