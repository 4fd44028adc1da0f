package cloudsql_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/cloudsqlconn"
	"cloud.google.com/go/cloudsqlconn/errtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/oauth2"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/cloudsql"
	fake "github.com/holdfast-db/holdfast/fakes/cloudsqltest"
	"github.com/holdfast-db/holdfast/internal/gcpconn/gcptest"
)

// offlineDialer is a real dialer that never touches the network until it
// dials: explicit credentials, no built-in metrics, a shared RSA key.
func offlineDialer(t *testing.T) *cloudsqlconn.Dialer {
	t.Helper()
	key, err := fake.RSAKey()
	if err != nil {
		t.Fatal(err)
	}
	d, err := cloudsqlconn.NewDialer(context.Background(),
		cloudsqlconn.WithTokenSource(oauth2.StaticTokenSource(&oauth2.Token{AccessToken: "offline", Expiry: time.Now().Add(time.Hour)})),
		cloudsqlconn.WithBuiltInMetrics(false),
		cloudsqlconn.WithRSAKey(key),
		cloudsqlconn.WithAdminAPIEndpoint("http://127.0.0.1:1/"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func TestConfigure(t *testing.T) {
	t.Parallel()
	d := offlineDialer(t)
	parse := func(dsn string) *pgxpool.Config {
		cfg, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}

	t.Run("invalid arguments", func(t *testing.T) {
		t.Parallel()
		tests := []struct {
			name     string
			cfg      *pgxpool.Config
			d        *cloudsqlconn.Dialer
			instance string
			field    string
		}{
			{"nil config", nil, d, "p:r:i", "cfg"},
			{"config not from ParseConfig", &pgxpool.Config{}, d, "p:r:i", "cfg.ConnConfig"},
			{"nil dialer", parse("host=localhost"), nil, "p:r:i", "dialer"},
			{"empty instance", parse("host=localhost"), d, "", "instance"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				err := cloudsql.Configure(tt.cfg, tt.d, tt.instance)
				var ce *cloudsql.ConfigError
				if !errors.As(err, &ce) || ce.Field != tt.field || !errors.Is(err, cloudsql.ErrInvalidConfig) {
					t.Fatalf("Configure = %v; want a *ConfigError for %s matching ErrInvalidConfig", err, tt.field)
				}
				if !strings.HasPrefix(err.Error(), "cloudsql: invalid "+tt.field+": ") {
					t.Errorf("message %q does not start with the package and field", err)
				}
			})
		}
	})

	t.Run("forces one plain dial per connect", func(t *testing.T) {
		t.Parallel()
		for _, dsn := range []string{
			"host=localhost user=u dbname=db",                    // sslmode=prefer: TLS config + a plain fallback
			"host=db.example,db2.example user=u sslmode=require", // several hosts: fallbacks
			"postgres://u@localhost:6432/db?sslmode=verify-full&sslrootcert=system",
		} {
			cfg := parse(dsn)
			if err := cloudsql.Configure(cfg, d, "p:r:i"); err != nil {
				t.Fatalf("Configure(%q) = %v", dsn, err)
			}
			cc := cfg.ConnConfig
			if cc.TLSConfig != nil || len(cc.Fallbacks) != 0 || cc.DialFunc == nil {
				t.Errorf("%q: TLSConfig = %v, %d fallbacks, DialFunc set %v; want no pgx TLS, no fallbacks, a dial func",
					dsn, cc.TLSConfig != nil, len(cc.Fallbacks), cc.DialFunc != nil)
			}
			addrs, err := cc.LookupFunc(context.Background(), "localhost")
			if err != nil || len(addrs) != 1 || addrs[0] != "localhost" {
				t.Errorf("%q: LookupFunc(localhost) = %v, %v; want the name unresolved", dsn, addrs, err)
			}
		}
	})

	t.Run("dial function uses the dialer", func(t *testing.T) {
		t.Parallel()
		cfg := parse("host=localhost")
		closed := offlineDialer(t)
		_ = closed.Close()
		if err := cloudsql.Configure(cfg, closed, "p:r:i"); err != nil {
			t.Fatal(err)
		}
		_, err := cfg.ConnConfig.DialFunc(context.Background(), "tcp", "ignored:5432")
		if !errors.Is(err, cloudsqlconn.ErrDialerClosed) {
			t.Fatalf("DialFunc = %v, want the dialer's ErrDialerClosed", err)
		}
	})
}

func TestPolicies(t *testing.T) {
	t.Parallel()
	p := cloudsql.RetryPolicy()
	if err := p.Validate(); err != nil {
		t.Fatalf("RetryPolicy invalid: %v", err)
	}
	if p.AttemptTimeout <= cloudsql.ConnectorRetryMax {
		t.Errorf("AttemptTimeout %v must exceed the connector's own retry %v, or holdfast cuts it short", p.AttemptTimeout, cloudsql.ConnectorRetryMax)
	}
	if p.MaxElapsed < time.Duration(p.MaxAttempts)*p.AttemptTimeout+p.MaxInterval {
		t.Errorf("MaxElapsed %v must cover every attempt at its timeout plus the sleeps, so the loop ends by attempts", p.MaxElapsed)
	}
	if p.MaxAttempts != 2 {
		t.Errorf("MaxAttempts = %d; each attempt can cost a whole connector retry cycle, holdfast adds one", p.MaxAttempts)
	}
	if p.InitialInterval > time.Second {
		t.Errorf("InitialInterval = %v; a token 503 should be retried quickly", p.InitialInterval)
	}
	sp := cloudsql.StartupPolicy()
	if err := sp.Validate(); err != nil {
		t.Fatalf("StartupPolicy invalid: %v", err)
	}
	if sp.AttemptTimeout != 0 && sp.AttemptTimeout < p.MaxElapsed {
		t.Errorf("startup AttemptTimeout %v would cut a connection attempt bounded by %v", sp.AttemptTimeout, p.MaxElapsed)
	}
	if sp.MaxElapsed < time.Duration(sp.MaxAttempts)*(2*cloudsql.ConnectorRetryMax) {
		t.Errorf("startup MaxElapsed %v cannot fit %d attempts of two connector cycles", sp.MaxElapsed, sp.MaxAttempts)
	}
	if _, err := holdfast.New(holdfast.WithIntegration(cloudsql.Integration(nil, ""))); err != nil {
		t.Fatalf("holdfast.New with the policies of cloudsql.Integration = %v", err)
	}
}

func TestRules(t *testing.T) {
	t.Parallel()
	const cn = "p:r:i"
	refused := &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}
	identity := errtype.NewDialError("handshake failed", cn, errtype.NewDialError(`certificate had CN "x", expected "p:i"`, cn, nil))
	var nilDial *errtype.DialError
	var nilRefresh *errtype.RefreshError
	tests := []struct {
		name string
		err  error
		want classify.Verdict
	}{
		{"dialer closed", cloudsqlconn.ErrDialerClosed, gcptest.Fatal(classify.ReasonDialerClosed)},
		{"dialer closed, wrapped", fmt.Errorf("dial: %w", cloudsqlconn.ErrDialerClosed), gcptest.Fatal(classify.ReasonDialerClosed)},
		{"dialer closed beats a transient cause", errors.Join(refused, cloudsqlconn.ErrDialerClosed), gcptest.Fatal(classify.ReasonDialerClosed)},
		{"server identity", identity, gcptest.Fatal(classify.ReasonTLS)},
		{"server identity through pgx-style wrapping", fmt.Errorf("failed to connect: %w", errors.Join(fmt.Errorf("dial error: %w", identity))), gcptest.Fatal(classify.ReasonTLS)},
		{"refresh DialError without cause stays transient",
			errtype.NewDialError("context was canceled or expired before refresh completed", cn, nil),
			classify.Verdict{Class: classify.Transient, Reason: classify.ReasonCloudSQLDial}},
		{"refused DialError stays transient", errtype.NewDialError("failed to dial", cn, errors.Join(refused)),
			classify.Verdict{Class: classify.Transient, Reason: classify.ReasonConnRefused}},
		{"handshake reset stays transient", errtype.NewDialError("handshake failed", cn, &os.SyscallError{Syscall: "read", Err: syscall.ECONNRESET}),
			classify.Verdict{Class: classify.Transient, Reason: classify.ReasonConnReset}},
		{"typed nil DialError", nilDial, gcptest.Fatal(classify.ReasonUnknown)},
		{"typed nil RefreshError next to a server identity failure (its Unwrap panics)",
			errors.Join(nilRefresh, identity), gcptest.Fatal(classify.ReasonTLS)},
		{"unrelated error", errors.New("boom"), gcptest.Fatal(classify.ReasonUnknown)},
	}
	c := classify.New(cloudsql.Rules()...).WithTypes(cloudsql.TypeRules()...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := c.Classify(tt.err); got != tt.want {
				t.Errorf("Classify = %v, want %v", got, tt.want)
			}
		})
	}
}

// The rules stay fast on an error tree that errors.As would take 2^60
// steps to search.
func TestRulesOnAHugeSharedTree(t *testing.T) {
	t.Parallel()
	var err error = errtype.NewDialError("failed to dial", "p:r:i", syscall.ECONNREFUSED)
	for range 60 {
		err = errors.Join(err, err)
	}
	c := classify.New(cloudsql.Rules()...).WithTypes(cloudsql.TypeRules()...)
	done := make(chan classify.Verdict, 1)
	go func() { done <- c.Classify(err) }()
	select {
	case got := <-done:
		if got != gcptest.Fatal(classify.ReasonTooComplex) {
			t.Errorf("Classify = %v, want fatal/too-complex", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Classify did not return within 10s on a shared-join tree")
	}
}
