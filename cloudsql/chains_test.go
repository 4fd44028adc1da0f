package cloudsql_test

// Every error chain of the Cloud SQL connector that holdfast must tell
// apart, produced by the real cloudsqlconn Dialer (the version in go.mod)
// against the fake Cloud SQL of fakes (loopback only), and classified by a
// factory built with With, as users get it. The synthetic chains of
// classify's tests are built from the same types by hand; these come from
// the connector itself, so a connector upgrade that changes a chain breaks
// a test here.

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/cloudsqlconn"
	"cloud.google.com/go/cloudsqlconn/errtype"
	"cloud.google.com/go/compute/metadata"
	"golang.org/x/oauth2"
	"google.golang.org/api/googleapi"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/cloudsql"
	fake "github.com/holdfast-db/holdfast/fakes/cloudsqltest"
	"github.com/holdfast-db/holdfast/internal/gcpconn/gcptest"
	"github.com/jackc/pgx/v5/pgconn"
)

// chainCase is one failure of the real dialer.
type chainCase struct {
	name  string
	cfg   fake.Config
	creds string // "token" (default), "iam", "metadata", "sa-json"
	setup func(t *testing.T, s *fake.Server, md *metadataFake)
	icn   func(s *fake.Server) string
	close bool // close the dialer before dialing
	want  classify.Verdict
	chain func(t *testing.T, err error) // asserts the types in the chain
	slow  bool                          // exhausts the connector's Admin API retry
}

