package cloudsqltest_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/cloudsqlconn"
	"cloud.google.com/go/cloudsqlconn/errtype"
	"github.com/jackc/pgx/v5"
	"golang.org/x/oauth2"
	"google.golang.org/api/googleapi"

	fake "github.com/holdfast-db/holdfast/fakes/cloudsqltest"
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

// newDialer builds a real cloudsqlconn dialer pointed at s.
func newDialer(t *testing.T, s *fake.Server, iam bool, extra ...cloudsqlconn.Option) *cloudsqlconn.Dialer {
	t.Helper()
	return gcptest.Dialer(t, s, iam, cloudsqlconn.NewDialer, extra...)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// query connects with pgx through d and returns SELECT 41+1.
func query(ctx context.Context, t *testing.T, d *cloudsqlconn.Dialer, connName string) (int, error) {
	t.Helper()
	cfg, err := pgx.ParseConfig("host=localhost user=postgres dbname=postgres sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	cfg.DialFunc = func(ctx context.Context, _, _ string) (net.Conn, error) { return d.Dial(ctx, connName) }
	cfg.LookupFunc = func(_ context.Context, host string) ([]string, error) { return []string{host}, nil }
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	var n int
	err = conn.QueryRow(ctx, "SELECT 41+1").Scan(&n)
	return n, err
}

func TestRealDialerQueriesPostgres(t *testing.T) {
	t.Parallel()
	for _, iam := range []bool{false, true} {
		name := "token"
		if iam {
			name = "iam"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newFake(t, fake.Config{})
			d := newDialer(t, s, iam)
			n, err := query(testCtx(t), t, d, s.ConnName())
			if err != nil || n != 42 {
				t.Fatalf("query = %d, %v; want 42", n, err)
			}
			st := s.Stats()
			if st.ConnectSettings < 1 || st.GenerateEphemeralCert < 1 || st.Handshakes != 1 || st.Forwarded != 1 || st.Dials != 1 {
				t.Errorf("stats = %+v; want at least one connectSettings and generateEphemeralCert, one dial, handshake and forward", st)
			}
			if st.APITokens != 1 {
				t.Errorf("API token requests = %d, want 1 (the Admin API calls carry it)", st.APITokens)
			}
			wantLogin := 0
			if iam {
				wantLogin = 1
			}
			if st.LoginTokens != wantLogin || (st.LoginCerts > 0) != iam {
				t.Errorf("login tokens = %d, login certs = %d; want %d tokens and certs only with IAM authn", st.LoginTokens, st.LoginCerts, wantLogin)
			}
			if !strings.HasPrefix(s.ConnName(), fake.DefaultProject+":"+fake.DefaultRegion+":") {
				t.Errorf("ConnName = %q", s.ConnName())
			}
		})
	}
}

// TestFaults injects each fault and checks the error the real dialer
// returns, with the types and wrapping the real Cloud SQL produces.
func TestFaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		cfg    fake.Config
		iam    bool
		inject func(s *fake.Server)
		icn    func(s *fake.Server) string // default s.ConnName()
		check  func(t *testing.T, err error)
		after  func(t *testing.T, st fake.Stats)
	}{
		{
			name:   "connectSettings 403",
			inject: func(s *fake.Server) { s.Fail(fake.ConnectSettings, 403, 1) },
			check:  wantAPIError(403),
			after: func(t *testing.T, st fake.Stats) {
				if st.Failed < 1 {
					t.Errorf("Failed = %d", st.Failed)
				}
			},
		},
		{
			name:   "connectSettings 404",
			inject: func(s *fake.Server) { s.Fail(fake.ConnectSettings, 404, -1) },
			check:  wantAPIError(404),
		},
		{
			name: "unknown instance is 404",
			icn: func(s *fake.Server) string {
				return fake.DefaultProject + ":" + fake.DefaultRegion + ":no-such-instance"
			},
			check: wantAPIError(404),
		},
		{
			name:   "generateEphemeralCert 403",
			inject: func(s *fake.Server) { s.Fail(fake.GenerateEphemeralCert, 403, -1) },
			check:  wantAPIError(403),
		},
		{
			name: "region mismatch is a ConfigError",
			icn:  func(s *fake.Server) string { return fake.DefaultProject + ":other-region:" + fake.DefaultInstance },
			check: func(t *testing.T, err error) {
				var ce *errtype.ConfigError
				if !errors.As(err, &ce) {
					t.Fatalf("err = %v, want *errtype.ConfigError", err)
				}
			},
		},
		{
			name:   "IAM login token 503",
			iam:    true,
			inject: func(s *fake.Server) { s.Fail(fake.LoginToken, 503, 1) },
			check: func(t *testing.T, err error) {
				var re *errtype.RefreshError
				var ae *auth.Error
				var oe *oauth2.RetrieveError
				if !errors.As(err, &re) || !errors.As(err, &ae) || !errors.As(err, &oe) {
					t.Fatalf("err = %v; want RefreshError → auth.Error → oauth2.RetrieveError", err)
				}
				if oe.Response == nil || oe.Response.StatusCode != 503 || !ae.Temporary() {
					t.Fatalf("RetrieveError = %+v, auth.Error temporary %v", oe.Response, ae.Temporary())
				}
				var ue *url.Error
				if errors.As(err, &ue) {
					t.Errorf("the login token error went through HTTP: %v", err)
				}
			},
		},
		{
			name:   "API token 503",
			inject: func(s *fake.Server) { s.Fail(fake.APIToken, 503, -1) },
			check: func(t *testing.T, err error) {
				var ue *url.Error
				var ae *auth.Error
				var oe *oauth2.RetrieveError
				if !errors.As(err, &ue) || !errors.As(err, &ae) || !errors.As(err, &oe) || oe.Response.StatusCode != 503 {
					t.Fatalf("err = %v; want url.Error → auth.Error → oauth2.RetrieveError{503}", err)
				}
			},
			after: func(t *testing.T, st fake.Stats) {
				if st.ConnectSettings != 0 {
					t.Errorf("connectSettings = %d; the API token failed, no call should reach the Admin API", st.ConnectSettings)
				}
			},
		},
		{
			name:   "refused",
			inject: func(s *fake.Server) { s.Refuse(1) },
			check: func(t *testing.T, err error) {
				var de *errtype.DialError
				if !errors.As(err, &de) || !errors.Is(err, syscall.ECONNREFUSED) {
					t.Fatalf("err = %v; want DialError wrapping ECONNREFUSED", err)
				}
			},
			after: func(t *testing.T, st fake.Stats) {
				if st.Refused != 1 {
					t.Errorf("Refused = %d, want 1", st.Refused)
				}
			},
		},
		{
			name:   "reset mid-handshake",
			inject: func(s *fake.Server) { s.ResetHandshake(1) },
			check: func(t *testing.T, err error) {
				var de *errtype.DialError
				if !errors.As(err, &de) || !errors.Is(err, syscall.ECONNRESET) {
					t.Fatalf("err = %v; want DialError wrapping ECONNRESET", err)
				}
			},
			after: func(t *testing.T, st fake.Stats) {
				if st.Resets != 1 {
					t.Errorf("Resets = %d, want 1", st.Resets)
				}
			},
		},
		{
			name: "untrusted server certificate",
			cfg:  fake.Config{UntrustedServerCert: true},
			check: func(t *testing.T, err error) {
				var de *errtype.DialError
				var ve *tls.CertificateVerificationError
				if !errors.As(err, &de) || !errors.As(err, &ve) {
					t.Fatalf("err = %v; want DialError wrapping tls.CertificateVerificationError", err)
				}
			},
		},
		{
			name: "server CN mismatch",
			cfg:  fake.Config{ServerCN: "other-project:other-instance"},
			check: func(t *testing.T, err error) {
				var outer *errtype.DialError
				if !errors.As(err, &outer) {
					t.Fatalf("err = %v; want a DialError", err)
				}
				var inner *errtype.DialError
				if !errors.As(outer.Err, &inner) || inner.Err != nil {
					t.Fatalf("err = %v; want DialError → DialError with no cause", err)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newFake(t, tt.cfg)
			d := newDialer(t, s, tt.iam)
			if tt.inject != nil {
				tt.inject(s)
			}
			icn := s.ConnName()
			if tt.icn != nil {
				icn = tt.icn(s)
			}
			ctx := testCtx(t)
			conn, err := d.Dial(ctx, icn)
			if err == nil {
				conn.Close()
				t.Fatal("Dial succeeded, want the injected failure")
			}
			tt.check(t, err)
			if tt.after != nil {
				tt.after(t, s.Stats())
			}
		})
	}
}

