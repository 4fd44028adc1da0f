// Package gcpconn classifies the errors of Google's client libraries as
// the Cloud SQL and AlloyDB connectors return them (Admin API answers,
// OAuth2 and metadata-server token fetches), and builds a connector's
// classify.TypeRules from its own error types: what packages cloudsql and
// alloydb share.
package gcpconn

import (
	"strconv"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/compute/metadata"
	"golang.org/x/oauth2"
	"google.golang.org/api/googleapi"

	"github.com/holdfast-db/holdfast/classify"
)

// Connector describes one connector's error types for [Connector.TypeRules]:
// its reasons, and functions that recognise one node of an error tree
// (with classify.NodeAs, never by unwrapping).
type Connector struct {
	// Config is the reason of the connector's configuration error (Fatal).
	Config string
	// Refresh and Dial are the reasons of its refresh and dial errors
	// without a cause (Transient).
	Refresh, Dial string
	// Denied and NotFound are the reasons of an Admin API answer of 401 or
	// 403, and of 404 (Fatal).
	Denied, NotFound string

	// IsConfig reports whether the node is the connector's configuration
	// error.
	IsConfig func(error) bool
	// RefreshCause and DialCause report whether the node is the
	// connector's refresh (dial) error, and whether it has a cause.
	RefreshCause, DialCause func(error) (node, hasCause bool)
	// Other, when set, gives the Wrapper verdict of the connector's other
	// error types, tried first.
	Other func(error) (classify.Verdict, bool)
}

// TypeRules returns the connector's rules: its configuration error of kind
// Misconfiguration; *oauth2.RetrieveError and *metadata.Error as causes;
// and as wrappers (decided by a recognised cause inside them) its refresh
// and dial errors, *googleapi.Error and *auth.Error. The rules never call
// Error on the errors they examine (auth.Error's dereferences its
// Response).
func (c Connector) TypeRules() []classify.TypeRule {
	return []classify.TypeRule{
		{Kind: classify.Misconfiguration, Match: func(err error) (classify.Verdict, bool) {
			if c.IsConfig(err) {
				return classify.Verdict{Class: classify.Fatal, Reason: c.Config}, true
			}
			return classify.Verdict{}, false
		}},
		{Kind: classify.Cause, Match: tokenCause},
		{Kind: classify.Wrapper, Match: c.wrapper},
	}
}

func (c Connector) wrapper(err error) (classify.Verdict, bool) {
	if node, hasCause := c.RefreshCause(err); node {
		if hasCause {
			return classify.Verdict{}, false
		}
		return classify.Verdict{Class: classify.Transient, Reason: c.Refresh}, true
	}
	if node, hasCause := c.DialCause(err); node {
		if hasCause {
			return classify.Verdict{}, false
		}
		return classify.Verdict{Class: classify.Transient, Reason: c.Dial}, true
	}
	if c.Other != nil {
		if v, ok := c.Other(err); ok {
			return v, true
		}
	}
	if e, ok := classify.NodeAs[*googleapi.Error](err); ok {
		return c.adminAPIStatus(e.Code), true
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

// tokenCause recognises the token fetch errors that decide for themselves.
func tokenCause(err error) (classify.Verdict, bool) {
	if e, ok := classify.NodeAs[*oauth2.RetrieveError](err); ok {
		return retrieveVerdict(e), true
	}
	if e, ok := classify.NodeAs[*metadata.Error](err); ok {
		return tokenStatus(e.Code), true
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

func (c Connector) adminAPIStatus(code int) classify.Verdict {
	switch {
	case retryableStatus(code):
		return classify.Verdict{Class: classify.Transient, Reason: classify.ReasonPrefixAdminAPI + strconv.Itoa(code)}
	case code == 400:
		return classify.Verdict{Class: classify.Fatal, Reason: classify.ReasonBadRequest}
	case code == 401, code == 403:
		return classify.Verdict{Class: classify.Fatal, Reason: c.Denied}
	case code == 404:
		return classify.Verdict{Class: classify.Fatal, Reason: c.NotFound}
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

// Node reports whether err itself (not its chain) is a T.
func Node[T any](err error) bool {
	_, ok := classify.NodeAs[T](err)
	return ok
}

// Cause returns a [Connector]'s RefreshCause or DialCause for the error
// type T whose cause cause returns.
func Cause[T any](cause func(T) error) func(error) (node, hasCause bool) {
	return func(err error) (bool, bool) {
		e, ok := classify.NodeAs[T](err)
		return ok, ok && cause(e) != nil
	}
}