func TestRealCloudSQLChains(t *testing.T) {
	t.Parallel()
	cases := []chainCase{
		{
			name:  "connectSettings 503 after the connector's 5 tries",
			setup: func(_ *testing.T, s *fake.Server, _ *metadataFake) { s.Fail(fake.ConnectSettings, 503, -1) },
			want:  gcptest.Transient("admin-api-503"),
			chain: wantRefreshAPI(503, "failed to get instance metadata"),
			slow:  true,
		},
		{
			name:  "generateEphemeralCert 503 after the connector's 5 tries",
			setup: func(_ *testing.T, s *fake.Server, _ *metadataFake) { s.Fail(fake.GenerateEphemeralCert, 503, -1) },
			want:  gcptest.Transient("admin-api-503"),
			chain: wantRefreshAPI(503, "create ephemeral cert failed"),
			slow:  true,
		},
		{
			name:  "connectSettings 403",
			setup: func(_ *testing.T, s *fake.Server, _ *metadataFake) { s.Fail(fake.ConnectSettings, 403, -1) },
			want:  gcptest.Fatal("permission-denied"),
			chain: wantRefreshAPI(403, "failed to get instance metadata"),
		},
		{
			name:  "connectSettings 404",
			setup: func(_ *testing.T, s *fake.Server, _ *metadataFake) { s.Fail(fake.ConnectSettings, 404, -1) },
			want:  gcptest.Fatal("instance-not-found"),
			chain: wantRefreshAPI(404, "failed to get instance metadata"),
		},
		{
			name:  "connectSettings 429 (not retried by the connector)",
			setup: func(_ *testing.T, s *fake.Server, _ *metadataFake) { s.Fail(fake.ConnectSettings, 429, -1) },
			want:  gcptest.Transient("admin-api-429"),
			chain: wantRefreshAPI(429, "failed to get instance metadata"),
		},
		{
			name:  "IAM login token source 503",
			creds: "iam",
			setup: func(_ *testing.T, s *fake.Server, _ *metadataFake) { s.Fail(fake.LoginToken, 503, -1) },
			want:  gcptest.Transient("token-fetch-503"),
			chain: func(t *testing.T, err error) {
				re := gcptest.MustAs[*errtype.RefreshError](t, err)
				ae := gcptest.MustAs[*auth.Error](t, re)
				oe := gcptest.MustAs[*oauth2.RetrieveError](t, ae)
				if re.Message != "failed to retrieve Oauth2 token" || oe.Response.StatusCode != 503 || !ae.Temporary() {
					t.Errorf("RefreshError %q, RetrieveError status %d, auth.Error temporary %v", re.Message, oe.Response.StatusCode, ae.Temporary())
				}
				gcptest.MustNotAs[*url.Error](t, err)
			},
		},
		{
			name:  "IAM login token source invalid_grant",
			creds: "iam",
			setup: func(_ *testing.T, s *fake.Server, _ *metadataFake) { s.Fail(fake.LoginToken, 400, -1) },
			want:  gcptest.Fatal("token-invalid-grant"),
			chain: func(t *testing.T, err error) {
				if oe := gcptest.MustAs[*oauth2.RetrieveError](t, err); oe.ErrorCode != "invalid_grant" {
					t.Errorf("ErrorCode = %q", oe.ErrorCode)
				}
			},
		},
		{
			name:  "API token source 503",
			setup: func(_ *testing.T, s *fake.Server, _ *metadataFake) { s.Fail(fake.APIToken, 503, -1) },
			want:  gcptest.Transient("token-fetch-503"),
			chain: func(t *testing.T, err error) {
				re := gcptest.MustAs[*errtype.RefreshError](t, err)
				ue := gcptest.MustAs[*url.Error](t, re)
				gcptest.MustAs[*auth.Error](t, ue)
				if oe := gcptest.MustAs[*oauth2.RetrieveError](t, ue); oe.Response.StatusCode != 503 {
					t.Errorf("status %d", oe.Response.StatusCode)
				}
			},
		},
		{
			name:  "metadata server token 503 (ADC on Google runtimes)",
			creds: "metadata",
			setup: func(_ *testing.T, _ *fake.Server, md *metadataFake) { md.status.Store(503) },
			want:  gcptest.Transient("token-fetch-503"),
			chain: func(t *testing.T, err error) {
				re := gcptest.MustAs[*errtype.RefreshError](t, err)
				ue := gcptest.MustAs[*url.Error](t, re)
				if me := gcptest.MustAs[*metadata.Error](t, ue); me.Code != 503 {
					t.Errorf("metadata.Error.Code = %d", me.Code)
				}
			},
		},
		{
			name:  "metadata server token 403",
			creds: "metadata",
			setup: func(_ *testing.T, _ *fake.Server, md *metadataFake) { md.status.Store(403) },
			want:  gcptest.Fatal("token-denied"),
			chain: func(t *testing.T, err error) { gcptest.MustAs[*metadata.Error](t, err) },
		},
		{
			name:  "service account key, token_uri 503",
			creds: "sa-json",
			setup: func(_ *testing.T, s *fake.Server, _ *metadataFake) { s.Fail(fake.APIToken, 503, -1) },
			want:  gcptest.Transient("token-fetch-503"),
			chain: func(t *testing.T, err error) {
				ue := gcptest.MustAs[*url.Error](t, err)
				if ae := gcptest.MustAs[*auth.Error](t, ue); ae.Response == nil || ae.Response.StatusCode != 503 {
					t.Errorf("auth.Error = %+v", ae)
				}
				gcptest.MustNotAs[*oauth2.RetrieveError](t, err)
			},
		},
		{
			name: "malformed instance connection name",
			icn:  func(*fake.Server) string { return fake.DefaultProject + ":" + fake.DefaultInstance },
			want: gcptest.Fatal("cloudsql-config"),
			chain: func(t *testing.T, err error) {
				if _, ok := err.(*errtype.ConfigError); !ok {
					t.Errorf("err is %T, want a bare *errtype.ConfigError", err)
				}
			},
		},
		{
			name:  "region mismatch",
			icn:   func(*fake.Server) string { return fake.DefaultProject + ":elsewhere:" + fake.DefaultInstance },
			want:  gcptest.Fatal("cloudsql-config"),
			chain: func(t *testing.T, err error) { gcptest.MustAs[*errtype.ConfigError](t, err) },
		},
		{
			name:  "instance refuses the TCP connection",
			setup: func(_ *testing.T, s *fake.Server, _ *metadataFake) { s.Refuse(-1) },
			want:  gcptest.Transient("conn-refused"),
			chain: func(t *testing.T, err error) {
				de := gcptest.MustAs[*errtype.DialError](t, err)
				gcptest.MustAs[*net.OpError](t, de)
				if !errors.Is(de, syscall.ECONNREFUSED) || de.Message != "failed to dial" {
					t.Errorf("DialError %q does not wrap ECONNREFUSED", de.Message)
				}
			},
		},
		{
			name:  "instance resets the TLS handshake",
			setup: func(_ *testing.T, s *fake.Server, _ *metadataFake) { s.ResetHandshake(-1) },
			want:  gcptest.Transient("conn-reset"),
			chain: func(t *testing.T, err error) {
				de := gcptest.MustAs[*errtype.DialError](t, err)
				if !errors.Is(de, syscall.ECONNRESET) || de.Message != "handshake failed" {
					t.Errorf("DialError %q does not wrap ECONNRESET", de.Message)
				}
			},
		},
		{
			name: "server certificate from an unknown CA",
			cfg:  fake.Config{UntrustedServerCert: true},
			want: gcptest.Fatal("tls-verification"),
			chain: func(t *testing.T, err error) {
				gcptest.MustAs[*errtype.DialError](t, err)
				ve := gcptest.MustAs[*tls.CertificateVerificationError](t, err)
				var ua x509.UnknownAuthorityError
				if !errors.As(ve, &ua) {
					t.Errorf("want x509.UnknownAuthorityError inside, got %v", ve.Err)
				}
			},
		},
		{
			// The connector reports a server certificate for another
			// instance as a DialError without a cause inside the handshake's
			// DialError; the type rules alone see a transient DialError.
			// cloudsql.Rules makes it Fatal tls-verification; see
			// TestServerIdentityNeedsTheCloudSQLRule.
			name:  "server certificate CN for another instance",
			cfg:   fake.Config{ServerCN: "other-project:other-instance"},
			want:  gcptest.Fatal("tls-verification"),
			chain: wantIdentityFailure,
		},
		{
			name:  "dialer closed (with the documented Sentinel rule)",
			close: true,
			want:  gcptest.Fatal(classify.ReasonDialerClosed),
			chain: func(t *testing.T, err error) {
				if !errors.Is(err, cloudsqlconn.ErrDialerClosed) {
					t.Errorf("err = %v, want ErrDialerClosed", err)
				}
			},
		},
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.slow && testing.Short() {
				t.Skip("-short: the connector's own Admin API retry takes 5 to 8.5 seconds")
			}
			s, md := startFakes(t, tc.cfg)
			d := realDialer(t, s, md, tc.creds)
			if tc.setup != nil {
				tc.setup(t, s, md)
			}
			if tc.close {
				_ = d.Close()
			}
			icn := s.ConnName()
			if tc.icn != nil {
				icn = tc.icn(s)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			start := time.Now()
			conn, err := d.Dial(ctx, icn)
			took := time.Since(start)
			if err == nil {
				conn.Close()
				t.Fatal("Dial succeeded")
			}
			t.Logf("MEASURED %s: Dial failed after %v", t.Name(), took.Round(time.Millisecond))
			tc.chain(t, err)
			// The factory's classifier when the cloudsql option is used.
			f, ferr := holdfast.New(cloudsql.With(d, icn))
			if ferr != nil {
				t.Fatal(ferr)
			}
			withSentinel := f
			got := withSentinel.Classify(err)
			if got != tc.want {
				t.Errorf("Classify = %v, want %v\nerr: %v", got, tc.want, err)
			}
			if tc.slow && took < 5*time.Second {
				t.Errorf("Dial failed after %v; the connector's five tries wait at least 5.3s", took)
			}
			// Through pgx's wrapping the verdict is the same.
			if pg := viaPgx(t, err); withSentinel.Classify(pg) != tc.want {
				t.Errorf("through pgx: %v, want %v", withSentinel.Classify(pg), tc.want)
			}
		})
	}
}

