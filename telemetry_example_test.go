package holdfast_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/fakes"
	"github.com/holdfast-db/holdfast/retry"
)

// A pool whose database refuses every connection fails its startup; the
// metrics say at which stage and how: two connects (the startup policy's
// two attempts), each of three refused dials, every loop exhausted.
func ExampleWithMeterProvider() {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()

	fast := retry.Default()
	fast.InitialInterval, fast.MaxInterval = time.Nanosecond, time.Nanosecond
	startup := fast
	startup.MaxAttempts = 2
	budget, _ := retry.NewBudget(retry.DefaultBudget())
	f, err := holdfast.New(
		holdfast.WithMeterProvider(mp),
		holdfast.WithRetryPolicy(fast),
		holdfast.WithStartupPolicy(startup),
		holdfast.WithRetryBudget(budget),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg, err := pgxpool.ParseConfig("postgres://app@db.example:5432/app?sslmode=disable")
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg.ConnConfig.LookupFunc = func(context.Context, string) ([]string, error) { return []string{"192.0.2.1"}, nil }
	cfg.ConnConfig.DialFunc = fakes.NewConnector("", fakes.Refused().Forever()).Dial
	_, err = f.NewPool(context.Background(), cfg)
	var ce *holdfast.ConnectError
	fmt.Println("startup failed:", errors.As(err, &ce) && ce.Layer == "startup")

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		fmt.Println(err)
		return
	}
	var lines []string
	for _, m := range rm.ScopeMetrics[0].Metrics {
		sum, ok := m.Data.(metricdata.Sum[int64])
		if !ok || !strings.HasPrefix(m.Name, "holdfast.") {
			continue
		}
		for _, p := range sum.DataPoints {
			layer, _ := p.Attributes.Value("holdfast.layer")
			stage, _ := p.Attributes.Value("holdfast.stage")
			reason, _ := p.Attributes.Value("error.type")
			lines = append(lines, fmt.Sprintf("%s %s layer=%s stage=%s error.type=%s: %d",
				m.Name, m.Unit, layer.String(), stage.String(), reason.String(), p.Value))
		}
	}
	slices.Sort(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
	// Output:
	// startup failed: true
	// holdfast.connect.attempts {attempt} layer= stage=startup error.type=conn-refused: 2
	// holdfast.retries {retry} layer=connect stage=startup error.type=conn-refused: 4
	// holdfast.retries {retry} layer=startup stage=startup error.type=conn-refused: 1
	// holdfast.retry.exhausted {operation} layer=connect stage=startup error.type=conn-refused: 2
	// holdfast.retry.exhausted {operation} layer=startup stage=startup error.type=conn-refused: 1
}
