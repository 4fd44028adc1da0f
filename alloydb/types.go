package alloydb

import (
	"cloud.google.com/go/alloydbconn/errtype"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/internal/gcpconn"
)

// TypeRules returns the classification of Google's and the AlloyDB
// connector's error types, for classify.Classifier.WithTypes ([With]
// installs them, through holdfast.Integration.TypeRules). They take part in
// classify's walk, so the innermost recognised cause still decides for its
// wrapper (a refused connection inside a DialError is "conn-refused"):
//
//	| Error                                 | Class     | Reason                     |
//	|---------------------------------------|-----------|----------------------------|
//	| *errtype.ConfigError                  | Fatal     | alloydb-config             |
//	| *errtype.RefreshError                 | its cause | its cause's Reason         |
//	| *errtype.RefreshError, nil Err        | Transient | alloydb-refresh            |
//	| *errtype.DialError                    | its cause | its cause's Reason         |
//	| *errtype.DialError, nil Err           | Transient | alloydb-dial               |
//	| *MetadataExchangeError                | its cause | its cause's Reason         |
//	| *MetadataExchangeError, unrecognised  | Fatal     | alloydb-metadata-exchange  |
//	| *googleapi.Error 408, 429, 500–599    | Transient | admin-api-<code>           |
//	| *googleapi.Error 400                  | Fatal     | bad-request                |
//	| *googleapi.Error 401, 403             | Fatal     | alloydb-permission-denied  |
//	| *googleapi.Error 404                  | Fatal     | alloydb-instance-not-found |
//	| *googleapi.Error, other codes         | Fatal     | admin-api-<code>           |
//	| *oauth2.RetrieveError, invalid_grant  | Fatal     | token-invalid-grant        |
//	| token error 408, 429, 500–599         | Transient | token-fetch-<code>         |
//	| token error 400, 401, 403             | Fatal     | token-denied               |
//	| token error, other codes              | Fatal     | token-fetch-<code>         |
//	| token error without a Response        | Fatal     | token-error                |
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
//	fmt → *errtype.RefreshError → *apierror.APIError → *googleapi.Error{403}  → Fatal alloydb-permission-denied
//	fmt → *errtype.RefreshError → *url.Error → *auth.Error → *oauth2.RetrieveError{503} → Transient token-fetch-503
//	*MetadataExchangeError → *auth.Error → *oauth2.RetrieveError{503}        → Transient token-fetch-503
//	*MetadataExchangeError → errors.New(the instance's message)              → Fatal alloydb-metadata-exchange
//	*MetadataExchangeError → *tls.permanentError → *net.OpError → ECONNRESET → Transient conn-reset
//	*errtype.DialError → *net.OpError → *os.SyscallError → ECONNREFUSED       → Transient conn-refused
//	*errtype.DialError → *tls.CertificateVerificationError                    → Fatal tls-verification
func TypeRules() []classify.TypeRule { return connector.TypeRules() }

// connector is the AlloyDB connector's part of the classification; the
// rest (Google's token and Admin API errors) is shared with package
// cloudsql.
var connector = gcpconn.Connector{
	Config:       classify.ReasonAlloyDBConfig,
	Refresh:      classify.ReasonAlloyDBRefresh,
	Dial:         classify.ReasonAlloyDBDial,
	Denied:       classify.ReasonAlloyDBPermissionDenied,
	NotFound:     classify.ReasonAlloyDBInstanceNotFound,
	IsConfig:     gcpconn.Node[*errtype.ConfigError],
	RefreshCause: gcpconn.Cause(func(e *errtype.RefreshError) error { return e.Err }),
	DialCause:    gcpconn.Cause(func(e *errtype.DialError) error { return e.Err }),
	Other: func(err error) (classify.Verdict, bool) {
		if gcpconn.Node[*MetadataExchangeError](err) {
			return classify.Verdict{Class: classify.Fatal, Reason: classify.ReasonAlloyDBMetadataExchange}, true
		}
		return classify.Verdict{}, false
	},
}
