package alloydb_test

// Every error chain of the AlloyDB connector that holdfast must tell
// apart, produced by the real alloydbconn Dialer (the version in go.mod)
// against the fake AlloyDB of fakes/alloydbtest (loopback only), through
// the dial function alloydb.With installs, and classified as a factory
// built with With classifies them. The synthetic chains of the fuzz test
// are built from the same types by hand; these come from the connector
// itself, so a connector upgrade that changes a chain breaks a test here.

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/url"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/alloydbconn"
	"cloud.google.com/go/alloydbconn/errtype"
	"cloud.google.com/go/auth"
	"golang.org/x/oauth2"
	"google.golang.org/api/googleapi"

	"github.com/holdfast-db/holdfast/alloydb"
	"github.com/holdfast-db/holdfast/classify"
	fake "github.com/holdfast-db/holdfast/fakes/alloydbtest"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/internal/gcpconn/gcptest"
)

// chainCase is one failure of the real dialer.
type chainCase struct {
	name     string
	cfg      fake.Config
	iam      bool
	dialOpts []alloydbconn.DialOption
	setup    func(s *fake.Server)
	uri      func(s *fake.Server) string
	close    bool // close the dialer before dialing
	want     classify.Verdict
	chain    func(t *testing.T, err error) // asserts the types in the chain
}

func TestRealAlloyDBChains(t *testing.T) {
	t.Parallel()
	cases := []chainCase{
		{
			name:  "connectionInfo 403",
			setup: func(s *fake.Server) { s.Fail(fake.ConnectionInfo, 403, -1) },
			want:  gcptest.Fatal(classify.ReasonAlloyDBPermissionDenied),
			chain: wantRefreshAPI(403, "failed to get instance metadata"),
		},
		{
			name:  "generateClientCertificate 403",
			setup: func(s *fake.Server) { s.Fail(fake.GenerateClientCertificate, 403, -1) },
			want:  gcptest.Fatal(classify.ReasonAlloyDBPermissionDenied),
			chain: wantRefreshAPI(403, "create ephemeral cert failed"),
		},
		{
			name: "unknown instance: connectionInfo 404",
			uri: func(s *fake.Server) string {
				return "projects/" + fake.DefaultProject + "/locations/" + fake.DefaultRegion + "/clusters/" + fake.DefaultCluster + "/instances/nope"
			},
			want:  gcptest.Fatal(classify.ReasonAlloyDBInstanceNotFound),
			chain: wantRefreshAPI(404, "failed to get instance metadata"),
		},
		{
			name:  "Admin API token 503",
			setup: func(s *fake.Server) { s.Fail(fake.APIToken, 503, -1) },
			want:  gcptest.Transient("token-fetch-503"),
			chain: func(t *testing.T, err error) {
				re := gcptest.MustAs[*errtype.RefreshError](t, err)
				ue := gcptest.MustAs[*url.Error](t, re)
				if ae := gcptest.MustAs[*auth.Error](t, ue); ae.Response == nil || ae.Response.StatusCode != 503 {
					t.Errorf("auth.Error = %+v", ae)
				}
				gcptest.MustAs[*oauth2.RetrieveError](t, err)
				gcptest.MustNotAs[*alloydb.MetadataExchangeError](t, err)
			},
		},
		{
			name:  "IAM login token 503, in the metadata exchange",
			iam:   true,
			setup: func(s *fake.Server) { s.Fail(fake.LoginToken, 503, -1) },
			want:  gcptest.Transient("token-fetch-503"),
			chain: func(t *testing.T, err error) {
				me := gcptest.MustAs[*alloydb.MetadataExchangeError](t, err)
				if ae, ok := me.Err.(*auth.Error); !ok || ae.Response == nil || ae.Response.StatusCode != 503 {
					t.Errorf("the connector returned %T %v; want its token provider's *auth.Error, bare", me.Err, me.Err)
				}
				gcptest.MustAs[*oauth2.RetrieveError](t, err)
				gcptest.MustNotAs[*errtype.RefreshError](t, err)
			},
		},
		{
			name:  "metadata exchange refused",
			iam:   true,
			setup: func(s *fake.Server) { s.Primary().RejectMetadataExchange(-1, "") },
			want:  gcptest.Fatal(classify.ReasonAlloyDBMetadataExchange),
			chain: func(t *testing.T, err error) {
				me := gcptest.MustAs[*alloydb.MetadataExchangeError](t, err)
				if me.Err.Error() != fake.DefaultRejection || errors.Unwrap(me.Err) != nil {
					t.Errorf("the connector returned %T %q; want the instance's message as a bare error", me.Err, me.Err)
				}
				// Without the wrapper, only a message: nothing to classify.
				if v := classify.New().WithTypes(alloydb.TypeRules()...).Classify(me.Err); v != gcptest.Fatal(classify.ReasonUnknown) {
					t.Errorf("the bare error classifies as %v", v)
				}
			},
		},
		{
			name:  "instance refuses the TCP connection",
			setup: func(s *fake.Server) { s.Primary().Refuse(-1) },
			want:  gcptest.Transient("conn-refused"),
			chain: func(t *testing.T, err error) {
				de := gcptest.MustAs[*errtype.DialError](t, err)
				if !errors.Is(de, syscall.ECONNREFUSED) || de.Message != "failed to dial" {
					t.Errorf("DialError %q does not wrap ECONNREFUSED", de.Message)
				}
			},
		},
		{
			name:  "instance resets the TLS handshake",
			setup: func(s *fake.Server) { s.Primary().ResetHandshake(-1) },
			want:  gcptest.Transient("conn-reset"),
			chain: func(t *testing.T, err error) {
				de := gcptest.MustAs[*errtype.DialError](t, err)
				if !errors.Is(de, syscall.ECONNRESET) || de.Message != "handshake failed" {
					t.Errorf("DialError %q does not wrap ECONNRESET", de.Message)
				}
			},
		},
		{
			name:  "instance resets the connection in the metadata exchange",
			setup: func(s *fake.Server) { s.Primary().ResetAfterHandshake(-1) },
			want:  gcptest.Transient("conn-reset"),
			chain: func(t *testing.T, err error) {
				me := gcptest.MustAs[*alloydb.MetadataExchangeError](t, err)
				gcptest.MustAs[*net.OpError](t, me)
				if !errors.Is(me, syscall.ECONNRESET) {
					t.Errorf("%v does not wrap ECONNRESET", me)
				}
			},
		},
		{
			name: "server certificate from another CA",
			cfg:  fake.Config{UntrustedServerCert: true},
			want: gcptest.Fatal(classify.ReasonTLS),
			chain: func(t *testing.T, err error) {
				gcptest.MustAs[*errtype.DialError](t, err)
				gcptest.MustAs[*tls.CertificateVerificationError](t, err)
			},
		},
		{
			name:     "PSC asked of an instance without it",
			dialOpts: []alloydbconn.DialOption{alloydbconn.WithPSC()},
			want:     gcptest.Fatal(classify.ReasonAlloyDBConfig),
			chain: func(t *testing.T, err error) {
				if _, ok := err.(*errtype.ConfigError); !ok {
					t.Errorf("err is %T, want a bare *errtype.ConfigError", err)
				}
			},
		},
		{
			name:  "dialer closed",
			close: true,
			want:  gcptest.Fatal(classify.ReasonDialerClosed),
			chain: func(t *testing.T, err error) {
				if !errors.Is(err, alloydbconn.ErrDialerClosed) {
					t.Errorf("err = %v", err)
				}
				gcptest.MustNotAs[*alloydb.MetadataExchangeError](t, err)
			},
		},
	}
	c := classify.New(alloydb.Rules()...).WithTypes(alloydb.TypeRules()...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := startFake(t, tc.cfg)
			d := realDialer(t, s, tc.iam)
			if tc.setup != nil {
				tc.setup(s)
			}
			u := s.URI()
			if tc.uri != nil {
				u = tc.uri(s)
			}
			if tc.close {
				_ = d.Close()
			}
			dial := alloydb.Integration(d, u, tc.dialOpts...).Dial
			conn, err := dial(gcptest.CtxFor(t, 30*time.Second), "tcp", "localhost:5432")
			if err == nil {
				_ = conn.Close()
				t.Fatal("Dial succeeded")
			}
			if got := c.Classify(err); got != tc.want {
				t.Errorf("Classify = %v, want %v\nerr: %v", got, tc.want, err)
			}
			tc.chain(t, err)
		})
	}
}

