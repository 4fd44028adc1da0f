package obs_test

import (
	"context"
	"fmt"
	"time"

	"github.com/holdfast-db/holdfast/internal/obs"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// The readiness package records a transition and a drain; a ManualReader
// shows what an exporter would receive.
func ExampleTelemetry_Readiness() {
	reader := sdkmetric.NewManualReader()
	tel, err := obs.New(obs.Config{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	ready := tel.Readiness()
	ready.Changed(ctx, false, "fail", "draining")
	ready.Drained(ctx, 3*time.Second, "drained")

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		fmt.Println(err)
		return
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		switch d := m.Data.(type) {
		case metricdata.Gauge[int64]:
			fmt.Printf("%s = %d\n", m.Name, d.DataPoints[0].Value)
		case metricdata.Sum[int64]:
			fmt.Printf("%s = %d\n", m.Name, d.DataPoints[0].Value)
		case metricdata.Histogram[float64]:
			fmt.Printf("%s: %d drain of %gs\n", m.Name, d.DataPoints[0].Count, d.DataPoints[0].Sum)
		}
	}
	// Output:
	// holdfast.readiness.ready = 0
	// holdfast.readiness.transitions = 1
	// holdfast.readiness.drain.duration: 1 drain of 3s
}

// Log lines pass error text through a Redactor: registered secrets and
// connection-string passwords disappear.
func ExampleRedactor() {
	var r obs.Redactor
	r.Add("iam-token-123456")
	fmt.Println(r.Redact(`connect with token iam-token-123456 to "host=db user=app password=hunter2" failed`))
	fmt.Println(r.Redact("dial postgres://app:hunter2@db:5432/app: connection refused"))
	// Output:
	// connect with token [redacted] to "host=db user=app password=[redacted] failed
	// dial postgres://app:[redacted]@db:5432/app: connection refused
}
