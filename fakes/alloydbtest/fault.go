package alloydbtest

import (
	"github.com/holdfast-db/holdfast/internal/enum"
)

// Endpoint names one HTTP endpoint of the fake, for [Server.Fail],
// [Server.Slow] and [Stats].
type Endpoint int

const (
	// ConnectionInfo is the Admin API call that returns an instance's IP
	// addresses: GET /v1alpha/{instance URI}/connectionInfo.
	ConnectionInfo Endpoint = iota + 1
	// GenerateClientCertificate is the Admin API call that signs the
	// dialer's client certificate and returns the cluster's CA: POST
	// /v1alpha/projects/P/locations/R/clusters/C:generateClientCertificate.
	GenerateClientCertificate
	// APIToken is the OAuth2 token endpoint when it mints a token for the
	// Admin API ([Server.TokenSource] with [APIToken]).
	APIToken
	// LoginToken is the OAuth2 token endpoint when it mints an IAM database
	// login token ([Server.TokenSource] with [LoginToken]).
	LoginToken
)

var endpointNames = [...]string{
	ConnectionInfo:            "connectionInfo",
	GenerateClientCertificate: "generateClientCertificate",
	APIToken:                  "APIToken",
	LoginToken:                "LoginToken",
}

// String returns the endpoint's name, for example "connectionInfo".
func (e Endpoint) String() string { return enum.Name("Endpoint", e, endpointNames[:]) }

// Stats counts what the fake has seen since it started. Take a snapshot with
// [Server.Stats]. Requests and connections are counted when they arrive,
// whether they then succeed or fail.
type Stats struct {
	// ConnectionInfo and GenerateClientCertificate count Admin API
	// requests, including those answered with an injected error.
	ConnectionInfo            int
	GenerateClientCertificate int
	// APITokens and LoginTokens count requests to the token endpoint.
	APITokens   int
	LoginTokens int
	// Failed counts HTTP requests answered with an injected error status.
	Failed int

	// Instances sums the counters of every instance of the cluster.
	Instances InstanceStats
}

// Requests returns the number of requests counted for endpoint e.
func (st Stats) Requests(e Endpoint) int {
	switch e {
	case ConnectionInfo:
		return st.ConnectionInfo
	case GenerateClientCertificate:
		return st.GenerateClientCertificate
	case APIToken:
		return st.APITokens
	case LoginToken:
		return st.LoginTokens
	}
	return 0
}

// InstanceStats counts what one instance's server-side proxy has seen
// ([Instance.Stats]).
type InstanceStats struct {
	// Dials counts dials of the instance's address through [Server.Dial],
	// and Refused those refused by [Instance.Refuse].
	Dials   int
	Refused int
	// Resets counts connections the instance reset on purpose.
	Resets int
	// Handshakes counts completed TLS handshakes with a verified client
	// certificate.
	Handshakes int
	// Exchanges counts metadata exchanges answered, IAMLogins those that
	// asked for automatic IAM database authentication (with a valid token),
	// and Rejected those answered with an error.
	Exchanges int
	IAMLogins int
	Rejected  int
	// Forwarded counts connections forwarded to PostgreSQL.
	Forwarded int
}

func (st *InstanceStats) add(o InstanceStats) {
	st.Dials += o.Dials
	st.Refused += o.Refused
	st.Resets += o.Resets
	st.Handshakes += o.Handshakes
	st.Exchanges += o.Exchanges
	st.IAMLogins += o.IAMLogins
	st.Rejected += o.Rejected
	st.Forwarded += o.Forwarded
}
