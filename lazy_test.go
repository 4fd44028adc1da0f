package holdfast_test

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
)

const lateSDKChild = "HOLDFAST_LATE_SDK_CHILD"

// An OpenTelemetry SDK installed globally after Configure is used: the
// connections made after it are instrumented. It runs in a child process,
// because it sets the process's global meter provider.
func TestLateGlobalSDK(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLateGlobalSDKChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), lateSDKChild+"=1", pgtest.EnvDSN+"="+pgtest.DSN(t))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	t.Logf("child:\n%s", out)
}

func TestLateGlobalSDKChild(t *testing.T) {
	if os.Getenv(lateSDKChild) != "1" {
		t.Skip("run by TestLateGlobalSDK in a child process")
	}
	f, err := holdfast.New(holdfast.WithRetryBudget(nil)) // the global providers
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := poolConfig(t, pgtest.DSN(t), "sslmode=disable")
	if err := f.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	// The application installs its SDK after configuring its pools.
	reader := sdkmetric.NewManualReader()
	otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))

	if err := f.Start(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(context.Background(), "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			seen[m.Name] = true
		}
	}
	for _, want := range []string{"db.client.connection.create_time", "holdfast.connect.attempts", "db.client.operation.duration", "db.client.connection.count"} {
		if !seen[want] {
			t.Errorf("%s not recorded after the SDK was installed; recorded: %v", want, seen)
		}
	}
}
