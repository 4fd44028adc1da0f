package alloydbtest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"cloud.google.com/go/alloydbconn"
	"cloud.google.com/go/auth"
	"cloud.google.com/go/auth/httptransport"
	"cloud.google.com/go/auth/oauth2adapt"
	"golang.org/x/oauth2"

	"github.com/holdfast-db/holdfast/fakes/internal/certs"
	"github.com/holdfast-db/holdfast/fakes/internal/gcpfake"
)

// Defaults for [Config].
const (
	DefaultProject  = "fake-project"
	DefaultRegion   = "fake-region"
	DefaultCluster  = "fake-cluster"
	DefaultInstance = "fake-primary"
)

// InstanceIP is the IP address the fake's connectionInfo reports for the
// primary instance (as its private and its public address). Read pool
// instances get the next addresses: 127.0.0.2, 127.0.0.3, .... The dialer
// dials IP:5433, which [Server.Dial] redirects to the instance's
// server-side proxy; they are loopback addresses, so a dialer that was not
// given [Server.Dial] cannot leave the machine either.
const InstanceIP = "127.0.0.1"

// Port is the port of AlloyDB's server-side proxy, which the connector
// dials.
const Port = "5433"

// Scopes the fake's token sources ask for, as the connector does with
// Application Default Credentials: the Admin API scope and the IAM
// database login scope.
const (
	ScopeAdmin = alloydbconn.CloudPlatformScope
	ScopeLogin = alloydbconn.AlloyDBLoginScope
)

// ErrClosed is returned by [Server.Dial] after [Server.Close].
var ErrClosed = errors.New("fakes/alloydbtest: server is closed")

// ErrNotInstance is wrapped by the error [Server.Dial] returns for an address
// other than an instance's: the fake never dials anything else.
var ErrNotInstance = errors.New("fakes/alloydbtest: not a fake instance's address")

// Config configures [New]. Only Backend is required.
type Config struct {
	// Project, Region and Cluster name the cluster, and Instance its
	// primary instance: its URI is
	// "projects/Project/locations/Region/clusters/Cluster/instances/Instance".
	// Defaults: DefaultProject, DefaultRegion, DefaultCluster,
	// DefaultInstance.
	Project  string
	Region   string
	Cluster  string
	Instance string

	// Backend is the "host:port" of the PostgreSQL server the primary
	// forwards connections to, for example a pgtest server's Addr.
	// Required.
	Backend string

	// ReadPools are the cluster's read pool instances, each a URI of its
	// own and one IP address for all its nodes, as AlloyDB has them.
	ReadPools []ReadPool

	// UntrustedServerCert makes every instance present a certificate
	// signed by a CA other than the cluster's (the one
	// generateClientCertificate returns), so that the dialer's TLS
	// handshake fails.
	UntrustedServerCert bool
}

// ReadPool is a read pool instance of the fake cluster.
type ReadPool struct {
	// Name is the instance's name (the last part of its URI). Required.
	Name string
	// Backend is the "host:port" of the PostgreSQL server it forwards to
	// (a standby of the primary's, or the primary's own). Required.
	Backend string
}

// Server is a fake AlloyDB cluster: a fake AlloyDB Admin API (the REST
// API the connector's client speaks) and OAuth2 token endpoint over plain
// HTTP on loopback, and a server-side proxy per instance (a TLS 1.3
// listener on loopback that does the connector's metadata exchange) that
// forwards to a real PostgreSQL server. Start one with [New] and stop it
// with [Server.Close].
//
// A Server is safe for concurrent use. Faults set with [Server.Fail],
// [Server.Slow] and an [Instance]'s methods apply to the requests and
// connections that arrive after the call. The zero Server is not usable.
type Server struct {
	cfg Config

	serverCA  *certs.Authority // the cluster's CA: signs the instances' certificates
	clientCA  *certs.Authority // signs client certificates; trusted by the instances
	instances []*Instance      // the primary first
	byName    map[string]*Instance
	byIP      map[string]*Instance

	api *gcpfake.API // the Admin API and the token endpoint

	life   *gcpfake.Life // the HTTP serve loop, the accept loops, every handler and connection
	closeO sync.Once
}

