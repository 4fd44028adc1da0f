package cloudsql_test

import (
	"errors"
	"net"
	"testing"
	"time"

	"cloud.google.com/go/cloudsqlconn"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/cloudsql"
	"github.com/holdfast-db/holdfast/internal/gcpconn/gcptest"
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
		gcptest.WantConnectorDial(t, f, gcptest.Parse(t, "host=db.example port=5433 user=u dbname=d sslmode=prefer"), cloudsqlconn.ErrDialerClosed)
		f.Close()
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
