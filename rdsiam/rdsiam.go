package rdsiam

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/internal/topology"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/rds/auth"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast/classify"
)

// TokenLifetime is how long an RDS IAM authentication token is valid after
// it is minted (auth.BuildAuthToken signs it with X-Amz-Expires=900). It
// only needs to be valid when the connection authenticates; an established
// connection is not affected by its expiry.
const TokenLifetime = 15 * time.Minute

// Config says what to sign a token for. Every field is required.
type Config struct {
	// Endpoint is the "host:port" the client connects to: the DB instance,
	// cluster or RDS Proxy endpoint, exactly as in the connection string.
	// RDS checks the token against it.
	Endpoint string
	// Region is the AWS region of the database, for example "eu-west-1".
	Region string
	// User is the database user, which must have the rds_iam role.
	User string
	// Credentials sign the token. Pass a cached provider
	// (aws.NewCredentialsCache, or the Credentials of an aws.Config from
	// config.LoadDefaultConfig, which is cached): the password function
	// retrieves credentials on every call.
	Credentials aws.CredentialsProvider
	// Aliases are host names of your own (a DNS alias, an IP address)
	// that lead to Endpoint: a connection to one of them gets a token
	// signed for Endpoint from [HostPasswordFunc] and [With]. Optional:
	// with none, only Endpoint's host and the endpoints of its account
	// and Region are signed for; any other host is refused
	// (*HostError).
	Aliases []string
}

// ErrInvalidConfig is [holdfast.ErrInvalidConfig], matched by every
// *ConfigError.
var ErrInvalidConfig = holdfast.ErrInvalidConfig

// ConfigError is [holdfast.ConfigError], the one configuration error of
// every holdfast package, under this package's name: its errors read
// "rdsiam: invalid <Field>: <Why>" (Pkg "rdsiam"), and one
// errors.As with either name finds them and any other package's. It is
// not retryable: fix the configuration.
type ConfigError = holdfast.ConfigError

// ErrToken is matched by every *TokenError.
var ErrToken = errors.New("rdsiam: cannot mint an auth token")

// TokenError reports that a token could not be minted, almost always
// because the AWS credentials could not be retrieved (the container or
// instance credentials endpoint, STS). Err is the credential provider's
// error. Whether it is worth retrying depends on Err: see [Rules]. The
// message names the user, endpoint and region, never a secret.
type TokenError struct {
	Endpoint, Region, User string
	Err                    error
}

func (e *TokenError) Error() string {
	return fmt.Sprintf("rdsiam: cannot mint an auth token for user %q at %s (%s): %v", e.User, e.Endpoint, e.Region, e.Err)
}

// Unwrap returns the credential provider's error.
func (e *TokenError) Unwrap() error { return e.Err }

// Is matches ErrToken.
func (e *TokenError) Is(target error) bool { return target == ErrToken }

// ErrForeignHost is matched by every *HostError.
var ErrForeignHost = errors.New("rdsiam: host outside the endpoint's domain")

// HostError reports that [HostPasswordFunc] was asked for a token for a
// host that is neither Endpoint's host, nor one of Config.Aliases, nor an
// RDS endpoint of Endpoint's account and Region: no token is minted (a
// token sent there could be replayed for 15 minutes). It is Fatal, not
// retryable ([Rules]: "rdsiam-foreign-host"); the message names the host
// and the endpoint, never a secret.
type HostError struct {
	Host, Endpoint string
}

func (e *HostError) Error() string {
	return fmt.Sprintf("rdsiam: no token for host %q: it is not %s, one of Config.Aliases, nor an RDS endpoint of its account and Region",
		e.Host, e.Endpoint)
}

// Is matches ErrForeignHost.
func (e *HostError) Is(target error) bool { return target == ErrForeignHost }

// PasswordFunc returns a function that mints a fresh RDS IAM authentication
// token with auth.BuildAuthToken on every call, for
// holdfast.WithPasswordFunc, which calls it once per new connection. It
// always signs for cfg.Endpoint: through a blue/green switchover, prefer
// [HostPasswordFunc] or [With], which sign for the server the connection
// reaches. The
// token is a SigV4-presigned "connect" request for cfg.User at
// cfg.Endpoint, valid for [TokenLifetime]; signing is local, the only I/O
// is cfg.Credentials' own retrieval. The function is safe for concurrent
// use and returns a *TokenError when minting fails.
//
// RDS answers an expired or rejected token with SQLSTATE 28000 ("PAM
// authentication failed for user"). holdfast retries such a failure once,
// inside the connect and on every path of the pool, with a freshly minted
// token; the second failure is Fatal (a missing rds_iam grant or IAM policy, a wrong
// user or endpoint). The token is never logged by holdfast and never
// appears in a TokenError.
//
// PasswordFunc returns a *ConfigError if a field of cfg is missing, or if
// Endpoint is not "host:port" with a numeric port.
func PasswordFunc(cfg Config) (func(ctx context.Context) (string, error), error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return func(ctx context.Context) (string, error) { return cfg.sign(ctx, cfg.Endpoint) }, nil
}