// TestServerIdentityNeedsTheCloudSQLRule pins down the one chain the
// built-in rules do not make Fatal: the connector's CN mismatch is a
// DialError with no cause inside the handshake's DialError.
func TestServerIdentityNeedsTheCloudSQLRule(t *testing.T) {
	t.Parallel()
	s, md := startFakes(t, fake.Config{ServerCN: "other-project:other-instance"})
	d := realDialer(t, s, md, "token")
	_, err := d.Dial(context.Background(), s.ConnName())
	if err == nil {
		t.Fatal("Dial succeeded")
	}
	wantIdentityFailure(t, err)
	// The rule that package holdfast/cloudsql's Rules adds, restated.
	rule := func(err error) (classify.Verdict, bool) {
		var outer, inner *errtype.DialError
		if errors.As(err, &outer) && outer.Err != nil && errors.As(outer.Err, &inner) && inner.Err == nil {
			return gcptest.Fatal(classify.ReasonTLS), true
		}
		return classify.Verdict{}, false
	}
	if got := classify.New(rule).Classify(err); got != gcptest.Fatal(classify.ReasonTLS) {
		t.Errorf("with the identity rule: %v", got)
	}
}

func wantIdentityFailure(t *testing.T, err error) {
	t.Helper()
	outer := gcptest.MustAs[*errtype.DialError](t, err)
	var inner *errtype.DialError
	if outer.Message != "handshake failed" || !errors.As(outer.Err, &inner) || inner.Err != nil {
		t.Fatalf("err = %v; want DialError(handshake failed) → DialError without a cause", err)
	}
}