// New starts a fake AlloyDB cluster: the HTTP server and a listener per
// instance, all on 127.0.0.1 with free ports. It returns an error if a
// backend is empty, two instances have the same name, or a listener cannot
// be opened. The caller must call [Server.Close].
func New(cfg Config) (*Server, error) {
	if cfg.Backend == "" {
		return nil, errors.New("fakes/alloydbtest: Config.Backend is required (the PostgreSQL host:port to forward to)")
	}
	cfg.Project = cmp.Or(cfg.Project, DefaultProject)
	cfg.Region = cmp.Or(cfg.Region, DefaultRegion)
	cfg.Cluster = cmp.Or(cfg.Cluster, DefaultCluster)
	cfg.Instance = cmp.Or(cfg.Instance, DefaultInstance)
	cfg.ReadPools = slices.Clone(cfg.ReadPools)
	s := &Server{
		cfg:    cfg,
		byName: map[string]*Instance{},
		byIP:   map[string]*Instance{},
		life:   gcpfake.NewLife(),
	}
	var err error
	if s.serverCA, err = certs.NewNamed("holdfast fake AlloyDB cluster CA"); err != nil {
		return nil, fmt.Errorf("fakes/alloydbtest: certificates: %w", err)
	}
	if s.clientCA, err = certs.NewNamed("holdfast fake AlloyDB client CA"); err != nil {
		return nil, fmt.Errorf("fakes/alloydbtest: certificates: %w", err)
	}
	signer := s.serverCA
	if cfg.UntrustedServerCert {
		if signer, err = certs.NewNamed("holdfast fake untrusted CA"); err != nil {
			return nil, fmt.Errorf("fakes/alloydbtest: certificates: %w", err)
		}
	}
	if err := s.start(signer); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("fakes/alloydbtest: %w", err)
	}
	return s, nil
}

// start opens the listeners: the instances', then the HTTP server's.
func (s *Server) start(signer *certs.Authority) error {
	pools := append([]ReadPool{{Name: s.cfg.Instance, Backend: s.cfg.Backend}}, s.cfg.ReadPools...)
	for i, p := range pools {
		switch {
		case p.Name == "" || p.Backend == "":
			return fmt.Errorf("read pool %d: Name and Backend are required", i-1)
		case s.byName[p.Name] != nil:
			return fmt.Errorf("two instances named %q", p.Name)
		}
		in, err := s.newInstance(p.Name, "127.0.0."+strconv.Itoa(i+1), p.Backend, signer)
		if err != nil {
			return err
		}
		s.instances = append(s.instances, in)
		s.byName[in.name], s.byIP[in.ip] = in, in
	}
	var err error
	s.api, err = gcpfake.StartAPI(s.life, gcpfake.APIConfig{
		Endpoints: int(LoginToken), APIToken: int(APIToken), LoginToken: int(LoginToken),
		LoginScope: ScopeLogin, Prefix: adminPrefix, Admin: s.serveAdmin, Messages: messages,
	})
	return err
}

// Close stops the fake: it closes the listeners and every open connection,
// fails the requests still waiting in an injected delay, and waits for all
// of the fake's goroutines to return. It is idempotent and safe to call
// concurrently; every call returns nil. Close the pgx pool and the
// alloydbconn dialer first.
func (s *Server) Close() error {
	s.closeO.Do(func() {
		s.life.Shut()
		if s.api != nil {
			s.api.Close() // closes the HTTP listener and connections
		}
		for _, in := range s.instances {
			in.proxy.Close()
		}
	})
	s.life.Wait()
	if s.api != nil {
		s.api.CloseIdle()
	}
	return nil
}

// URI returns the primary instance's URI,
// "projects/P/locations/R/clusters/C/instances/I": what alloydb.With and
// the dialer's Dial take.
func (s *Server) URI() string { return s.instances[0].uri }

// Primary returns the primary instance.
func (s *Server) Primary() *Instance { return s.instances[0] }

