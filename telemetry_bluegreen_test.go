package holdfast_test

import (
	"context"
	"errors"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/bluegreen"
	fake "github.com/holdfast-db/holdfast/fakes/bluegreentest"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/retry"
)

// A whole blue/green switchover (fake Aurora metadata on two local
// servers): the phase gauge, the switchover span with one event per phase,
// the held connect with its wait on its span and in the suspension
// histogram, and the phase and summary log lines through the factory's
// logger.
func TestTelemetrySwitchover(t *testing.T) {
	if testing.Short() {
		t.Skip("plays a blue/green switchover on real servers: skipped with -short")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	env, err := fake.Start(ctx, fake.Config{BlueHost: "127.0.0.14", GreenHost: "127.0.0.24"})
	if errors.Is(err, fake.ErrNotFound) && os.Getenv(pgtest.EnvRequire) != "1" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Close(); err != nil {
			t.Error(err)
		}
	})
	d, err := env.NewDeployment(ctx, fake.DeploymentConfig{Engine: fake.Aurora})
	if err != nil {
		t.Fatal(err)
	}
	setStatus := func(status string) {
		t.Helper()
		if err := d.SetStatus(ctx, status); err != nil {
			t.Fatal(err)
		}
	}
	setStatus(fake.StatusAvailable)

	rig := newRig(t)
	b, err := retry.NewBudget(retry.DefaultBudget())
	if err != nil {
		t.Fatal(err)
	}
	p := fastPolicy()
	f, err := holdfast.New(append(rig.options(),
		holdfast.WithBlueGreen(bluegreen.Config{
			BaselineInterval:  40 * time.Millisecond,
			IncreasedInterval: 20 * time.Millisecond,
			HighInterval:      10 * time.Millisecond,
			ConnectTimeout:    20 * time.Second,
			SwitchoverTimeout: 60 * time.Second,
		}),
		holdfast.WithRetryPolicy(p), holdfast.WithStartupPolicy(p), holdfast.WithRetryBudget(b))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	cfg, err := d.PoolConfig(d.Names.Cluster, "pool_max_conns=4")
	if err != nil {
		t.Fatal(err)
	}
	pool, err := f.NewPool(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	r := f.BlueGreen(pool)
	waitFor := func(what string, cond func(bluegreen.Status) bool) {
		t.Helper()
		for {
			ch := r.Changed()
			if cond(r.Status()) {
				return
			}
			select {
			case <-ch:
			case <-ctx.Done():
				t.Fatalf("timed out waiting for %s: %+v", what, r.Status())
			}
		}
	}
	phase := func(p bluegreen.Phase) func(bluegreen.Status) bool {
		return func(s bluegreen.Status) bool { return s.Phase == p }
	}
	waitFor("CREATED, mapped", func(s bluegreen.Status) bool {
		return s.Phase == bluegreen.Created && len(s.Mapping) > 0 && s.Mapping[0].GreenAddr != ""
	})
	setStatus(fake.StatusInitiated)
	waitFor("PREPARATION", phase(bluegreen.Preparation))
	setStatus(fake.StatusInProgress)
	waitFor("IN_PROGRESS", phase(bluegreen.InProgress))

	// A request opens a new connection during IN_PROGRESS: it is held.
	reqCtx, req := rig.tp.Tracer("app").Start(ctx, "GET /held")
	done := make(chan error, 1)
	go func() {
		idle := pool.AcquireAllIdle(reqCtx) // so that the Acquire must connect
		defer func() {
			for _, c := range idle {
				c.Release()
			}
		}()
		c, err := pool.Acquire(reqCtx)
		if err == nil {
			c.Release()
		}
		done <- err
	}()
	waitFor("a held connect", func(s bluegreen.Status) bool { return s.Waiting >= 1 })
	setStatus(fake.StatusPostProcessing)
	if err := <-done; err != nil {
		t.Fatalf("held connect: %v", err)
	}
	req.End()
	waitFor("POST", phase(bluegreen.Post))
	if err := d.Rename(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor("green topology changed", func(s bluegreen.Status) bool { return s.GreenTopologyChanged })
	d.SwapDNS()
	waitFor("blue DNS updated", func(s bluegreen.Status) bool { return s.BlueDNSUpdated })
	d.RemoveGreenDNS()
	waitFor("green DNS removed", func(s bluegreen.Status) bool { return s.GreenDNSRemoved })
	setStatus(fake.StatusCompleted)
	waitFor("the summary", func(s bluegreen.Status) bool { return s.LastSummary != nil })
	// The next generation starts at NOT_CREATED until a monitor of it
	// reads the metadata (the green monitor may first find green's names
	// gone): wait until its phase is known, as the gauge's is.
	waitFor("the next generation's phase", func(s bluegreen.Status) bool {
		return s.Phase == bluegreen.Completed || s.Phase == bluegreen.Created
	})

	// Log lines: the held connect's, and the router's own, name the pool.
	suspended := rig.logs.lines("holdfast: suspended by a blue/green switchover")
	if len(suspended) == 0 {
		t.Errorf("no suspended line:\n%s", rig.logs.String())
	}
	bgLines := 0
	for _, l := range strings.Split(rig.logs.String(), "\n") {
		if !strings.Contains(l, `"msg":"holdfast: suspended`) && !strings.Contains(l, `"msg":"bluegreen: `) {
			continue
		}
		bgLines++
		for _, want := range []string{`"server.address":"` + cfg.ConnConfig.Host + `"`, `"holdfast.pool":"` + cfgPoolName(cfg) + `"`, `"db.namespace":`} {
			if !strings.Contains(l, want) {
				t.Errorf("line lacks %s: %s", want, l)
			}
		}
		if strings.Contains(l, `"waited":`) {
			t.Errorf("a duration without its unit: %s", l)
		}
	}
	if bgLines < 5 {
		t.Errorf("%d blue/green lines, want the phases' and the held connect's:\n%s", bgLines, rig.logs.String())
	}

	// Metrics.
	// Each pool's switchover carries the pool's name and target, so that
	// pools to different clusters keep apart.
	got := untarget(t, rig.collect(t), cfgPoolName(cfg), cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port)), cfg.ConnConfig.Database)
	pn := ""
	// The gauge holds the last phase: COMPLETED, or CREATED once the
	// router has started watching for the next switchover (it does so
	// right after the summary; the exact sequence is on the span below).
	if in := got["holdfast.bluegreen.phase"]; in.unit != "{phase}" || len(in.points) != 1 ||
		(in.points[pn+"holdfast.bluegreen.id=1"] != 5 && in.points[pn+"holdfast.bluegreen.id=1"] != 1) {
		t.Errorf("holdfast.bluegreen.phase = %+v, want {phase} 5 (COMPLETED) or 1 (CREATED, next generation) for id 1", in)
	}
	susp := got["holdfast.bluegreen.suspended.duration"]
	held := pn + "holdfast.bluegreen.id=1,holdfast.bluegreen.suspend.point=connect,holdfast.outcome=resumed"
	if susp.unit != "s" || susp.points[held] < 1 {
		t.Errorf("holdfast.bluegreen.suspended.duration = %+v, want s and a resumed connect", susp)
	}
	for k := range susp.points {
		if strings.Contains(k, "outcome=failed") {
			t.Errorf("a suspension failed: %s", k)
		}
	}

	// The switchover span.
	sws := rig.ended("holdfast.bluegreen.switchover")
	if len(sws) != 1 {
		t.Fatalf("switchover spans = %d, want 1:\n%s", len(sws), allSpans(rig))
	}
	sw := sws[0]
	var phases []string
	for _, e := range sw.Events() {
		for _, kv := range e.Attributes {
			if kv.Key == "holdfast.bluegreen.phase" {
				phases = append(phases, kv.Value.AsString())
			}
		}
	}
	if want := []string{"PREPARATION", "IN_PROGRESS", "POST", "COMPLETED"}; !slices.Equal(phases, want) {
		t.Errorf("switchover phase events = %q, want %q", phases, want)
	}
	if got := attrKey(attribute.NewSet(sw.Attributes()...)); got != "db.client.connection.pool.name="+cfgPoolName(cfg)+",db.namespace="+cfg.ConnConfig.Database+
		",holdfast.bluegreen.id=1,holdfast.outcome=COMPLETED,server.address="+cfg.ConnConfig.Host+",server.port="+strconv.Itoa(int(cfg.ConnConfig.Port)) || sw.Status().Code != codes.Unset {
		t.Errorf("switchover span: %s, status %v", got, sw.Status())
	}

	// The held connect: a child of the request, with its wait and a link
	// to the switchover.
	var heldSpan sdktrace.ReadOnlySpan
	for _, s := range rig.ended("holdfast.connect") {
		if s.Parent().SpanID() == req.SpanContext().SpanID() {
			heldSpan = s
		}
	}
	if heldSpan == nil {
		t.Fatalf("no connect span under the request:\n%s", allSpans(rig))
	}
	attrs := attribute.NewSet(heldSpan.Attributes()...)
	reason, _ := attrs.Value("holdfast.bluegreen.suspended.reason")
	waited, _ := attrs.Value("holdfast.bluegreen.suspended.duration")
	if reason.AsString() != "IN_PROGRESS" || waited.AsFloat64() <= 0 {
		t.Errorf("held connect span: reason %q, waited %v; want IN_PROGRESS and > 0:\n%s", reason.AsString(), waited.AsFloat64(), spanText(heldSpan))
	}
	if links := heldSpan.Links(); len(links) != 1 || links[0].SpanContext.SpanID() != sw.SpanContext().SpanID() {
		t.Errorf("held connect span is not linked to the switchover span:\n%s", spanText(heldSpan))
	}

	// Logs: bluegreen writes phase changes and the summary to the
	// factory's logger.
	logs := rig.logs.String()
	for _, want := range []string{"IN_PROGRESS", "Blue/Green Deployment switchover COMPLETED"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q", want)
		}
	}
}

// cfgPoolName is the pool name telemetry gives a pool built from cfg.
func cfgPoolName(cfg *pgxpool.Config) string {
	return net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))) + "/" + cfg.ConnConfig.Database
}