// HostPasswordFunc is [PasswordFunc] for holdfast.WithHostPasswordFunc:
// the function mints a token for host, the name of the server the
// connection reaches, with cfg's region, user, credentials and the port of
// cfg.Endpoint. RDS checks a token against the name the server answers to,
// which changes during a blue/green switchover: green answers to its green
// name until it takes the blue names, and holdfast passes the name it
// must be signed for (bluegreen.Name.Auth).
//
// The token is signed for cfg.Endpoint when host is "", Endpoint's host
// or one of cfg.Aliases; for host itself when it is an RDS endpoint of
// Endpoint's account and Region (it ends in the same
// "<id>.<region>.rds.amazonaws.com" as Endpoint's host, a cluster, reader,
// custom, proxy or instance endpoint, blue, green or -old1). Any other
// host — a name a database row gave, another account's endpoint, another
// Region's — gets no token: the function returns a *HostError, without
// retrieving credentials.
func HostPasswordFunc(cfg Config) (func(ctx context.Context, host string) (string, error), error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	endpointHost, port, _ := net.SplitHostPort(cfg.Endpoint) // validated
	own := append([]string{endpointHost}, cfg.Aliases...)
	for i, h := range own {
		own[i] = topology.NormHost(h)
	}
	domain := topology.NewScope(nil, topology.DomainOf(endpointHost)) // nothing when Endpoint is not RDS-shaped
	region := "." + strings.ToLower(cfg.Region) + ".rds."
	return func(ctx context.Context, host string) (string, error) {
		h := topology.NormHost(host)
		switch {
		case h == "" || slices.Contains(own, h):
			return cfg.sign(ctx, cfg.Endpoint)
		case domain.Contains(h) && strings.Contains(h, region):
			return cfg.sign(ctx, net.JoinHostPort(host, port))
		}
		return "", &HostError{Host: topology.Truncate(host, 128), Endpoint: cfg.Endpoint}
	}, nil
}

// sign mints a token for endpoint with cfg's region, user and credentials.
func (cfg Config) sign(ctx context.Context, endpoint string) (string, error) {
	tok, err := auth.BuildAuthToken(ctx, endpoint, cfg.Region, cfg.User, cfg.Credentials)
	if err != nil {
		return "", &TokenError{Endpoint: endpoint, Region: cfg.Region, User: cfg.User, Err: err}
	}
	return tok, nil
}

// With returns the holdfast option that gives every new connection of the
// factory's pools a freshly minted RDS IAM token, signed for the server the
// connection reaches ([HostPasswordFunc]: through a blue/green switchover
// with holdfast.WithBlueGreen, the green name while green answers to it,
// for the green monitor too), and classifies credential failures
// ([Rules]):
//
//	f, err := holdfast.New(rdsiam.With(rdsiam.Config{...}))
//
// A Config with a missing field makes holdfast.New return a *ConfigError
// wrapping this package's *ConfigError. It cannot be combined with
// holdfast.WithPasswordFunc or holdfast.WithHostPasswordFunc.
func With(cfg Config) holdfast.Option {
	fn, err := HostPasswordFunc(cfg)
	return holdfast.WithIntegration(holdfast.Integration{
		Name:     "rdsiam",
		Password: fn,
		Rules:    Rules(),
		Err:      err,
	})
}

func (c Config) validate() error {
	host, port, err := net.SplitHostPort(c.Endpoint)
	switch {
	case c.Endpoint == "":
		return &ConfigError{Pkg: "rdsiam", Field: "Endpoint", Why: `empty: want "host:port" of the database`}
	case err != nil || host == "" || port == "":
		return &ConfigError{Pkg: "rdsiam", Field: "Endpoint", Why: fmt.Sprintf(`%q is not "host:port"`, c.Endpoint)}
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return &ConfigError{Pkg: "rdsiam", Field: "Endpoint", Why: fmt.Sprintf("%q has no valid port", c.Endpoint)}
	}
	switch {
	case c.Region == "":
		return &ConfigError{Pkg: "rdsiam", Field: "Region", Why: `empty: want the database's AWS region, e.g. "eu-west-1"`}
	case c.User == "":
		return &ConfigError{Pkg: "rdsiam", Field: "User", Why: "empty: want the database user that has the rds_iam role"}
	case c.Credentials == nil:
		return &ConfigError{Pkg: "rdsiam", Field: "Credentials", Why: "nil aws.CredentialsProvider"}
	}
	return nil
}