func wantAPIError(code int) func(t *testing.T, err error) {
	return func(t *testing.T, err error) {
		t.Helper()
		var re *errtype.RefreshError
		var ge *googleapi.Error
		if !errors.As(err, &re) || !errors.As(err, &ge) || ge.Code != code {
			t.Fatalf("err = %v; want RefreshError → googleapi.Error{%d}", err, code)
		}
	}
}

// TestRecoveries checks that faults limited to n plays end, and what the
// next dial sees.
func TestRecoveries(t *testing.T) {
	t.Parallel()

	t.Run("admin 503 within the connector's retry", func(t *testing.T) {
		t.Parallel()
		s := newFake(t, fake.Config{})
		d := newDialer(t, s, false, cloudsqlconn.WithLazyRefresh())
		s.Fail(fake.ConnectSettings, 503, 2)
		start := time.Now()
		n, err := query(testCtx(t), t, d, s.ConnName())
		if err != nil || n != 42 {
			t.Fatalf("query = %d, %v; want success: the connector retries 5xx itself", n, err)
		}
		if st := s.Stats(); st.ConnectSettings != 3 || st.Failed != 2 {
			t.Errorf("connectSettings = %d, failed = %d; want 3 and 2", st.ConnectSettings, st.Failed)
		}
		t.Logf("two 503s absorbed by the connector in %v", time.Since(start).Round(time.Millisecond))
	})

	t.Run("refused once then connects", func(t *testing.T) {
		t.Parallel()
		s := newFake(t, fake.Config{})
		d := newDialer(t, s, false)
		s.Refuse(1)
		ctx := testCtx(t)
		if _, err := query(ctx, t, d, s.ConnName()); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("first query err = %v, want ECONNREFUSED", err)
		}
		if n, err := query(ctx, t, d, s.ConnName()); err != nil || n != 42 {
			t.Fatalf("second query = %d, %v", n, err)
		}
	})

	t.Run("reset after handshake fails the first read", func(t *testing.T) {
		t.Parallel()
		s := newFake(t, fake.Config{})
		d := newDialer(t, s, false)
		s.ResetAfterHandshake(1)
		ctx := testCtx(t)
		conn, err := d.Dial(ctx, s.ConnName())
		if err != nil {
			t.Fatalf("Dial = %v; the handshake completes before the reset", err)
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = conn.Write([]byte{0, 0, 0, 8, 4, 210, 22, 47}) // an SSLRequest, as a client would send
		_, err = conn.Read(make([]byte, 1))
		conn.Close()
		if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, io.EOF) {
			t.Fatalf("Read = %v, want a reset", err)
		}
		if n, err := query(ctx, t, d, s.ConnName()); err != nil || n != 42 {
			t.Fatalf("next query = %d, %v", n, err)
		}
		if st := s.Stats(); st.Resets != 1 || st.Handshakes != 2 || st.Forwarded != 1 {
			t.Errorf("stats = %+v; want 1 reset, 2 handshakes, 1 forward", st)
		}
	})

	t.Run("slow handshake", func(t *testing.T) {
		t.Parallel()
		s := newFake(t, fake.Config{})
		d := newDialer(t, s, false)
		const delay = 300 * time.Millisecond
		s.SlowHandshake(delay, 1)
		start := time.Now()
		if n, err := query(testCtx(t), t, d, s.ConnName()); err != nil || n != 42 {
			t.Fatalf("query = %d, %v", n, err)
		}
		if took := time.Since(start); took < delay {
			t.Errorf("query took %v, want at least the injected %v", took, delay)
		}
	})

	t.Run("slow Admin API is cut by the dial context", func(t *testing.T) {
		t.Parallel()
		s := newFake(t, fake.Config{})
		d := newDialer(t, s, false, cloudsqlconn.WithLazyRefresh())
		s.Slow(fake.ConnectSettings, time.Minute, 1)
		ctx, cancel := context.WithTimeout(testCtx(t), 200*time.Millisecond)
		defer cancel()
		_, err := d.Dial(ctx, s.ConnName())
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Dial = %v, want context.DeadlineExceeded", err)
		}
		if n, err := query(testCtx(t), t, d, s.ConnName()); err != nil || n != 42 {
			t.Fatalf("next query = %d, %v; the slow fault played once", n, err)
		}
	})
}

