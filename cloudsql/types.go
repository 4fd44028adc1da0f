package cloudsql

import (
	"strconv"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/cloudsqlconn/errtype"
	"cloud.google.com/go/compute/metadata"
	"golang.org/x/oauth2"
	"google.golang.org/api/googleapi"

	"github.com/holdfast-db/holdfast/classify"
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
func TypeRules() []classify.TypeRule {
	return []classify.TypeRule{
		{Kind: classify.Misconfiguration, Match: func(err error) (classify.Verdict, bool) {
			if _, ok := classify.NodeAs[*errtype.ConfigError](err); ok {
				return classify.Verdict{Class: classify.Fatal, Reason: classify.ReasonCloudSQLConfig}, true
			}
			return classify.Verdict{}, false
		}},
		{Kind: classify.Cause, Match: func(err error) (classify.Verdict, bool) {
			if e, ok := classify.NodeAs[*oauth2.RetrieveError](err); ok {
				return retrieveVerdict(e), true
			}
			if e, ok := classify.NodeAs[*metadata.Error](err); ok {
				return tokenStatus(e.Code), true
			}
			return classify.Verdict{}, false
		}},
		{Kind: classify.Wrapper, Match: wrapperVerdict},
	}
}

func wrapperVerdict(err error) (classify.Verdict, bool) {
	if e, ok := classify.NodeAs[*errtype.RefreshError](err); ok {
		if e.Err == nil {
			return classify.Verdict{Class: classify.Transient, Reason: classify.ReasonCloudSQLRefresh}, true
		}
		return classify.Verdict{}, false
	}
	if e, ok := classify.NodeAs[*errtype.DialError](err); ok {
		if e.Err == nil {
			return classify.Verdict{Class: classify.Transient, Reason: classify.ReasonCloudSQLDial}, true
		}
		return classify.Verdict{}, false
	}
	if _, ok := classify.NodeAs[*errtype.ResourceExhaustedError](err); ok {
		return classify.Verdict{Class: classify.Transient, Reason: classify.ReasonCloudSQLResourceExhausted}, true
	}
	if e, ok := classify.NodeAs[*googleapi.Error](err); ok {
		return adminAPIStatus(e.Code), true
	}
	if e, ok := classify.NodeAs[*auth.Error](err); ok {
		// Never call e.Error(): it dereferences e.Response.
		if e.Response == nil {
			return classify.Verdict{Class: classify.Fatal, Reason: classify.ReasonTokenError}, true
		}
		return tokenStatus(e.Response.StatusCode), true
	}
	return classify.Verdict{}, false
}

func retrieveVerdict(e *oauth2.RetrieveError) classify.Verdict {
	if e.ErrorCode == "invalid_grant" {
		return classify.Verdict{Class: classify.Fatal, Reason: classify.ReasonTokenInvalidGrant}
	}
	if e.Response == nil {
		return classify.Verdict{Class: classify.Fatal, Reason: classify.ReasonTokenError}
	}
	return tokenStatus(e.Response.StatusCode)
}

// retryableStatus reports whether an HTTP status says "try again later".
func retryableStatus(code int) bool {
	return code == 408 || code == 429 || (code >= 500 && code <= 599)
}

func adminAPIStatus(code int) classify.Verdict {
	switch {
	case retryableStatus(code):
		return classify.Verdict{Class: classify.Transient, Reason: classify.ReasonPrefixAdminAPI + strconv.Itoa(code)}
	case code == 400:
		return classify.Verdict{Class: classify.Fatal, Reason: classify.ReasonBadRequest}
	case code == 401, code == 403:
		return classify.Verdict{Class: classify.Fatal, Reason: classify.ReasonPermissionDenied}
	case code == 404:
		return classify.Verdict{Class: classify.Fatal, Reason: classify.ReasonInstanceNotFound}
	default:
		return classify.Verdict{Class: classify.Fatal, Reason: classify.ReasonPrefixAdminAPI + strconv.Itoa(code)}
	}
}

func tokenStatus(code int) classify.Verdict {
	switch {
	case retryableStatus(code):
		return classify.Verdict{Class: classify.Transient, Reason: classify.ReasonPrefixTokenFetch + strconv.Itoa(code)}
	case code == 400, code == 401, code == 403:
		return classify.Verdict{Class: classify.Fatal, Reason: classify.ReasonTokenDenied}
	default:
		return classify.Verdict{Class: classify.Fatal, Reason: classify.ReasonPrefixTokenFetch + strconv.Itoa(code)}
	}
}
