package cloudsqltest

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"cloud.google.com/go/cloudsqlconn"
	"golang.org/x/oauth2"

	"github.com/holdfast-db/holdfast/fakes/internal/certs"
	"github.com/holdfast-db/holdfast/fakes/internal/gcpfake"
)

// Defaults for [Config].
const (
	DefaultProject         = "fake-project"
	DefaultRegion          = "fake-region"
	DefaultInstance        = "fake-instance"
	DefaultDatabaseVersion = "POSTGRES_15"
)

// InstanceIP is the public IP address the fake's connectSettings reports for
// the instance. The dialer dials InstanceIP:3307, which [Server.Dial]
// redirects to the fake instance; it is a loopback address, so a dialer that
// was not given [Server.Dial] cannot leave the machine either.
const InstanceIP = "127.0.0.1"

// Scopes the fake's token sources ask for, as a real Cloud SQL setup does.
const (
	ScopeAdmin = "https://www.googleapis.com/auth/sqlservice.admin"
	ScopeLogin = "https://www.googleapis.com/auth/sqlservice.login"
)

// ErrClosed is returned by [Server.Dial] after [Server.Close].
var ErrClosed = errors.New("fakes/cloudsqltest: server is closed")

// ErrNotInstance is wrapped by the error [Server.Dial] returns for an address
// other than the fake instance's: the fake never dials anything else.
var ErrNotInstance = errors.New("fakes/cloudsqltest: not the fake instance's address")

// Config configures [New]. Only Backend is required.
type Config struct {
	// Project, Region and Instance make the instance connection name
	// "Project:Region:Instance". Defaults: DefaultProject, DefaultRegion,
	// DefaultInstance.
	Project  string
	Region   string
	Instance string

	// DatabaseVersion is reported by connectSettings. Default
	// DefaultDatabaseVersion. The dialer refuses IAM authentication unless
	// it starts with "POSTGRES" or "MYSQL".
	DatabaseVersion string

	// Backend is the "host:port" of the PostgreSQL server the fake instance
	// forwards connections to, for example a pgtest server's Addr. Required.
	Backend string

	// ServerCN is the Subject common name of the instance's TLS
	// certificate. Default "Project:Instance", which the dialer expects; set
	// another value to make the dialer reject the server's identity.
	ServerCN string

	// UntrustedServerCert makes the instance present a certificate signed
	// by a CA that connectSettings does not list, so that the dialer's
	// certificate verification fails.
	UntrustedServerCert bool

	// DRBackend, when set, adds a cross-Region DR replica: a second
	// instance, DRInstance in DRRegion of the same project (defaults
	// DefaultDRInstance, DefaultDRRegion), at [DRInstanceIP], forwarding
	// to DRBackend, and a write endpoint ([Server.WriteEndpoint]) that
	// names the primary and moves at [Server.Switchover]. Faults apply to
	// the first instance only.
	DRInstance, DRRegion, DRBackend string
}

// Defaults of the DR replica ([Config].DRBackend).
const (
	DefaultDRInstance = "fake-instance-dr"
	DefaultDRRegion   = "fake-region-2"
)

// DRInstanceIP is the address connectSettings reports for the DR replica;
// [Server.Dial] redirects it to the replica as it redirects [InstanceIP].
const DRInstanceIP = "127.0.0.2"

// Server is a fake Cloud SQL: a fake SQL Admin API and OAuth2 token endpoint
// over plain HTTP on loopback, and a fake instance (a TLS 1.3 listener on
// loopback) that forwards to a real PostgreSQL server. Start one with [New]
// and stop it with [Close].
//
// A Server is safe for concurrent use. Faults set with [Server.Fail],
// [Server.Slow], [Server.Refuse], [Server.ResetHandshake],
// [Server.ResetAfterHandshake] and [Server.SlowHandshake] apply to the
// requests and connections that arrive after the call. The zero Server is
// not usable.
type Server struct {
	cfg      Config
	connName string

	serverCA  *certs.Authority // listed in connectSettings
	clientCA  *certs.Authority // signs ephemeral certificates; trusted by the instance
	serverPEM string
	tlsConfig *tls.Config

	api      *gcpfake.API // the Admin API and the token endpoint
	adminURL string
	inst     *gcpfake.Instance
	dr       *gcpfake.Instance // the DR replica, with Config.DRBackend
	drName   string            // its connection name
	zone     *zone             // the write endpoint's DNS, with Config.DRBackend

	life *gcpfake.Life // the HTTP serve loop, the accept loop, every handler and connection

	mu         sync.Mutex
	loginCerts int
	drPrimary  bool // the write endpoint names the DR replica
}

