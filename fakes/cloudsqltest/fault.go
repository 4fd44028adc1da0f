package cloudsqltest

import (
	"github.com/holdfast-db/holdfast/internal/enum"
)

// Endpoint names one HTTP endpoint of the fake, for [Server.Fail],
// [Server.Slow] and [Stats].
type Endpoint int

const (
	// ConnectSettings is the Admin API call that returns the instance
	// metadata: GET .../instances/{instance}/connectSettings.
	ConnectSettings Endpoint = iota + 1
	// GenerateEphemeralCert is the Admin API call that signs the dialer's
	// client certificate: POST .../instances/{instance}:generateEphemeralCert.
	GenerateEphemeralCert
	// APIToken is the OAuth2 token endpoint when it mints a token for the
	// Admin API ([Server.TokenSource] with [APIToken]).
	APIToken
	// LoginToken is the OAuth2 token endpoint when it mints an IAM database
	// login token ([Server.TokenSource] with [LoginToken]).
	LoginToken
	// ResolveConnectSettings is the Admin API call the connector's DNS
	// resolver (cloudsqlconn.WithDNSResolver) makes for a name of the
	// instances' DNS pattern, here the target of the write endpoint:
	// GET .../locations/{region}/dns/{name}:resolveConnectSettings.
	ResolveConnectSettings
)

var endpointNames = [...]string{
	ConnectSettings:        "connectSettings",
	GenerateEphemeralCert:  "generateEphemeralCert",
	APIToken:               "APIToken",
	LoginToken:             "LoginToken",
	ResolveConnectSettings: "resolveConnectSettings",
}

// String returns the endpoint's name, for example "connectSettings".
func (e Endpoint) String() string { return enum.Name("Endpoint", e, endpointNames[:]) }

// Stats counts what the fake has seen since it started. Take a snapshot with
// [Server.Stats]. Requests and dials are counted when they arrive, whether
// they then succeed or fail.
type Stats struct {
	// ConnectSettings and GenerateEphemeralCert count Admin API requests,
	// including those answered with an injected error.
	ConnectSettings       int
	GenerateEphemeralCert int
	// ResolveConnectSettings counts the DNS resolver's calls.
	ResolveConnectSettings int
	// LoginCerts counts ephemeral certificates issued with an IAM login
	// token in the request (the dialer uses WithIAMAuthN).
	LoginCerts int
	// APITokens and LoginTokens count requests to the token endpoint.
	APITokens   int
	LoginTokens int
	// Failed counts HTTP requests answered with an injected error status.
	Failed int

	// Dials counts dials of the instance address through [Server.Dial],
	// and Refused those refused by [Server.Refuse].
	Dials   int
	Refused int
	// Resets counts connections the instance reset on purpose
	// ([Server.ResetHandshake], [Server.ResetAfterHandshake]).
	Resets int
	// Handshakes counts completed TLS handshakes with a verified client
	// certificate.
	Handshakes int
	// Forwarded counts connections forwarded to PostgreSQL.
	Forwarded int
}

// Requests returns the number of requests counted for endpoint e.
func (st Stats) Requests(e Endpoint) int {
	switch e {
	case ConnectSettings:
		return st.ConnectSettings
	case GenerateEphemeralCert:
		return st.GenerateEphemeralCert
	case APIToken:
		return st.APITokens
	case LoginToken:
		return st.LoginTokens
	case ResolveConnectSettings:
		return st.ResolveConnectSettings
	}
	return 0
}
