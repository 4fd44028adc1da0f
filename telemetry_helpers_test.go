package holdfast_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/fakes"
)

// otelRig is an OpenTelemetry SDK that records into memory: a ManualReader,
// a SpanRecorder, and a JSON log buffer.
type otelRig struct {
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	logs   *syncBuffer
}

func newRig(t testing.TB) *otelRig {
	t.Helper()
	r := &otelRig{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder(), logs: &syncBuffer{}}
	r.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	r.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans))
	t.Cleanup(func() {
		_ = r.mp.Shutdown(context.Background())
		_ = r.tp.Shutdown(context.Background())
	})
	return r
}

// options wires the rig into a factory.
func (r *otelRig) options() []holdfast.Option {
	return []holdfast.Option{
		holdfast.WithMeterProvider(r.mp),
		holdfast.WithTracerProvider(r.tp),
		holdfast.WithLogger(slog.New(slog.NewJSONHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))),
	}
}

// instrument is one collected instrument: its unit and its points, keyed by
// their attributes ("k=v,k=v", sorted). A point's value is the sum or gauge
// value, or for a histogram its count.
type instrument struct {
	unit   string
	points map[string]float64
}

// collect reads every metric of the rig.
func (r *otelRig) collect(t testing.TB) map[string]instrument {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]instrument{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			in := instrument{unit: m.Unit, points: map[string]float64{}}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					in.points[attrKey(p.Attributes)] += float64(p.Value)
				}
			case metricdata.Sum[float64]:
				for _, p := range d.DataPoints {
					in.points[attrKey(p.Attributes)] += p.Value
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					in.points[attrKey(p.Attributes)] = float64(p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					if p.Count > 0 && p.Sum < 0 {
						t.Errorf("%s: negative duration sum %v", m.Name, p.Sum)
					}
					in.points[attrKey(p.Attributes)] += float64(p.Count)
				}
			default:
				t.Fatalf("%s: unexpected data type %T", m.Name, m.Data)
			}
			out[m.Name] = in
		}
	}
	return out
}

// attributeSets returns every attribute set of every data point, as text,
// for the secrets test.
func (r *otelRig) attributeText(t testing.TB) string {
	t.Helper()
	var b strings.Builder
	for name, in := range r.collect(t) {
		for k := range in.points {
			fmt.Fprintf(&b, "%s %s %s\n", name, in.unit, k)
		}
	}
	return b.String()
}

func attrKey(s attribute.Set) string {
	kvs := s.ToSlice()
	parts := make([]string, 0, len(kvs))
	for _, kv := range kvs {
		parts = append(parts, string(kv.Key)+"="+kv.Value.String())
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// spanText renders every ended span: name, kind, status, attributes and
// events with their attributes.
func spanText(s sdktrace.ReadOnlySpan) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s kind=%s status=%s/%s\n", s.Name(), s.SpanKind(), s.Status().Code, s.Status().Description)
	fmt.Fprintf(&b, "  attrs %s\n", attrKey(attribute.NewSet(s.Attributes()...)))
	for _, e := range s.Events() {
		fmt.Fprintf(&b, "  event %s %s\n", e.Name, attrKey(attribute.NewSet(e.Attributes...)))
	}
	for _, l := range s.Links() {
		fmt.Fprintf(&b, "  link %s\n", l.SpanContext.SpanID())
	}
	return b.String()
}

func (r *otelRig) ended(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range r.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// events returns a span's events as "name k=v,k=v" lines, without the
// holdfast.retry.delay value (random jitter), which it checks is positive.
func events(t testing.TB, s sdktrace.ReadOnlySpan) []string {
	t.Helper()
	var out []string
	for _, e := range s.Events() {
		var kept []attribute.KeyValue
		for _, kv := range e.Attributes {
			if kv.Key == "holdfast.retry.delay" {
				if kv.Value.AsFloat64() <= 0 {
					t.Errorf("event %s: delay %v, want > 0", e.Name, kv.Value.AsFloat64())
				}
				kept = append(kept, attribute.Bool("delay>0", true))
				continue
			}
			kept = append(kept, kv)
		}
		out = append(out, e.Name+" "+attrKey(attribute.NewSet(kept...)))
	}
	return out
}

// syncBuffer collects JSON log lines from concurrent writers.
type syncBuffer struct{ fakes.LogBuffer }

// lines returns the log lines whose message is msg.
func (s *syncBuffer) lines(msg string) []string {
	var out []string
	for _, l := range strings.Split(s.String(), "\n") {
		if strings.Contains(l, `"msg":"`+msg+`"`) {
			out = append(out, l)
		}
	}
	return out
}

// untarget checks that every point of every holdfast.* instrument of got
// (readiness and failover events aside: they name no pool) names the
// pool's target — db.client.connection.pool.name, server.address,
// server.port, db.namespace — and returns got without those attributes
// on them, for comparisons written without them.
func untarget(t testing.TB, got map[string]instrument, pool, host, port, db string) map[string]instrument {
	t.Helper()
	want := []string{"db.client.connection.pool.name=" + pool, "db.namespace=" + db, "server.address=" + host, "server.port=" + port}
	out := map[string]instrument{}
	for name, in := range got {
		if !strings.HasPrefix(name, "holdfast.") || strings.HasPrefix(name, "holdfast.readiness.") || name == "holdfast.failover.events" {
			out[name] = in
			continue
		}
		n := instrument{unit: in.unit, points: map[string]float64{}}
		for k, v := range in.points {
			parts := strings.Split(k, ",")
			for _, w := range want {
				if !slices.Contains(parts, w) {
					t.Errorf("%s {%s} lacks %s", name, k, w)
				}
			}
			parts = slices.DeleteFunc(parts, func(p string) bool { return slices.Contains(want, p) })
			n.points[strings.Join(parts, ",")] += v
		}
		out[name] = n
	}
	return out
}