// New starts a fake Cloud SQL: the HTTP server and the instance listener,
// both on 127.0.0.1 with free ports. It returns an error if cfg.Backend is
// empty or a listener cannot be opened. The caller must call [Server.Close].
func New(cfg Config) (*Server, error) {
	if cfg.Backend == "" {
		return nil, errors.New("fakes/cloudsqltest: Config.Backend is required (the PostgreSQL host:port to forward to)")
	}
	cfg.Project = cmp.Or(cfg.Project, DefaultProject)
	cfg.Region = cmp.Or(cfg.Region, DefaultRegion)
	cfg.Instance = cmp.Or(cfg.Instance, DefaultInstance)
	cfg.DatabaseVersion = cmp.Or(cfg.DatabaseVersion, DefaultDatabaseVersion)
	cfg.ServerCN = cmp.Or(cfg.ServerCN, cfg.Project+":"+cfg.Instance)
	cfg.DRInstance = cmp.Or(cfg.DRInstance, DefaultDRInstance)
	cfg.DRRegion = cmp.Or(cfg.DRRegion, DefaultDRRegion)
	s := &Server{
		cfg:      cfg,
		connName: cfg.Project + ":" + cfg.Region + ":" + cfg.Instance,
		life:     gcpfake.NewLife(),
	}
	if err := s.setupTLS(); err != nil {
		return nil, fmt.Errorf("fakes/cloudsqltest: certificates: %w", err)
	}
	var err error
	s.inst, err = gcpfake.StartInstance(s.life, gcpfake.InstanceConfig{
		TLS: s.tlsConfig, Backend: cfg.Backend, IP: InstanceIP, Port: "3307",
		ErrClosed: ErrClosed, ErrNotInstance: ErrNotInstance,
	})
	if err != nil {
		return nil, fmt.Errorf("fakes/cloudsqltest: %w", err)
	}
	if cfg.DRBackend != "" {
		if err := s.startDR(); err != nil {
			s.life.Shut()
			s.inst.Close()
			s.life.Wait()
			return nil, fmt.Errorf("fakes/cloudsqltest: DR replica: %w", err)
		}
	}
	s.api, err = gcpfake.StartAPI(s.life, gcpfake.APIConfig{
		Endpoints: int(ResolveConnectSettings), APIToken: int(APIToken), LoginToken: int(LoginToken),
		LoginScope: ScopeLogin, Prefix: apiPrefix, Admin: s.serveAdmin, Messages: messages,
	})
	if err != nil {
		s.life.Shut()
		s.inst.Close()
		s.closeDR()
		s.life.Wait()
		return nil, fmt.Errorf("fakes/cloudsqltest: %w", err)
	}
	s.adminURL = s.api.URL + "/"
	return s, nil
}