// ReadPool returns the read pool instance named name, or nil.
func (s *Server) ReadPool(name string) *Instance {
	if in := s.byName[name]; in != nil && in != s.instances[0] {
		return in
	}
	return nil
}

// AdminURL returns the base URL of the fake Admin API, for
// alloydbconn.WithAdminAPIEndpoint: "http://127.0.0.1:PORT".
func (s *Server) AdminURL() string { return s.api.URL }

// TokenURL returns the URL of the fake OAuth2 token endpoint (client
// credentials grant).
func (s *Server) TokenURL() string { return s.api.TokenURL() }

// ClusterCAPEM returns the PEM of the cluster's CA, which
// generateClientCertificate returns as the CA the instances' certificates
// chain to.
func (s *Server) ClusterCAPEM() string { return string(s.serverCA.CertPEM()) }

// TokenSource returns an OAuth2 token source that fetches tokens from the
// fake's token endpoint with the client credentials grant: kind [APIToken]
// asks for the Admin API scope, kind [LoginToken] for the IAM database
// login scope. Tokens are opaque, expire in one hour and carry that expiry.
//
// Like Google's token sources, the returned source caches its token until
// it expires, so an injected token failure ([Server.Fail] with APIToken or
// LoginToken) is seen by a source that has no token yet: a new source, or a
// new dialer built with new sources. A failed fetch returns the error the
// oauth2 package builds for the HTTP status, *oauth2.RetrieveError with its
// Response set. Any other kind returns a source that always fails.
func (s *Server) TokenSource(kind Endpoint) oauth2.TokenSource {
	switch kind {
	case APIToken:
		return s.api.TokenSource(ScopeAdmin)
	case LoginToken:
		return s.api.TokenSource(ScopeLogin)
	}
	return gcpfake.FailingSource{Err: fmt.Errorf("fakes/alloydbtest: %v is not a token kind", kind)}
}

// DialerOptions returns the alloydbconn options that point a real dialer at
// this fake, without IAM database authentication:
//
//   - WithAdminAPIEndpoint(AdminURL()): the Admin API is the fake's;
//   - WithTokenSource(TokenSource(APIToken)): explicit credentials, so the
//     dialer never looks for Application Default Credentials (the
//     connector sends this token in the metadata exchange too);
//   - WithHTTPClient: an HTTP client that authorizes the Admin API calls
//     with the same token source, as the Admin API client would from the
//     credentials (through cloud.google.com/go/auth/httptransport). An
//     HTTP client also keeps the dialer from building its Cloud Monitoring
//     gRPC client: alloydbconn (v1.19.3) builds one in every NewDialer,
//     even with WithOptOutOfBuiltInTelemetry, which connects to
//     monitoring.googleapis.com at once and is never closed; given an HTTP
//     client, the gRPC client fails to build and the dialer goes on
//     without it;
//   - WithDialFunc(Dial): the instances' addresses are redirected to the
//     fake instances;
//   - WithOptOutOfBuiltInTelemetry(): no export to Cloud Monitoring;
//   - WithRSAKey(RSAKey()): no key generation per dialer.
//
// Append your own options (WithLazyRefresh, WithRefreshTimeout, ...) after
// these. Each call builds a new token source.
func (s *Server) DialerOptions() ([]alloydbconn.Option, error) {
	return s.dialerOptions(s.TokenSource(APIToken))
}

// dialerOptions are the options of DialerOptions with api as the token
// source of the Admin API and of the metadata exchange.
func (s *Server) dialerOptions(api oauth2.TokenSource) ([]alloydbconn.Option, error) {
	key, err := gcpfake.RSAKey()
	if err != nil {
		return nil, err
	}
	hc, err := httptransport.NewClient(&httptransport.Options{
		Credentials:      auth.NewCredentials(&auth.CredentialsOptions{TokenProvider: oauth2adapt.TokenProviderFromTokenSource(api)}),
		BaseRoundTripper: s.api.Transport(),
		DisableTelemetry: true,
	})
	if err != nil {
		return nil, err
	}
	return []alloydbconn.Option{
		alloydbconn.WithAdminAPIEndpoint(s.api.URL),
		alloydbconn.WithTokenSource(api),
		alloydbconn.WithHTTPClient(hc),
		alloydbconn.WithDialFunc(s.Dial),
		alloydbconn.WithOptOutOfBuiltInTelemetry(),
		alloydbconn.WithRSAKey(key),
	}, nil
}

