package alloydbtest_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/alloydbconn"
	"github.com/jackc/pgx/v5"
	"golang.org/x/oauth2"

	fake "github.com/holdfast-db/holdfast/fakes/alloydbtest"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/internal/gcpconn/gcptest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// newFake starts a fake forwarding to the package's PostgreSQL server.
func newFake(t *testing.T, cfg fake.Config) *fake.Server {
	t.Helper()
	if cfg.Backend == "" {
		cfg.Backend = pgtest.Addr(t)
	}
	s, err := fake.New(cfg)
	return gcptest.Started(t, s, err)
}

// newDialer builds a real alloydbconn dialer pointed at s.
func newDialer(t *testing.T, s *fake.Server, iam bool, extra ...alloydbconn.Option) *alloydbconn.Dialer {
	t.Helper()
	return gcptest.Dialer(t, s, iam, alloydbconn.NewDialer, extra...)
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// query runs SELECT 1 over a pgx connection dialed by d to uri.
func query(t *testing.T, d *alloydbconn.Dialer, uri string) error {
	t.Helper()
	cfg, err := pgx.ParseConfig("host=localhost user=postgres dbname=postgres sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	cfg.DialFunc = func(ctx context.Context, _, _ string) (net.Conn, error) { return d.Dial(ctx, uri) }
	ctx := ctxFor(t, 30*time.Second)
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	var one int
	return c.QueryRow(ctx, "SELECT 1").Scan(&one)
}

// The real dialer connects through the fake to PostgreSQL, with and
// without IAM database authentication, in one Admin API round and one
// metadata exchange.
func TestRealDialerConnects(t *testing.T) {
	t.Parallel()
	for _, iam := range []bool{false, true} {
		t.Run("iam="+strconv.FormatBool(iam), func(t *testing.T) {
			t.Parallel()
			s := newFake(t, fake.Config{})
			d := newDialer(t, s, iam)
			if err := query(t, d, s.URI()); err != nil {
				t.Fatalf("query: %v", err)
			}
			st := s.Stats()
			want := fake.Stats{ConnectionInfo: 1, GenerateClientCertificate: 1, APITokens: 1,
				Instances: fake.InstanceStats{Dials: 1, Handshakes: 1, Exchanges: 1, Forwarded: 1}}
			if iam {
				want.LoginTokens, want.Instances.IAMLogins = 1, 1
			}
			if st != want {
				t.Errorf("stats = %+v\nwant    %+v", st, want)
			}
		})
	}
}

// Each instance of the cluster has its URI and IP address, and the dialer
// reaches the one it names; Dial refuses any other address, and every
// address after Close.
func TestInstances(t *testing.T) {
	t.Parallel()
	s := newFake(t, fake.Config{ReadPools: []fake.ReadPool{{Name: "r1", Backend: pgtest.Addr(t)}, {Name: "r2", Backend: pgtest.Addr(t)}}})
	if s.ReadPool(fake.DefaultInstance) != nil || s.ReadPool("nope") != nil {
		t.Error("ReadPool returned the primary, or an instance that does not exist")
	}
	ips := map[string]bool{}
	for _, in := range []*fake.Instance{s.Primary(), s.ReadPool("r1"), s.ReadPool("r2")} {
		if ips[in.IP()] {
			t.Errorf("two instances at %s", in.IP())
		}
		ips[in.IP()] = true
		if want := "projects/fake-project/locations/fake-region/clusters/fake-cluster/instances/" + in.Name(); in.URI() != want {
			t.Errorf("URI = %q, want %q", in.URI(), want)
		}
	}
	if s.URI() != fake.URI || s.Primary().IP() != fake.InstanceIP {
		t.Errorf("primary %s at %s; want %s at %s", s.URI(), s.Primary().IP(), fake.URI, fake.InstanceIP)
	}
	d := newDialer(t, s, false)
	if err := query(t, d, s.ReadPool("r2").URI()); err != nil {
		t.Fatal(err)
	}
	if f1, f2, p := s.ReadPool("r1").Stats().Forwarded, s.ReadPool("r2").Stats().Forwarded, s.Primary().Stats().Forwarded; f1 != 0 || f2 != 1 || p != 0 {
		t.Errorf("forwarded: r1 %d, r2 %d, primary %d; want only r2", f1, f2, p)
	}
	for _, addr := range []string{"127.0.0.9:5433", fake.InstanceIP + ":5432", "nonsense"} {
		if _, err := s.Dial(ctxFor(t, time.Second), "tcp", addr); !errors.Is(err, fake.ErrNotInstance) {
			t.Errorf("Dial(%s) = %v, want ErrNotInstance", addr, err)
		}
	}
	_ = s.Close()
	if _, err := s.Dial(ctxFor(t, time.Second), "tcp", fake.InstanceIP+":"+fake.Port); !errors.Is(err, fake.ErrClosed) {
		t.Errorf("Dial after Close = %v, want ErrClosed", err)
	}
	_ = s.Close() // idempotent
}

func TestNewRejectsBadConfigs(t *testing.T) {
	t.Parallel()
	for _, cfg := range []fake.Config{
		{},
		{Backend: "127.0.0.1:1", ReadPools: []fake.ReadPool{{Name: "r"}}},
		{Backend: "127.0.0.1:1", ReadPools: []fake.ReadPool{{Name: fake.DefaultInstance, Backend: "127.0.0.1:1"}}},
	} {
		if s, err := fake.New(cfg); err == nil {
			_ = s.Close()
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
}

// The Admin API answers only calls with a token it minted, and only for
// its cluster, in the JSON of Google's errors.
func TestAdminAPIChecksCalls(t *testing.T) {
	t.Parallel()
	s := newFake(t, fake.Config{Backend: "127.0.0.1:1"})
	get := func(path, token string) (int, string) {
		req, err := http.NewRequestWithContext(ctxFor(t, 5*time.Second), http.MethodGet, s.AdminURL()+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	tok, err := s.TokenSource(fake.APIToken).Token()
	if err != nil {
		t.Fatal(err)
	}
	path := "/v1alpha/" + s.URI() + "/connectionInfo"
	if code, body := get(path, ""); code != 401 || !strings.Contains(body, `"status":"UNAUTHENTICATED"`) {
		t.Errorf("without a token: %d %s", code, body)
	}
	if code, body := get(path, tok.AccessToken); code != 200 || !strings.Contains(body, `"ipAddress":"127.0.0.1"`) {
		t.Errorf("with a token: %d %s", code, body)
	}
	if code, _ := get(strings.Replace(path, fake.DefaultCluster, "other", 1), tok.AccessToken); code != 404 {
		t.Errorf("another cluster: %d", code)
	}
	if code, _ := get("/v1alpha/projects/p/connectionInfo", tok.AccessToken); code != 400 { // not counted: no endpoint
		t.Errorf("a malformed call: %d", code)
	}
	s.Fail(fake.ConnectionInfo, 503, 1)
	if code, body := get(path, tok.AccessToken); code != 503 || !strings.Contains(body, `"status":"UNAVAILABLE"`) {
		t.Errorf("an injected 503: %d %s", code, body)
	}
	if st := s.Stats(); st.ConnectionInfo != 4 || st.Failed != 1 || st.APITokens != 1 {
		t.Errorf("stats = %+v", st)
	}
}

// The metadata exchange refuses a token the fake did not mint, and what
// RejectMetadataExchange says; a dialer that opts out of the exchange is
// forwarded without one.
func TestMetadataExchange(t *testing.T) {
	t.Parallel()
	t.Run("foreign login token", func(t *testing.T) {
		t.Parallel()
		s := newFake(t, fake.Config{})
		foreign := oauth2.StaticTokenSource(&oauth2.Token{AccessToken: "not-the-fakes", Expiry: time.Now().Add(time.Hour)})
		d := newDialer(t, s, true, alloydbconn.WithIAMAuthNTokenSource(foreign))
		err := query(t, d, s.URI())
		if err == nil || !strings.Contains(err.Error(), "the OAuth2 token is not valid") {
			t.Errorf("query = %v, want the exchange refused", err)
		}
		if st := s.Primary().Stats(); st.Rejected != 1 || st.Forwarded != 0 || st.IAMLogins != 0 {
			t.Errorf("stats = %+v", st)
		}
	})
	t.Run("refused, then cleared", func(t *testing.T) {
		t.Parallel()
		s := newFake(t, fake.Config{})
		d := newDialer(t, s, false)
		s.Primary().RejectMetadataExchange(1, "no entry")
		if err := query(t, d, s.URI()); err == nil || !strings.HasSuffix(err.Error(), "no entry") {
			t.Errorf("query = %v, want the instance's message", err)
		}
		if err := query(t, d, s.URI()); err != nil {
			t.Errorf("second query = %v", err)
		}
		s.Primary().RejectMetadataExchange(-1, "")
		s.Clear()
		if err := query(t, d, s.URI()); err != nil {
			t.Errorf("query after Clear = %v", err)
		}
	})
	t.Run("opted out", func(t *testing.T) {
		t.Parallel()
		s := newFake(t, fake.Config{})
		d := newDialer(t, s, false, alloydbconn.WithOptOutOfAdvancedConnectionCheck())
		if err := query(t, d, s.URI()); err != nil {
			t.Fatal(err)
		}
		if st := s.Primary().Stats(); st.Exchanges != 0 || st.Forwarded != 1 {
			t.Errorf("stats = %+v; want no exchange, forwarded", st)
		}
	})
}

// Faults of the instance, as the connector reports them.
func TestInstanceFaults(t *testing.T) {
	t.Parallel()
	s := newFake(t, fake.Config{})
	d := newDialer(t, s, false)
	in := s.Primary()
	in.Refuse(1)
	if _, err := d.Dial(ctxFor(t, 10*time.Second), s.URI()); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("refused: %v", err)
	}
	in.ResetHandshake(1)
	if _, err := d.Dial(ctxFor(t, 10*time.Second), s.URI()); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("reset in the handshake: %v", err)
	}
	in.ResetAfterHandshake(1)
	if _, err := d.Dial(ctxFor(t, 10*time.Second), s.URI()); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("reset after the handshake: %v", err)
	}
	in.SlowHandshake(time.Hour, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := d.Dial(ctx, s.URI()); err == nil {
		t.Error("a handshake an hour late succeeded")
	}
	if err := query(t, d, s.URI()); err != nil {
		t.Errorf("after the faults: %v", err)
	}
	if st := in.Stats(); st.Refused != 1 || st.Resets != 2 || st.Forwarded != 1 {
		t.Errorf("stats = %+v", st)
	}
}

// An untrusted server certificate fails the dialer's handshake.
func TestUntrustedServerCert(t *testing.T) {
	t.Parallel()
	s := newFake(t, fake.Config{UntrustedServerCert: true})
	d := newDialer(t, s, false)
	var ve *tls.CertificateVerificationError
	if _, err := d.Dial(ctxFor(t, 10*time.Second), s.URI()); !errors.As(err, &ve) {
		t.Errorf("Dial = %v, want a certificate verification error", err)
	}
}