func (s *Server) setupTLS() error {
	var err error
	if s.serverCA, err = certs.NewNamed("holdfast fake Cloud SQL server CA"); err != nil {
		return err
	}
	if s.clientCA, err = certs.NewNamed("holdfast fake Cloud SQL client CA"); err != nil {
		return err
	}
	s.serverPEM = string(s.serverCA.CertPEM())
	signer := s.serverCA
	if s.cfg.UntrustedServerCert {
		if signer, err = certs.NewNamed("holdfast fake untrusted CA"); err != nil {
			return err
		}
	}
	cert, err := signer.KeyPair(s.cfg.ServerCN, nil)
	if err != nil {
		return err
	}
	clients := x509.NewCertPool()
	clients.AddCert(s.clientCA.Cert())
	s.tlsConfig = &tls.Config{
		Certificates: []tls.Certificate{*cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    clients,
		MinVersion:   tls.VersionTLS13,
	}
	return nil
}

// Close stops the fake: it closes the listeners and every open connection,
// fails the requests still waiting in an injected delay, and waits for all
// of the fake's goroutines to return. It is idempotent and safe to call
// concurrently; every call returns nil. Close the pgx pool and the
// cloudsqlconn dialer first.
func (s *Server) Close() error {
	if s.life.Shut() {
		s.api.Close() // closes the HTTP listener and connections
		s.inst.Close()
		s.closeDR()
	}
	s.life.Wait()
	s.api.CloseIdle()
	return nil
}

// ConnName returns the instance connection name, "project:region:instance".
func (s *Server) ConnName() string { return s.connName }

// AdminURL returns the base URL of the fake Admin API, for
// cloudsqlconn.WithAdminAPIEndpoint: "http://127.0.0.1:PORT/".
func (s *Server) AdminURL() string { return s.adminURL }

// TokenURL returns the URL of the fake OAuth2 token endpoint (client
// credentials grant).
func (s *Server) TokenURL() string { return s.api.TokenURL() }

// InstanceAddr returns the "host:port" of the fake instance's TLS listener.
func (s *Server) InstanceAddr() string { return s.inst.Addr() }

// ServerCAPEM returns the PEM of the CA that connectSettings lists as the
// instance's server CA.
func (s *Server) ServerCAPEM() string { return s.serverPEM }

// TokenSource returns an OAuth2 token source that fetches tokens from the
// fake's token endpoint with the client credentials grant: kind [APIToken]
// asks for the Admin API scope, kind [LoginToken] for the IAM database login
// scope. Tokens are opaque, expire in one hour and carry that expiry.
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
	return gcpfake.FailingSource{Err: fmt.Errorf("fakes/cloudsqltest: %v is not a token kind", kind)}
}

// DialerOptions returns the cloudsqlconn options that point a real dialer at
// this fake, without IAM database authentication:
//
//   - WithAdminAPIEndpoint(AdminURL()): the Admin API is the fake's;
//   - WithTokenSource(TokenSource(APIToken)): explicit credentials, so the
//     dialer never looks for Application Default Credentials;
//   - WithDialFunc(Dial): the instance's address is redirected to the fake
//     instance;
//   - WithBuiltInMetrics(false): no Cloud Monitoring export and no metadata
//     server probes;
//   - WithRSAKey(RSAKey()): no key generation per dialer.
//
// Append your own options (WithLazyRefresh, WithRefreshTimeout, ...) after
// these. Each call builds new token sources.
func (s *Server) DialerOptions() ([]cloudsqlconn.Option, error) {
	return s.dialerOptions(cloudsqlconn.WithTokenSource(s.TokenSource(APIToken)))
}

// IAMDialerOptions is DialerOptions with IAM database authentication:
// WithIAMAuthN and WithIAMAuthNTokenSources(TokenSource(APIToken),
// TokenSource(LoginToken)) instead of WithTokenSource. The login token then
// travels in every generateEphemeralCert request ([Stats] LoginCerts).
func (s *Server) IAMDialerOptions() ([]cloudsqlconn.Option, error) {
	return s.dialerOptions(cloudsqlconn.WithIAMAuthN(),
		cloudsqlconn.WithIAMAuthNTokenSources(s.TokenSource(APIToken), s.TokenSource(LoginToken)))
}

// dialerOptions are the options of DialerOptions with auth, the dialer's
// credentials, in place of WithTokenSource.
func (s *Server) dialerOptions(auth ...cloudsqlconn.Option) ([]cloudsqlconn.Option, error) {
	key, err := RSAKey()
	if err != nil {
		return nil, err
	}
	opts := append([]cloudsqlconn.Option{cloudsqlconn.WithAdminAPIEndpoint(s.adminURL)}, auth...)
	return append(opts,
		cloudsqlconn.WithDialFunc(s.Dial),
		cloudsqlconn.WithBuiltInMetrics(false),
		cloudsqlconn.WithRSAKey(key),
	), nil
}

