package alloydb_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/alloydbconn"
	"golang.org/x/oauth2"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/alloydb"
	"github.com/holdfast-db/holdfast/internal/gcpconn/gcptest"
	"github.com/holdfast-db/holdfast/retry"
)

// offlineDialer is a real dialer that does no I/O until it dials.
func offlineDialer(t *testing.T) *alloydbconn.Dialer {
	t.Helper()
	d, err := alloydbconn.NewDialer(context.Background(),
		alloydbconn.WithTokenSource(oauth2.StaticTokenSource(&oauth2.Token{AccessToken: "t", Expiry: time.Now().Add(time.Hour)})),
		alloydbconn.WithHTTPClient(&http.Client{}), // no Cloud Monitoring gRPC client (see fakes/alloydbtest)
		alloydbconn.WithOptOutOfBuiltInTelemetry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

const uri = "projects/p/locations/r/clusters/c/instances/i"

// TestWith: the option turns pgx's TLS off, passes the host unresolved and
// dials through the connector, with a user policy given before or after it
// still winning.
func TestWith(t *testing.T) {
	d := offlineDialer(t)
	_ = d.Close() // every Dial then fails at once with ErrDialerClosed
	custom := retry.Policy{MaxAttempts: 7, InitialInterval: time.Millisecond, Multiplier: 2, MaxInterval: time.Second}
	for _, opts := range [][]holdfast.Option{
		{alloydb.With(d, uri), holdfast.WithRetryPolicy(custom)},
		{holdfast.WithRetryPolicy(custom), alloydb.With(d, uri)},
	} {
		f, err := holdfast.New(opts...)
		if err != nil {
			t.Fatal(err)
		}
		gcptest.WantConnectorDial(t, f, gcptest.Parse(t, "host=db.example port=5433 user=u dbname=d sslmode=prefer"), alloydbconn.ErrDialerClosed)
		f.Close()
	}
}

func TestWithBadArguments(t *testing.T) {
	d := offlineDialer(t)
	for _, tt := range []struct {
		o    holdfast.Option
		want string
	}{
		{alloydb.With(nil, uri), "alloydb: invalid dialer: nil *alloydbconn.Dialer"},
		{alloydb.With(d, ""), `alloydb: invalid uri: not an instance URI: want projects/PROJECT/locations/REGION/clusters/CLUSTER/instances/INSTANCE, got ""`},
		{alloydb.With(d, "my-project:us-central1:my-instance"), `got "my-project:us-central1:my-instance"`},
		{alloydb.With(d, "projects/p/locations/r/clusters/c"), "not an instance URI"},
	} {
		_, err := holdfast.New(tt.o)
		var hce *holdfast.ConfigError
		var ace *alloydb.ConfigError
		if !errors.As(err, &hce) || !errors.As(err, &ace) || !errors.Is(err, alloydb.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New = %v, want a *holdfast.ConfigError saying %q", err, tt.want)
		}
	}
	if in := alloydb.Integration(nil, uri); in.Dial != nil {
		t.Error("Integration(nil dialer) has a Dial")
	}
	// Two integrations that both dial are a mistake.
	if _, err := holdfast.New(alloydb.With(d, uri), holdfast.WithIntegration(holdfast.Integration{Dial: new(net.Dialer).DialContext})); err == nil {
		t.Error("two dial functions accepted")
	}
}