// ConfigFor returns the Config for the host, port and user of a pool
// config: Endpoint is ConnConfig.Host:ConnConfig.Port and User is
// ConnConfig.User. It returns a *ConfigError if the connection string names
// several hosts (each needs its own token; use one pool per endpoint), a
// Unix socket, or no user, or if region or creds is missing.
func ConfigFor(cfg *pgxpool.Config, region string, creds aws.CredentialsProvider) (Config, error) {
	switch {
	case cfg == nil || cfg.ConnConfig == nil:
		return Config{}, &ConfigError{Pkg: "rdsiam", Field: "pgxpool.Config", Why: "nil: build it with pgxpool.ParseConfig"}
	case len(cfg.ConnConfig.Fallbacks) > 0 && differentHosts(cfg):
		return Config{}, &ConfigError{Pkg: "rdsiam", Field: "pgxpool.Config", Why: "several hosts: an RDS IAM token is signed for one endpoint"}
	case strings.HasPrefix(cfg.ConnConfig.Host, "/"):
		return Config{}, &ConfigError{Pkg: "rdsiam", Field: "pgxpool.Config", Why: "a Unix socket: RDS is reached over TCP"}
	}
	c := Config{
		Endpoint:    net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))),
		Region:      region,
		User:        cfg.ConnConfig.User,
		Credentials: creds,
	}
	return c, c.validate()
}

// differentHosts reports whether a fallback names another host or port
// (sslmode=prefer adds a fallback for the same host without TLS).
func differentHosts(cfg *pgxpool.Config) bool {
	for _, fb := range cfg.ConnConfig.Fallbacks {
		if fb.Host != cfg.ConnConfig.Host || fb.Port != cfg.ConnConfig.Port {
			return true
		}
	}
	return false
}

// Reasons produced by [Rules].
const (
	// ReasonPrefixCredentials + HTTP status, e.g. "aws-credentials-503":
	// the credentials endpoint answered that status.
	ReasonPrefixCredentials = "aws-credentials-"
	// ReasonCredentialsDenied: the credentials endpoint answered 400, 401
	// or 403 (Fatal).
	ReasonCredentialsDenied = "aws-credentials-denied"
	// ReasonForeignHost: a token was asked for a host outside Endpoint's
	// domain (*HostError, Fatal).
	ReasonForeignHost = "rdsiam-foreign-host"
)

// Rules returns the classification rules for failures of the password
// function, for holdfast.WithClassifier. They decide for a [*HostError]
// (Fatal "rdsiam-foreign-host") and for a [*TokenError] whose cause
// carries an HTTP status (the HTTPStatusCode() int method of AWS SDK
// errors, such as the container credentials endpoint's or STS's):
//
//	408, 429, 500–599   Transient "aws-credentials-<code>"
//	400, 401, 403       Fatal     "aws-credentials-denied"
//	other codes         Fatal     "aws-credentials-<code>"
//
// Any other failure is left to the built-in rules: a refused or timed-out
// connection to the credentials endpoint is Transient, anything unknown is
// Fatal. An authentication failure reported by the database (SQLSTATE 28000
// or 28P01) is not a password-function failure; holdfast retries it once
// with a fresh token on its own.
//
// The rules never call Error on the errors they examine and are safe for
// concurrent use.
func Rules() []classify.Rule {
	return []classify.Rule{foreignHost, credentialsStatus}
}

func foreignHost(err error) (classify.Verdict, bool) {
	var he *HostError
	if !errors.As(err, &he) || he == nil {
		return classify.Verdict{}, false
	}
	return classify.Verdict{Class: classify.Fatal, Reason: ReasonForeignHost}, true
}

func credentialsStatus(err error) (classify.Verdict, bool) {
	var te *TokenError
	if !errors.As(err, &te) || te == nil {
		return classify.Verdict{}, false
	}
	var hs interface{ HTTPStatusCode() int }
	if !errors.As(te.Err, &hs) {
		return classify.Verdict{}, false
	}
	code := hs.HTTPStatusCode()
	switch {
	case code == 408 || code == 429 || (code >= 500 && code <= 599):
		return classify.Verdict{Class: classify.Transient, Reason: ReasonPrefixCredentials + strconv.Itoa(code)}, true
	case code == 400 || code == 401 || code == 403:
		return classify.Verdict{Class: classify.Fatal, Reason: ReasonCredentialsDenied}, true
	default:
		return classify.Verdict{Class: classify.Fatal, Reason: ReasonPrefixCredentials + strconv.Itoa(code)}, true
	}
}
