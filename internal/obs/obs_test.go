package obs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/internal/obs"
	"github.com/holdfast-db/holdfast/retry"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

type rig struct {
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	logs   *bytes.Buffer
	tel    *obs.Telemetry
}

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder(), logs: &bytes.Buffer{}}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	r.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans))
	t.Cleanup(func() {
		_ = mp.Shutdown(context.Background())
		_ = r.tp.Shutdown(context.Background())
	})
	tel, err := obs.New(obs.Config{MeterProvider: mp, TracerProvider: r.tp,
		Logger: slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	r.tel = tel
	return r
}

// point is one data point: attributes as sorted "k=v" text, and its value
// (a histogram's count and sum).
type point struct {
	attrs string
	value float64
	sum   float64
}

func (r *rig) collect(t *testing.T) map[string][]point {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string][]point{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != obs.ScopeName || sm.Scope.Version == "" || sm.Scope.Version != obs.Version {
			t.Errorf("scope = %q %q, want %q %q", sm.Scope.Name, sm.Scope.Version, obs.ScopeName, obs.Version)
		}
		for _, m := range sm.Metrics {
			key := m.Name + " " + m.Unit
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out[key] = append(out[key], point{attrs: text(p.Attributes), value: float64(p.Value)})
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					out[key] = append(out[key], point{attrs: text(p.Attributes), value: float64(p.Value)})
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out[key] = append(out[key], point{attrs: text(p.Attributes), value: float64(p.Count), sum: p.Sum})
				}
			default:
				t.Fatalf("%s: %T", m.Name, m.Data)
			}
		}
	}
	for _, ps := range out {
		sort.Slice(ps, func(i, j int) bool { return ps[i].attrs < ps[j].attrs })
	}
	return out
}

func text(s attribute.Set) string {
	var parts []string
	for _, kv := range s.ToSlice() {
		parts = append(parts, string(kv.Key)+"="+kv.Value.String())
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func equal(a, b []point) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// deprecatedNoop is trace.NewNoopTracerProvider, which applications still
// use and Active must recognise.
func deprecatedNoop() trace.TracerProvider {
	//lint:ignore SA1019 the deprecated provider must still be detected
	return trace.NewNoopTracerProvider()
}

func TestActive(t *testing.T) {
	t.Parallel()
	sdkMP := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	sdkTP := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = sdkMP.Shutdown(context.Background()); _ = sdkTP.Shutdown(context.Background()) })
	tests := []struct {
		name string
		cfg  obs.Config
		want bool
	}{
		{"no-op providers", obs.Config{MeterProvider: metricnoop.NewMeterProvider(), TracerProvider: tracenoop.NewTracerProvider()}, false},
		{"deprecated no-op tracer provider", obs.Config{MeterProvider: metricnoop.NewMeterProvider(), TracerProvider: deprecatedNoop()}, false},
		{"global providers, none set", obs.Config{}, false},
		{"SDK meter", obs.Config{MeterProvider: sdkMP, TracerProvider: tracenoop.NewTracerProvider()}, true},
		{"SDK tracer", obs.Config{MeterProvider: metricnoop.NewMeterProvider(), TracerProvider: sdkTP}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tel, err := obs.New(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got := tel.Active(context.Background()); got != tt.want {
				t.Errorf("Active = %v, want %v", got, tt.want)
			}
		})
	}
	var nilTel *obs.Telemetry
	if nilTel.Active(context.Background()) {
		t.Error("a nil Telemetry is active")
	}
}