func wantRefreshAPI(code int, msg string) func(t *testing.T, err error) {
	return func(t *testing.T, err error) {
		t.Helper()
		re := gcptest.MustAs[*errtype.RefreshError](t, err)
		ge := gcptest.MustAs[*googleapi.Error](t, re)
		if ge.Code != code || re.Message != msg || re.ConnName != fake.DefaultProject+":"+fake.DefaultRegion+":"+fake.DefaultInstance {
			t.Errorf("googleapi.Error.Code = %d, RefreshError %q for %q; want %d, %q", ge.Code, re.Message, re.ConnName, code, msg)
		}
		if errors.Unwrap(err) == error(re) {
			return // wrapped once by fmt, as observed
		}
		t.Errorf("want fmt.Errorf(...%%w) directly around the RefreshError, got %T", err)
	}
}

// startFakes starts a fake Cloud SQL and a fake metadata server. The fake
// instance forwards to a closed port: none of these cases gets that far.
func startFakes(t *testing.T, cfg fake.Config) (*fake.Server, *metadataFake) {
	t.Helper()
	cfg.Backend = "127.0.0.1:1"
	s, err := fake.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	md := newMetadataFake(t)
	return s, md
}

// realDialer builds the real dialer with explicit credentials of the given
// kind; Application Default Credentials are never looked up.
func realDialer(t *testing.T, s *fake.Server, md *metadataFake, creds string) *cloudsqlconn.Dialer {
	t.Helper()
	var opts []cloudsqlconn.Option
	var err error
	switch creds {
	case "", "token":
		opts, err = s.DialerOptions()
	case "iam":
		opts, err = s.IAMDialerOptions()
	case "metadata", "sa-json":
		key, kerr := fake.RSAKey()
		err = kerr
		opts = []cloudsqlconn.Option{
			cloudsqlconn.WithAdminAPIEndpoint(s.AdminURL()),
			cloudsqlconn.WithDialFunc(s.Dial),
			cloudsqlconn.WithBuiltInMetrics(false),
			cloudsqlconn.WithRSAKey(key),
		}
		if creds == "metadata" {
			opts = append(opts, cloudsqlconn.WithCredentials(auth.NewCredentials(&auth.CredentialsOptions{TokenProvider: md.provider()})))
		} else {
			opts = append(opts, cloudsqlconn.WithCredentialsJSON(serviceAccountJSON(t, s.TokenURL())))
		}
	default:
		t.Fatalf("unknown creds %q", creds)
	}
	if err != nil {
		t.Fatal(err)
	}
	d, err := cloudsqlconn.NewDialer(context.Background(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// metadataFake is a GCE metadata server on loopback: its token endpoint
// answers status (0: a token). The real metadata client reaches it through
// a transport that rewrites the metadata host to the loopback listener and
// refuses every other host, so nothing leaves the machine and
// GCE_METADATA_HOST is not touched.
type metadataFake struct {
	srv    *httptest.Server
	status atomic.Int32
	tr     *http.Transport
}

func newMetadataFake(t *testing.T) *metadataFake {
	m := &metadataFake{tr: &http.Transport{}}
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Metadata-Flavor") != "Google" || !strings.HasPrefix(r.URL.Path, "/computeMetadata/v1/instance/service-accounts/default/token") {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		if code := int(m.status.Load()); code != 0 {
			http.Error(w, http.StatusText(code), code)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "md-token", "expires_in": 3600, "token_type": "Bearer"})
	}))
	t.Cleanup(func() {
		m.srv.Close()
		m.tr.CloseIdleConnections()
	})
	return m
}