// IAMDialerOptions is DialerOptions with automatic IAM database
// authentication: WithIAMAuthN, and WithIAMAuthNTokenSource(
// TokenSource(LoginToken)) for the login token, fetched apart from the
// Admin API's as Application Default Credentials do. The login token then
// travels in every metadata exchange ([InstanceStats] IAMLogins).
func (s *Server) IAMDialerOptions() ([]alloydbconn.Option, error) {
	opts, err := s.dialerOptions(s.TokenSource(APIToken))
	if err != nil {
		return nil, err
	}
	return append(opts, alloydbconn.WithIAMAuthN(), alloydbconn.WithIAMAuthNTokenSource(s.TokenSource(LoginToken))), nil
}

// Fail makes the next n requests to endpoint e fail with HTTP status code
// (n < 0: every request until [Server.Clear]). It replaces an earlier Fail
// of e. Admin API endpoints answer a JSON error body as Google APIs do (403
// PERMISSION_DENIED, 404 NOT_FOUND, 503 UNAVAILABLE); the token endpoint
// answers an OAuth2 error ("invalid_grant" for 400, "invalid_client" for
// 401) or plain text for other codes. code must be 400 to 599; other values
// and unknown endpoints are ignored.
//
// The connector's Admin API client retries a 503 itself (with a backoff of
// up to 1s, ×1.3 each time, for up to 60s a call) and nothing else; token
// failures are never retried there.
func (s *Server) Fail(e Endpoint, code, n int) { s.api.Faults.Fail(int(e), code, n) }

// Slow delays the next n requests to endpoint e by d before they are
// answered (n < 0: every request until [Server.Clear]); a delayed request
// can still fail by [Server.Fail]. It replaces an earlier Slow of e. A
// request whose client gives up, or that is pending when the fake closes,
// ends early.
func (s *Server) Slow(e Endpoint, d time.Duration, n int) { s.api.Faults.Slow(int(e), d, n) }

// Clear removes every injected fault, the instances' too. Requests and
// connections already waiting in a delay keep waiting.
func (s *Server) Clear() {
	s.api.Faults.Clear()
	for _, in := range s.instances {
		in.Clear()
	}
}

// Stats returns a snapshot of the fake's counters.
func (s *Server) Stats() Stats {
	st := Stats{
		ConnectionInfo:            s.api.Faults.Requests(int(ConnectionInfo)),
		GenerateClientCertificate: s.api.Faults.Requests(int(GenerateClientCertificate)),
		APITokens:                 s.api.Faults.Requests(int(APIToken)),
		LoginTokens:               s.api.Faults.Requests(int(LoginToken)),
		Failed:                    s.api.Faults.Failed(),
	}
	for _, in := range s.instances {
		st.Instances.add(in.Stats())
	}
	return st
}

// Dial is the dial function to give the dialer (alloydbconn.WithDialFunc;
// [Server.DialerOptions] does). The dialer dials an instance's IP on port
// 5433; Dial connects to that instance's server-side proxy instead, or
// refuses the connection when [Instance.Refuse] says so. It fails with an
// error wrapping [ErrNotInstance] for any other address, and with
// [ErrClosed] after Close.
func (s *Server) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	in := s.byIP[host]
	if err != nil || in == nil {
		return nil, fmt.Errorf("%w: %s %s", ErrNotInstance, network, addr)
	}
	return in.proxy.Dial(ctx, network, addr)
}

// String describes the fake without secrets.
func (s *Server) String() string {
	return "fakes/alloydbtest.Server{" + s.URI() + ", admin " + s.api.URL + ", " + strconv.Itoa(len(s.instances)) + " instances}"
}
