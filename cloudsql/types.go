package cloudsql

import (
	"cloud.google.com/go/cloudsqlconn/errtype"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/internal/gcpconn"
)

// TypeRules returns the classification of Google's and the Cloud SQL
// connector's error types, for classify.Classifier.WithTypes ([With]
// installs them, through holdfast.Integration.TypeRules). They take part in
// classify's walk, so the innermost recognised cause still decides for its
// wrapper (a refused connection inside a DialError is "conn-refused"):
//
//	| Error                                         | Class     | Reason                      |
//	|-----------------------------------------------|-----------|-----------------------------|
//	| *errtype.ConfigError                          | Fatal     | cloudsql-config             |
//	| *errtype.RefreshError                         | its cause | its cause's Reason          |
//	| *errtype.RefreshError, nil Err                | Transient | cloudsql-refresh            |
//	| *errtype.DialError                            | its cause | its cause's Reason          |
//	| *errtype.DialError, nil Err                   | Transient | cloudsql-dial               |
//	| *errtype.ResourceExhaustedError               | Transient | cloudsql-resource-exhausted |
//	| *googleapi.Error 408, 429, 500–599            | Transient | admin-api-<code>            |
//	| *googleapi.Error 400                          | Fatal     | bad-request                 |
//	| *googleapi.Error 401, 403                     | Fatal     | permission-denied           |
//	| *googleapi.Error 404                          | Fatal     | instance-not-found          |
//	| *googleapi.Error, other codes                 | Fatal     | admin-api-<code>            |
//	| *oauth2.RetrieveError, invalid_grant          | Fatal     | token-invalid-grant         |
//	| token error 408, 429, 500–599                 | Transient | token-fetch-<code>          |
//	| token error 400, 401, 403                     | Fatal     | token-denied                |
//	| token error, other codes                      | Fatal     | token-fetch-<code>          |
//	| token error without a Response                | Fatal     | token-error                 |
//
// A "token error" is an *oauth2.RetrieveError or *auth.Error (their
// Response.StatusCode) or a *metadata.Error (its Code). *errtype.ConfigError
// outranks every other cause but cancellation and TLS verification. A
// RefreshError or DialError whose cause is not recognised is Fatal
// "unknown". The rules never call Error on the errors they examine
// (auth.Error's Error dereferences its Response).
//
// The connector's own chains (of [ConnectorVersion]: a test fails when
// go.mod requires another version, so that an upgrade re-checks them) are
// handled, for example:
//
//	fmt "failed to get instance" → *errtype.RefreshError → *googleapi.Error{503}   → Transient admin-api-503
//	fmt → *errtype.RefreshError → *auth.Error → *oauth2.RetrieveError{503}           → Transient token-fetch-503
//	fmt → *errtype.RefreshError → *url.Error → fmt → *metadata.Error{503}            → Transient token-fetch-503
//	*errtype.DialError → Join[*net.OpError → *os.SyscallError → ECONNREFUSED]        → Transient conn-refused
//	*errtype.DialError → *errtype.DialError → *tls.CertificateVerificationError      → Fatal tls-verification
//
// [Rules] adds the two cases that need the connector's root package or the
// structure of its errors.
func TypeRules() []classify.TypeRule { return connector.TypeRules() }

// connector is the Cloud SQL connector's part of the classification; the
// rest (Google's token and Admin API errors) is shared with package
// alloydb.
var connector = gcpconn.Connector{
	Config:       classify.ReasonCloudSQLConfig,
	Refresh:      classify.ReasonCloudSQLRefresh,
	Dial:         classify.ReasonCloudSQLDial,
	Denied:       classify.ReasonPermissionDenied,
	NotFound:     classify.ReasonInstanceNotFound,
	IsConfig:     gcpconn.Node[*errtype.ConfigError],
	RefreshCause: gcpconn.Cause(func(e *errtype.RefreshError) error { return e.Err }),
	DialCause:    gcpconn.Cause(func(e *errtype.DialError) error { return e.Err }),
	Other: func(err error) (classify.Verdict, bool) {
		if gcpconn.Node[*errtype.ResourceExhaustedError](err) {
			return classify.Verdict{Class: classify.Transient, Reason: classify.ReasonCloudSQLResourceExhausted}, true
		}
		return classify.Verdict{}, false
	},
}