func TestDialOnlyRedirectsTheInstance(t *testing.T) {
	t.Parallel()
	s := newFake(t, fake.Config{})
	for _, addr := range []string{"10.0.0.1:3307", "127.0.0.1:5432", "metadata.google.internal:80", "bad"} {
		if _, err := s.Dial(context.Background(), "tcp", addr); !errors.Is(err, fake.ErrNotInstance) {
			t.Errorf("Dial(%q) = %v, want ErrNotInstance", addr, err)
		}
	}
	if st := s.Stats(); st.Dials != 0 {
		t.Errorf("Dials = %d, want 0", st.Dials)
	}
}

func TestClose(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for real connections to close: skipped with -short")
	}
	t.Parallel()
	s, err := fake.New(fake.Config{Backend: pgtest.Addr(t)})
	if err != nil {
		t.Fatal(err)
	}
	d := newDialer(t, s, false, cloudsqlconn.WithLazyRefresh())
	s.Slow(fake.ConnectSettings, time.Hour, -1)
	dialed := make(chan error, 1)
	go func() {
		_, err := d.Dial(context.Background(), s.ConnName())
		dialed <- err
	}()
	// Poll until the request is waiting in the delay.
	for deadline := time.Now().Add(10 * time.Second); s.Stats().ConnectSettings == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the dialer's connectSettings request never arrived")
		}
	}
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Close took %v with a request in a one-hour delay", took)
	}
	if err := <-dialed; err == nil {
		t.Error("Dial succeeded against a closed fake")
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if _, err := s.Dial(context.Background(), "tcp", fake.InstanceIP+":3307"); !errors.Is(err, fake.ErrClosed) {
		t.Errorf("Dial after Close = %v, want ErrClosed", err)
	}
}

func TestNewRequiresBackend(t *testing.T) {
	t.Parallel()
	if s, err := fake.New(fake.Config{}); err == nil {
		s.Close()
		t.Fatal("New without Backend succeeded")
	}
}