// Fail makes the next n requests to endpoint e fail with HTTP status code
// (n < 0: every request until [Server.Clear]). It replaces an earlier Fail
// of e. Admin API endpoints answer a JSON error body as the Admin API does
// (403 "notAuthorized", 404 "instanceDoesNotExist", 5xx "backendError");
// the token endpoint answers an OAuth2 error ("invalid_grant" for 400,
// "invalid_client" for 401) or plain text for other codes. code must be 400
// to 599; other values and unknown endpoints are ignored.
//
// The dialer retries Admin API 5xx answers itself (five tries, about 5 to
// 8.5 seconds) and never retries token failures.
func (s *Server) Fail(e Endpoint, code, n int) { s.api.Faults.Fail(int(e), code, n) }

// Slow delays the next n requests to endpoint e by d before they are
// answered (n < 0: every request until [Server.Clear]); a delayed request
// can still fail by [Server.Fail]. It replaces an earlier Slow of e. A
// request whose client gives up, or that is pending when the fake closes,
// ends early.
func (s *Server) Slow(e Endpoint, d time.Duration, n int) { s.api.Faults.Slow(int(e), d, n) }

// Refuse makes the next n dials of the instance through [Server.Dial] fail
// like a TCP connect to a closed port (n < 0: every dial until
// [Server.Clear]). The refusal is real: the dial goes to a loopback port
// that is bound but not listening, and fails with ECONNREFUSED.
func (s *Server) Refuse(n int) { s.inst.Refuse(n) }

// ResetHandshake makes the instance reset the next n connections in the
// middle of the TLS handshake (n < 0: all until [Server.Clear]): it reads
// the client's first handshake record, then closes the TCP connection with
// a reset, so the dialer's handshake fails with ECONNRESET.
func (s *Server) ResetHandshake(n int) { s.inst.ResetHandshake(n) }

// ResetAfterHandshake makes the instance complete the TLS handshake of the
// next n connections and then reset them before forwarding (n < 0: all
// until [Server.Clear]). The dial succeeds; the first read of the
// PostgreSQL startup exchange fails with ECONNRESET.
func (s *Server) ResetAfterHandshake(n int) { s.inst.ResetAfterHandshake(n) }

// SlowHandshake makes the instance wait d before it starts the TLS
// handshake of the next n connections (n < 0: all until [Server.Clear]).
func (s *Server) SlowHandshake(d time.Duration, n int) { s.inst.SlowHandshake(d, n) }

// Clear removes every injected fault. Requests and connections already
// waiting in a delay keep waiting.
func (s *Server) Clear() {
	s.api.Faults.Clear()
	s.inst.Clear()
}

// Stats returns a snapshot of the fake's counters.
func (s *Server) Stats() Stats {
	in := s.inst.Stats()
	s.mu.Lock()
	loginCerts := s.loginCerts
	s.mu.Unlock()
	return Stats{
		ConnectSettings:        s.api.Faults.Requests(int(ConnectSettings)),
		GenerateEphemeralCert:  s.api.Faults.Requests(int(GenerateEphemeralCert)),
		ResolveConnectSettings: s.api.Faults.Requests(int(ResolveConnectSettings)),
		LoginCerts:             loginCerts,
		APITokens:              s.api.Faults.Requests(int(APIToken)),
		LoginTokens:            s.api.Faults.Requests(int(LoginToken)),
		Failed:                 s.api.Faults.Failed(),
		Dials:                  in.Dials,
		Refused:                in.Refused,
		Resets:                 in.Resets,
		Handshakes:             in.Handshakes,
		Forwarded:              in.Forwarded,
	}
}

// Dial is the dial function to give the dialer (cloudsqlconn.WithDialFunc;
// [Server.DialerOptions] does). The dialer dials InstanceIP:3307; Dial
// connects to the fake instance instead, or refuses the connection when
// [Server.Refuse] says so. It fails with an error wrapping [ErrNotInstance]
// for any other address, and with [ErrClosed] after Close.
func (s *Server) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if host, _, err := net.SplitHostPort(addr); err == nil && host == DRInstanceIP && s.dr != nil {
		return s.dr.Dial(ctx, network, addr)
	}
	return s.inst.Dial(ctx, network, addr)
}

// String describes the fake without secrets.
func (s *Server) String() string {
	return "fakes/cloudsqltest.Server{" + s.connName + ", admin " + s.adminURL + ", instance " + s.InstanceAddr() + ", backend " + s.cfg.Backend + "}"
}
