package cloudsql_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"cloud.google.com/go/cloudsqlconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/cloudsql"
	"github.com/holdfast-db/holdfast/retry"
)

// TestWith: the option does what Configure used to require calling first,
// with a user policy given before or after it.
func TestWith(t *testing.T) {
	d := offlineDialer(t)
	_ = d.Close() // every Dial then fails at once with ErrDialerClosed
	custom := retry.Policy{MaxAttempts: 7, InitialInterval: time.Millisecond, Multiplier: 2, MaxInterval: time.Second}
	for _, opts := range [][]holdfast.Option{
		{cloudsql.With(d, "p:r:i"), holdfast.WithRetryPolicy(custom)},
		{holdfast.WithRetryPolicy(custom), cloudsql.With(d, "p:r:i")},
	} {
		f, err := holdfast.New(opts...)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := pgxpool.ParseConfig("host=db.example port=5433 user=u dbname=d sslmode=prefer")
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Configure(cfg); err != nil {
			t.Fatal(err)
		}
		cc := cfg.ConnConfig
		if cc.TLSConfig != nil || len(cc.Fallbacks) != 0 {
			t.Errorf("pgx TLS still on: TLSConfig %v, %d fallbacks", cc.TLSConfig != nil, len(cc.Fallbacks))
		}
		if addrs, err := cc.LookupFunc(context.Background(), "db.example"); err != nil || len(addrs) != 1 || addrs[0] != "db.example" {
			t.Errorf("LookupFunc = %v, %v; want the host unresolved", addrs, err)
		}
		// The dialer is closed: the dial must reach it (not pgx's TCP dial
		// to db.example) and fail with its error, classified Fatal, once.
		start := time.Now()
		_, err = cc.DialFunc(context.Background(), "tcp", "db.example:5433")
		if !errors.Is(err, cloudsqlconn.ErrDialerClosed) {
			t.Errorf("dial = %v, want the connector's ErrDialerClosed", err)
		}
		if v := f.Classify(err); v.Retryable() || v.Reason != "dialer-closed" {
			t.Errorf("Classify = %v, want fatal/dialer-closed", v)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("a fatal dial took %v", d)
		}
		if got := f.Classify(errors.New("x")); got.Reason != "unknown" {
			t.Errorf("Classify(plain error) = %v", got)
		}
	}
}

func TestWithBadArguments(t *testing.T) {
	d := offlineDialer(t)
	for _, o := range []holdfast.Option{cloudsql.With(nil, "p:r:i"), cloudsql.With(d, "")} {
		_, err := holdfast.New(o)
		var hce *holdfast.ConfigError
		var cce *cloudsql.ConfigError
		if !errors.As(err, &hce) || !errors.As(err, &cce) {
			t.Errorf("New = %v, want a *holdfast.ConfigError wrapping a *cloudsql.ConfigError", err)
		}
	}
	// Two integrations that both dial are a mistake.
	if _, err := holdfast.New(cloudsql.With(d, "p:r:i"), holdfast.WithIntegration(holdfast.Integration{Dial: new(net.Dialer).DialContext})); err == nil {
		t.Error("two dial functions accepted")
	}
}