// TestDialTimeoutIsNotAMetadataExchange: a Dial cut by its context (here
// an Admin API call that never answers) returns the context's error,
// Transient, not taken for a metadata exchange failure.
func TestDialTimeoutIsNotAMetadataExchange(t *testing.T) {
	t.Parallel()
	s := startFake(t, fake.Config{})
	d := realDialer(t, s, false)
	s.Slow(fake.ConnectionInfo, time.Hour, -1)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := alloydb.Integration(d, s.URI()).Dial(ctx, "tcp", "localhost:5432")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Dial = %v, want the context's deadline", err)
	}
	gcptest.MustNotAs[*alloydb.MetadataExchangeError](t, err)
	if v := classify.New(alloydb.Rules()...).WithTypes(alloydb.TypeRules()...).Classify(err); v != gcptest.Transient(classify.ReasonTimeout) {
		t.Errorf("Classify = %v", v)
	}
}

// TestReaderHostIsDialed: a connection string whose host is an instance
// URI dials that instance; any other host dials With's.
func TestReaderHostIsDialed(t *testing.T) {
	t.Parallel()
	s := startFake(t, fake.Config{ReadPools: []fake.ReadPool{{Name: "reads", Backend: pgtest.Addr(t)}}})
	d := realDialer(t, s, false)
	dial := alloydb.Integration(d, s.URI()).Dial
	for _, tc := range []struct {
		addr string
		want *fake.Instance
	}{
		{"localhost:5432", s.Primary()},
		{s.ReadPool("reads").URI() + ":5432", s.ReadPool("reads")},
		{s.URI() + ":5432", s.Primary()},
	} {
		before := tc.want.Stats().Handshakes
		conn, err := dial(gcptest.CtxFor(t, 30*time.Second), "tcp", tc.addr)
		if err != nil {
			t.Fatalf("%s: %v", tc.addr, err)
		}
		_ = conn.Close()
		if got := tc.want.Stats().Handshakes; got != before+1 {
			t.Errorf("%s reached the wrong instance: %s saw %d handshakes, had %d", tc.addr, tc.want.Name(), got, before)
		}
	}
}

func wantRefreshAPI(code int, msg string) func(t *testing.T, err error) {
	return func(t *testing.T, err error) {
		t.Helper()
		re := gcptest.MustAs[*errtype.RefreshError](t, err)
		if re.Message != msg {
			t.Errorf("RefreshError.Message = %q, want %q", re.Message, msg)
		}
		if ge := gcptest.MustAs[*googleapi.Error](t, re); ge.Code != code {
			t.Errorf("googleapi.Error.Code = %d, want %d", ge.Code, code)
		}
		gcptest.MustNotAs[*alloydb.MetadataExchangeError](t, err)
	}
}