func (m *metadataFake) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Host != "169.254.169.254" && r.URL.Host != "metadata.google.internal" {
		return nil, fmt.Errorf("metadataFake: refusing to reach %s", r.URL.Host)
	}
	r2 := r.Clone(r.Context())
	r2.URL.Host = m.srv.Listener.Addr().String()
	r2.Host = r2.URL.Host
	return m.tr.RoundTrip(r2)
}

// provider is what cloud.google.com/go/auth's compute credentials do: fetch
// the token from the metadata server, wrap a failure as
// "credentials: cannot fetch token: %w".
func (m *metadataFake) provider() auth.TokenProvider {
	c := metadata.NewWithOptions(&metadata.Options{Client: &http.Client{Transport: m}})
	return auth.NewCachedTokenProvider(tokenProviderFunc(func(ctx context.Context) (*auth.Token, error) {
		body, err := c.GetWithContext(ctx, "instance/service-accounts/default/token")
		if err != nil {
			return nil, fmt.Errorf("credentials: cannot fetch token: %w", err)
		}
		var tok struct {
			AccessToken string `json:"access_token"`
			ExpiresIn   int    `json:"expires_in"`
		}
		if err := json.Unmarshal([]byte(body), &tok); err != nil {
			return nil, err
		}
		return &auth.Token{Value: tok.AccessToken, Type: "Bearer", Expiry: time.Now().Add(time.Duration(tok.ExpiresIn) * time.Second)}, nil
	}), nil)
}

type tokenProviderFunc func(ctx context.Context) (*auth.Token, error)

func (f tokenProviderFunc) Token(ctx context.Context) (*auth.Token, error) { return f(ctx) }

// serviceAccountJSON is a service account key whose token_uri is the fake's
// token endpoint.
func serviceAccountJSON(t *testing.T, tokenURI string) []byte {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(map[string]string{
		"type":           "service_account",
		"project_id":     fake.DefaultProject,
		"private_key_id": "holdfast-test",
		"private_key":    string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email":   "sa@" + fake.DefaultProject + ".iam.gserviceaccount.com",
		"client_id":      "1",
		"token_uri":      tokenURI,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// viaPgx returns the error pgconn.ConnectConfig reports when its dial to
// host i fails with dialErrs[i]: a *pgconn.ConnectError whose Unwrap is
// errors.Join over the per-host errors. Its addresses are never dialed:
// the DialFunc answers for them.
func viaPgx(t *testing.T, dialErrs ...error) error {
	t.Helper()
	hosts := make([]string, len(dialErrs))
	byAddr := map[string]error{}
	for i, e := range dialErrs {
		hosts[i] = fmt.Sprintf("10.0.0.%d", i+1)
		byAddr[hosts[i]+":5432"] = e
	}
	cfg, err := pgconn.ParseConfig("host=" + strings.Join(hosts, ",") + " user=u dbname=d sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	cfg.LookupFunc = func(_ context.Context, host string) ([]string, error) { return []string{host}, nil }
	cfg.DialFunc = func(_ context.Context, _, addr string) (net.Conn, error) {
		if e, ok := byAddr[addr]; ok {
			return nil, e
		}
		return nil, fmt.Errorf("unexpected address %s", addr)
	}
	conn, err := pgconn.ConnectConfig(context.Background(), cfg)
	if err == nil {
		conn.Close(context.Background())
		t.Fatal("connect succeeded")
	}
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) {
		t.Fatalf("got %T, want *pgconn.ConnectError", err)
	}
	return err
}