func TestStageOf(t *testing.T) {
	t.Parallel()
	startup := obs.WithStage(context.Background(), obs.StageStartup)
	tests := []struct {
		name  string
		ctx   context.Context
		layer string
		want  string
	}{
		{"dial while serving", context.Background(), obs.LayerConnect, obs.StagePoolGrowth},
		{"token fetch while serving", context.Background(), obs.LayerPassword, obs.StagePoolGrowth},
		{"Factory.Acquire", context.Background(), obs.LayerAcquire, obs.StageRequest},
		{"Factory.Start", context.Background(), obs.LayerStartup, obs.StageStartup},
		{"dial for Factory.Start", startup, obs.LayerConnect, obs.StageStartup},
		{"token fetch for Factory.Start", startup, obs.LayerPassword, obs.StageStartup},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := obs.StageOf(tt.ctx, tt.layer); got != tt.want {
				t.Errorf("StageOf = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRedactor(t *testing.T) {
	t.Parallel()
	var r obs.Redactor
	r.Add("tok-SECRET-1234")
	r.Add("pw-SECRET-5678")
	r.Add("abc") // too short: ignored
	tests := []struct {
		name, in, want string
	}{
		{"registered token", "token tok-SECRET-1234 expired", "token [redacted] expired"},
		{"registered password twice", "pw-SECRET-5678/pw-SECRET-5678", "[redacted]/[redacted]"},
		{"short values are not secrets", "abc def", "abc def"},
		{"key=value password", "host=h password=hunter2 user=u", "host=h password=[redacted] user=u"},
		{"quoted key=value password", "password='a b\\' c' user=u", "password=[redacted] user=u"},
		{"sslpassword", "sslpassword=k3y", "sslpassword=[redacted]"},
		{"URL userinfo", "dial postgres://alice:s3cret@db:5432/x failed", "dial postgres://alice:[redacted]@db:5432/x failed"},
		{"URL without password", "postgres://alice@db/x", "postgres://alice@db/x"},
		{"nothing to redact", "dial tcp 127.0.0.1:5432: connect: connection refused", "dial tcp 127.0.0.1:5432: connect: connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := r.Redact(tt.in); got != tt.want {
				t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// TestRedactorForgetsTheOldest: of the fetched values, a Redactor keeps
// the most recent (16, and 16 more per pinned password); a pinned one, a
// pool's configured password, it never forgets, however many tokens a
// password function mints after it (issue 34: after 20 tokens the DSN's
// password was shown).
func TestRedactorForgetsTheOldest(t *testing.T) {
	t.Parallel()
	fetched := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("token-%04d-xyz", i)
		}
		return out
	}
	var r obs.Redactor
	secrets := fetched(17)
	for _, s := range secrets {
		r.Add(s)
	}
	if got := r.Redact(secrets[0]); got != secrets[0] {
		t.Errorf("the 1st of 17 fetched values is still redacted; a Redactor without pins keeps 16")
	}
	for _, s := range secrets[1:] {
		if got := r.Redact(s); got != obs.Redacted {
			t.Errorf("Redact(%q) = %q", s, got)
		}
	}

	var p obs.Redactor
	p.Pin("the-dsn-password")
	tokens := fetched(1000)
	for _, s := range tokens {
		p.Add(s)
	}
	if got := p.Redact("auth failed for the-dsn-password"); got != "auth failed for "+obs.Redacted {
		t.Errorf("the pinned password after 1,000 tokens: %q", got)
	}
	for _, s := range tokens[1000-32:] {
		if got := p.Redact(s); got != obs.Redacted {
			t.Errorf("one of the last 32 tokens (one pool: 16+16 kept) shows: %q", got)
		}
	}
	if got := p.Redact(tokens[1000-33]); got != tokens[1000-33] {
		t.Errorf("the 33rd last token is still kept; want 32 with one pinned password")
	}
}

func TestLoopEnd(t *testing.T) {
	t.Parallel()
	refused := classify.Verdict{Class: classify.Transient, Reason: "conn-refused"}
	base := "error.type=conn-refused,holdfast.layer=connect,holdfast.stage=pool-growth"
	tests := []struct {
		name    string
		retried int // events fed to Observe before End
		err     error
		want    map[string][]point
		gaveUp  bool
	}{
		{"success after two failures", 2, nil,
			map[string][]point{"holdfast.recoveries {operation}": {{attrs: base, value: 1}}}, false},
		{"first try success counts no recovery", 0, nil, map[string][]point{}, false},
		{"exhausted", 2, &retry.Error{Attempts: 3, Verdict: refused, Stop: retry.StopExhausted, Last: errors.New("x")},
			map[string][]point{"holdfast.retry.exhausted {operation}": {{attrs: "error.type=conn-refused,holdfast.layer=connect,holdfast.retry.stop=attempts,holdfast.stage=pool-growth", value: 1}}}, true},
		{"deadline", 1, &retry.Error{Attempts: 2, Verdict: refused, Stop: retry.StopDeadline, Last: errors.New("x")},
			map[string][]point{"holdfast.retry.exhausted {operation}": {{attrs: "error.type=conn-refused,holdfast.layer=connect,holdfast.retry.stop=deadline,holdfast.stage=pool-growth", value: 1}}}, true},
		{"budget", 0, &retry.Error{Attempts: 1, Verdict: refused, Stop: retry.StopBudget, Last: errors.New("x")},
			map[string][]point{"holdfast.retry.budget.rejections {retry}": {{attrs: base, value: 1}}}, true},
		{"fatal", 0, &retry.Error{Attempts: 1, Verdict: classify.Verdict{Reason: "permission-denied"}, Stop: retry.StopFatal, Last: errors.New("x")},
			map[string][]point{}, false},
		{"canceled", 1, &retry.Error{Attempts: 2, Verdict: refused, Stop: retry.StopContext, Last: errors.New("x")},
			map[string][]point{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newRig(t)
			ctx, loop := r.tel.Begin(context.Background(), obs.LayerConnect)
			for i := 1; i <= tt.retried; i++ {
				loop.Observe(retry.Event{Attempt: i, Verdict: refused})
			}
			loop.End(ctx, tt.err)
			got := r.collect(t)
			if len(got) != len(tt.want) {
				t.Errorf("metrics = %v, want %v", got, tt.want)
			}
			for k, want := range tt.want {
				if !equal(got[k], want) {
					t.Errorf("%s = %v, want %v", k, got[k], want)
				}
			}
			if gave := strings.Contains(r.logs.String(), obs.MsgGaveUp); gave != tt.gaveUp {
				t.Errorf("gave-up line written = %v, want %v:\n%s", gave, tt.gaveUp, r.logs.String())
			}
		})
	}
}

func TestBlueGreen(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	bg := r.tel.BlueGreen("bgd-1", "")
	ctx := context.Background()
	bg.Phase(ctx, 1, "CREATED", false)
	if n := len(r.spans.Started()); n != 0 {
		t.Fatalf("%d spans started before the switchover", n)
	}
	bg.Phase(ctx, 2, "PREPARATION", true)
	bg.Phase(ctx, 3, "IN_PROGRESS", true)

	reqCtx, req := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans)).Tracer("app").Start(ctx, "GET /widget")
	bg.Suspended(reqCtx, "query", "IN_PROGRESS", 250*time.Millisecond, nil)
	req.End()
	failCtx, failed := r.tp.Tracer("app").Start(ctx, "GET /other")
	bg.Suspended(failCtx, "acquire", "IN_PROGRESS", 2*time.Second, context.DeadlineExceeded)
	failed.End()

	bg.Phase(ctx, 4, "POST", true)
	bg.Phase(ctx, 5, "COMPLETED", true)
	bg.Finished(ctx, "COMPLETED")

	got := r.collect(t)
	if want := []point{{attrs: "holdfast.bluegreen.id=bgd-1", value: 5}}; !equal(got["holdfast.bluegreen.phase {phase}"], want) {
		t.Errorf("phase gauge = %v, want %v", got["holdfast.bluegreen.phase {phase}"], want)
	}
	wantSusp := []point{
		{attrs: "holdfast.bluegreen.id=bgd-1,holdfast.bluegreen.suspend.point=acquire,holdfast.outcome=failed", value: 1, sum: 2},
		{attrs: "holdfast.bluegreen.id=bgd-1,holdfast.bluegreen.suspend.point=query,holdfast.outcome=resumed", value: 1, sum: 0.25},
	}
	if !equal(got["holdfast.bluegreen.suspended.duration s"], wantSusp) {
		t.Errorf("suspended = %v, want %v", got["holdfast.bluegreen.suspended.duration s"], wantSusp)
	}

	var sw, widget, other sdktrace.ReadOnlySpan
	for _, s := range r.spans.Ended() {
		switch s.Name() {
		case obs.SpanSwitchover:
			sw = s
		case "GET /widget":
			widget = s
		case "GET /other":
			other = s
		}
	}
	if sw == nil || widget == nil || other == nil {
		t.Fatalf("spans missing: %v", r.spans.Ended())
	}
	var phases []string
	for _, e := range sw.Events() {
		for _, kv := range e.Attributes {
			if kv.Key == obs.KeyBlueGreenPhase {
				phases = append(phases, kv.Value.AsString())
			}
		}
	}
	if got, want := strings.Join(phases, " "), "PREPARATION IN_PROGRESS POST COMPLETED"; got != want {
		t.Errorf("switchover events = %q, want %q", got, want)
	}
	if text(attribute.NewSet(sw.Attributes()...)) != "holdfast.bluegreen.id=bgd-1,holdfast.outcome=COMPLETED" || sw.Status().Code != codes.Unset {
		t.Errorf("switchover span: attrs %v status %v", sw.Attributes(), sw.Status())
	}
	if got, want := text(attribute.NewSet(widget.Attributes()...)),
		"holdfast.bluegreen.id=bgd-1,holdfast.bluegreen.suspend.point=query,holdfast.bluegreen.suspended.duration=0.25,holdfast.bluegreen.suspended.reason=IN_PROGRESS"; got != want {
		t.Errorf("request span attributes:\n got %s\nwant %s", got, want)
	}
	if len(widget.Links()) != 1 || widget.Links()[0].SpanContext.SpanID() != sw.SpanContext().SpanID() {
		t.Errorf("the suspended request is not linked to the switchover span")
	}
	if !strings.Contains(text(attribute.NewSet(other.Attributes()...)), "error.type=timeout") {
		t.Errorf("failed suspension attributes = %v, want error.type=timeout", other.Attributes())
	}
	if !strings.Contains(r.logs.String(), "level=DEBUG") || !strings.Contains(r.logs.String(), "waited_s=0.25") {
		t.Errorf("no DEBUG line for the suspension:\n%s", r.logs.String())
	}

	// A rollback ends the span with an error status.
	bg.Phase(ctx, 2, "PREPARATION", true)
	bg.Finished(ctx, "ROLLED BACK")
	ended := r.spans.Ended()
	if last := ended[len(ended)-1]; last.Name() != obs.SpanSwitchover || last.Status().Code != codes.Error {
		t.Errorf("rolled back switchover span: %s %v", last.Name(), last.Status())
	}
}

func TestReadiness(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	rd := r.tel.Readiness()
	ctx := context.Background()
	rd.Changed(ctx, false, "fail", "starting")
	rd.Changed(ctx, true, "pass", "")
	rd.Changed(ctx, false, "fail", "draining")
	rd.Drained(ctx, 1500*time.Millisecond, "drained")

	got := r.collect(t)
	want := map[string][]point{
		"holdfast.readiness.ready 1": {{attrs: "", value: 0}},
		"holdfast.readiness.transitions {transition}": {
			{attrs: "holdfast.readiness.health=fail,holdfast.readiness.reason=draining", value: 1},
			{attrs: "holdfast.readiness.health=fail,holdfast.readiness.reason=starting", value: 1},
			{attrs: "holdfast.readiness.health=pass,holdfast.readiness.reason=", value: 1},
		},
		"holdfast.readiness.drain.duration s": {{attrs: "holdfast.outcome=drained", value: 1, sum: 1.5}},
	}
	if len(got) != len(want) {
		t.Errorf("metrics = %v", got)
	}
	for k, w := range want {
		if !equal(got[k], w) {
			t.Errorf("%s = %v, want %v", k, got[k], w)
		}
	}
}

// Every recorder accepts nil, so that packages can call them
// unconditionally.
func TestNilIsSafe(t *testing.T) {
	t.Parallel()
	var tel *obs.Telemetry
	ctx := context.Background()
	tel.Retried(ctx, obs.LayerConnect, retry.Event{Attempt: 1, Err: errors.New("x")})
	tel.FirstTry(ctx, obs.LayerConnect)
	ctx2, loop := tel.Begin(ctx, obs.LayerAcquire)
	loop.Observe(retry.Event{})
	loop.End(ctx2, errors.New("x"))
	_, done := tel.BeginStartup(ctx)
	done(nil)
	tel.Secret("whatever-secret")
	if got := tel.Redact("password=x"); got != "password=[redacted]" {
		t.Errorf("nil Redact = %q", got)
	}
	if tel.Pool(ctx, nil, "") != nil || tel.BlueGreen("x", "") != nil || tel.Readiness() != nil {
		t.Error("a nil Telemetry returned a recorder")
	}
	var bg *obs.BlueGreen
	bg.Phase(ctx, 3, "IN_PROGRESS", true)
	bg.Suspended(ctx, "query", "IN_PROGRESS", time.Second, nil)
	bg.Finished(ctx, "COMPLETED")
	var rd *obs.Readiness
	rd.Changed(ctx, true, "pass", "")
	rd.Drained(ctx, time.Second, "drained")
	var p *obs.Pool
	p.Watch(nil)
	if tel.Logger() == nil {
		t.Error("nil Logger")
	}
}
