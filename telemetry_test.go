package holdfast_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/fakes"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/retry"
)

// configuredHost is the host name the telemetry tests configure: pgx
// resolves it, through a LookupFunc, to 127.0.0.1 (as blue/green IP
// substitution does), so server.address must show the name and
// network.peer.address the IP.
const configuredHost = "db.internal.example"

// otelPoolConfig returns a config for the test server under
// configuredHost, with MaxConns 4, and the server's real address and port.
func otelPoolConfig(t *testing.T, dsn string, extra ...string) (*pgxpool.Config, string, string) {
	t.Helper()
	cfg, addr := poolConfig(t, dsn, append([]string{"sslmode=disable"}, extra...)...)
	port := strconv.Itoa(int(cfg.ConnConfig.Port))
	cfg.ConnConfig.Host = configuredHost
	cfg.ConnConfig.LookupFunc = func(context.Context, string) ([]string, error) { return []string{"127.0.0.1"}, nil }
	cfg.MaxConns = 4
	return cfg, addr, port
}

// Four scenarios (a reset then a success, a permission failure, an
// exhausted retry, a budget rejection), through Factory.Acquire (connections
// made while serving: stage pool-growth), with exact instruments, units,
// attributes and values; the connect span with one event per attempt; the
// log lines.
func TestTelemetryScenarios(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)

	type want struct {
		err        bool
		metrics    map[string]instrument // besides the connection gauges
		connSpan   string                // status and attributes of the holdfast.connect span
		connEvents []string
		retried    int // WARN lines "retrying"
		gaveUp     int // WARN lines "giving up"
	}
	tests := []struct {
		name   string
		steps  []fakes.Step
		budget *retry.BudgetConfig
		want   func(pool, port string) want
	}{
		{
			name:  "reset then success",
			steps: []fakes.Step{fakes.Fail(resetErr()), fakes.Connect()},
			want: func(pool, port string) want {
				poolAttr := "db.client.connection.pool.name=" + pool
				growth := "error.type=conn-reset,holdfast.layer=connect,holdfast.stage=pool-growth"
				return want{
					metrics: map[string]instrument{
						"holdfast.connect.attempts":        {"{attempt}", map[string]float64{"holdfast.outcome=success,holdfast.stage=pool-growth": 1}},
						"holdfast.retries":                 {"{retry}", map[string]float64{growth: 1}},
						"holdfast.recoveries":              {"{operation}", map[string]float64{growth: 1}},
						"db.client.connection.create_time": {"s", map[string]float64{poolAttr: 1}},
						"db.client.connection.wait_time":   {"s", map[string]float64{poolAttr: 1}},
						"db.client.connection.use_time":    {"s", map[string]float64{poolAttr: 1}},
						"db.client.operation.duration": {"s", map[string]float64{
							"db.namespace=postgres,db.system.name=postgresql,server.address=" + configuredHost + ",server.port=" + port: 1}},
						"db.client.connection.count": {"{connection}", map[string]float64{
							poolAttr + ",db.client.connection.state=idle": 1, poolAttr + ",db.client.connection.state=used": 0}},
						"db.client.connection.max":              {"{connection}", map[string]float64{poolAttr: 4}},
						"db.client.connection.pending_requests": {"{request}", map[string]float64{poolAttr: 0}},
					},
					connSpan: "status=Unset/ attrs " + poolAttr + ",db.namespace=postgres,db.system.name=postgresql," +
						"holdfast.outcome=success,holdfast.stage=pool-growth,network.peer.address=127.0.0.1,network.peer.port=" + port +
						",server.address=" + configuredHost + ",server.port=" + port,
					connEvents: []string{
						"holdfast.attempt delay>0=true,error.type=conn-reset,holdfast.attempt=1,holdfast.error.class=transient,holdfast.layer=connect,holdfast.outcome=failure",
						"holdfast.attempt holdfast.attempt=2,holdfast.layer=connect,holdfast.outcome=success",
					},
					retried: 1,
				}
			},
		},
		{
			name:  "permission failure",
			steps: []fakes.Step{fakes.Fail(deniedErr()).Forever()},
			want: func(pool, port string) want {
				poolAttr := "db.client.connection.pool.name=" + pool
				return want{
					err: true,
					metrics: map[string]instrument{
						"holdfast.connect.attempts": {"{attempt}", map[string]float64{
							"error.type=sqlstate-42501,holdfast.error.class=fatal,holdfast.outcome=failure,holdfast.stage=pool-growth": 1}},
						"db.client.connection.create_time": {"s", map[string]float64{poolAttr + ",error.type=sqlstate-42501": 1}},
						"db.client.connection.count": {"{connection}", map[string]float64{
							poolAttr + ",db.client.connection.state=idle": 0, poolAttr + ",db.client.connection.state=used": 0}},
						"db.client.connection.max":              {"{connection}", map[string]float64{poolAttr: 4}},
						"db.client.connection.pending_requests": {"{request}", map[string]float64{poolAttr: 0}},
					},
					connSpan: "status=Error/fatal/sqlstate-42501 attrs " + poolAttr + ",db.namespace=postgres,db.system.name=postgresql," +
						"error.type=sqlstate-42501,holdfast.error.class=fatal,holdfast.outcome=failure,holdfast.stage=pool-growth," +
						"server.address=" + configuredHost + ",server.port=" + port,
					connEvents: []string{
						"holdfast.attempt error.type=sqlstate-42501,holdfast.attempt=1,holdfast.error.class=fatal,holdfast.layer=connect,holdfast.outcome=failure",
					},
				}
			},
		},
		{
			name:  "exhausted retry",
			steps: []fakes.Step{fakes.Refused().Forever()},
			want: func(pool, port string) want {
				poolAttr := "db.client.connection.pool.name=" + pool
				refused := "error.type=conn-refused,holdfast.layer=connect,holdfast.stage=pool-growth"
				return want{
					err: true,
					metrics: map[string]instrument{
						"holdfast.connect.attempts": {"{attempt}", map[string]float64{
							"error.type=conn-refused,holdfast.error.class=transient,holdfast.outcome=failure,holdfast.stage=pool-growth": 1}},
						"holdfast.retries":                 {"{retry}", map[string]float64{refused: 2}},
						"holdfast.retry.exhausted":         {"{operation}", map[string]float64{refused + ",holdfast.retry.stop=attempts": 1}},
						"db.client.connection.create_time": {"s", map[string]float64{poolAttr + ",error.type=conn-refused": 1}},
						"db.client.connection.count": {"{connection}", map[string]float64{
							poolAttr + ",db.client.connection.state=idle": 0, poolAttr + ",db.client.connection.state=used": 0}},
						"db.client.connection.max":              {"{connection}", map[string]float64{poolAttr: 4}},
						"db.client.connection.pending_requests": {"{request}", map[string]float64{poolAttr: 0}},
					},
					connSpan: "status=Error/transient/conn-refused attrs " + poolAttr + ",db.namespace=postgres,db.system.name=postgresql," +
						"error.type=conn-refused,holdfast.error.class=transient,holdfast.outcome=failure,holdfast.stage=pool-growth," +
						"server.address=" + configuredHost + ",server.port=" + port,
					connEvents: []string{
						"holdfast.attempt delay>0=true,error.type=conn-refused,holdfast.attempt=1,holdfast.error.class=transient,holdfast.layer=connect,holdfast.outcome=failure",
						"holdfast.attempt delay>0=true,error.type=conn-refused,holdfast.attempt=2,holdfast.error.class=transient,holdfast.layer=connect,holdfast.outcome=failure",
						"holdfast.attempt error.type=conn-refused,holdfast.attempt=3,holdfast.error.class=transient,holdfast.layer=connect,holdfast.outcome=failure",
					},
					retried: 1, // the second retry of the same reason within a second is sampled away
					gaveUp:  1,
				}
			},
		},
		{
			name:   "budget rejection",
			steps:  []fakes.Step{fakes.Refused().Forever()},
			budget: &retry.BudgetConfig{Capacity: 1, RetryCost: 1}, // one retry, then none
			want: func(pool, port string) want {
				poolAttr := "db.client.connection.pool.name=" + pool
				refused := "error.type=conn-refused,holdfast.layer=connect,holdfast.stage=pool-growth"
				return want{
					err: true,
					metrics: map[string]instrument{
						"holdfast.connect.attempts": {"{attempt}", map[string]float64{
							"error.type=conn-refused,holdfast.error.class=transient,holdfast.outcome=failure,holdfast.stage=pool-growth": 1}},
						"holdfast.retries":                 {"{retry}", map[string]float64{refused: 1}},
						"holdfast.retry.budget.rejections": {"{retry}", map[string]float64{refused: 1}},
						"db.client.connection.create_time": {"s", map[string]float64{poolAttr + ",error.type=conn-refused": 1}},
						"db.client.connection.count": {"{connection}", map[string]float64{
							poolAttr + ",db.client.connection.state=idle": 0, poolAttr + ",db.client.connection.state=used": 0}},
						"db.client.connection.max":              {"{connection}", map[string]float64{poolAttr: 4}},
						"db.client.connection.pending_requests": {"{request}", map[string]float64{poolAttr: 0}},
					},
					connSpan: "status=Error/transient/conn-refused attrs " + poolAttr + ",db.namespace=postgres,db.system.name=postgresql," +
						"error.type=conn-refused,holdfast.error.class=transient,holdfast.outcome=failure,holdfast.stage=pool-growth," +
						"server.address=" + configuredHost + ",server.port=" + port,
					connEvents: []string{
						"holdfast.attempt delay>0=true,error.type=conn-refused,holdfast.attempt=1,holdfast.error.class=transient,holdfast.layer=connect,holdfast.outcome=failure",
						"holdfast.attempt error.type=conn-refused,holdfast.attempt=2,holdfast.error.class=transient,holdfast.layer=connect,holdfast.outcome=failure",
					},
					retried: 1,
					gaveUp:  1,
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rig := newRig(t)
			cfg, addr, port := otelPoolConfig(t, dsn)
			cfg.ConnConfig.DialFunc = fakes.NewConnector(addr, tt.steps...).Dial
			opts := rig.options()
			if tt.budget != nil {
				b, err := retry.NewBudget(*tt.budget)
				if err != nil {
					t.Fatal(err)
				}
				opts = append(opts, holdfast.WithRetryBudget(b))
			}
			f := newFactory(t, opts...)
			pool := newPool(t, f, cfg)
			w := tt.want(configuredHost+":"+port+"/postgres", port)

			c, err := f.Acquire(context.Background(), pool)
			if (err != nil) != w.err {
				t.Fatalf("Acquire error = %v, want error: %v", err, w.err)
			}
			if err == nil {
				var one int
				if err := c.QueryRow(context.Background(), "SELECT 1").Scan(&one); err != nil {
					t.Fatal(err)
				}
				c.Release()
			}

			got := untarget(t, rig.collect(t), configuredHost+":"+port+"/postgres", configuredHost, port, "postgres")
			// The pool's outage state, up from Configure on (it never connected: no outage is watched).
			w.metrics["holdfast.database.down"] = instrument{"{down}", map[string]float64{"": 0}}
			w.metrics = normalize(w.metrics)
			if !maps.EqualFunc(got, w.metrics, func(a, b instrument) bool { return a.unit == b.unit && maps.Equal(a.points, b.points) }) {
				t.Errorf("metrics:\n%s\nwant:\n%s", dump(got), dump(w.metrics))
			}

			spans := rig.ended("holdfast.connect")
			if len(spans) != 1 {
				t.Fatalf("holdfast.connect spans = %d, want 1; all spans:\n%s", len(spans), allSpans(rig))
			}
			s := spans[0]
			if s.SpanKind() != trace.SpanKindClient {
				t.Errorf("kind = %v, want client", s.SpanKind())
			}
			head := strings.SplitN(spanText(s), "\n", 3)
			if gotHead := strings.TrimPrefix(head[0], "holdfast.connect kind=client ") + " " + strings.TrimSpace(head[1]); gotHead != w.connSpan {
				t.Errorf("connect span:\n got %s\nwant %s", gotHead, w.connSpan)
			}
			if got := events(t, s); !slices.Equal(got, w.connEvents) {
				t.Errorf("connect span events:\n got %q\nwant %q", got, w.connEvents)
			}
			if n := len(rig.ended("holdfast.acquire")); n != 0 {
				t.Errorf("holdfast.acquire spans = %d, want 0: the request-scope layer did not retry", n)
			}

			retried, gaveUp := rig.logs.lines("holdfast: retrying after a transient failure"), rig.logs.lines("holdfast: giving up after transient failures")
			if len(retried) != w.retried || len(gaveUp) != w.gaveUp {
				t.Errorf("log lines: %d retrying (want %d), %d giving up (want %d):\n%s", len(retried), w.retried, len(gaveUp), w.gaveUp, rig.logs.String())
			}
			for i, l := range retried {
				for _, want := range []string{`"level":"WARN"`, `"holdfast.layer":"connect"`, `"attempt":` + strconv.Itoa(i+1), `"holdfast.stage":"pool-growth"`, `"error.class":"transient"`, `"delay_s":`} {
					if !strings.Contains(l, want) {
						t.Errorf("log line %q lacks %s", l, want)
					}
				}
			}
		})
	}
}

// A pool's first connection, made by NewPool, is the startup stage: the
// connect span is a child of the holdfast.startup span, and every
// attribute says startup.
func TestTelemetryStartupStage(t *testing.T) {
	t.Parallel()
	rig := newRig(t)
	cfg, addr, _ := otelPoolConfig(t, pgtest.DSN(t))
	cfg.ConnConfig.DialFunc = fakes.NewConnector(addr, fakes.Fail(resetErr()), fakes.Connect()).Dial
	pool, err := newFactory(t, rig.options()...).NewPool(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	got := untarget(t, rig.collect(t), cfgPoolName(cfg), cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port)), "postgres")
	startup := "error.type=conn-reset,holdfast.layer=connect,holdfast.stage=startup"
	for name, want := range map[string]map[string]float64{
		"holdfast.connect.attempts": {"holdfast.outcome=success,holdfast.stage=startup": 1},
		"holdfast.retries":          {startup: 1},
		"holdfast.recoveries":       {startup: 1},
	} {
		if !maps.Equal(got[name].points, want) {
			t.Errorf("%s = %v, want %v", name, got[name].points, want)
		}
	}
	starts, connects := rig.ended("holdfast.startup"), rig.ended("holdfast.connect")
	if len(starts) != 1 || len(connects) != 1 {
		t.Fatalf("spans:\n%s", allSpans(rig))
	}
	if connects[0].Parent().SpanID() != starts[0].SpanContext().SpanID() {
		t.Errorf("the connect span is not a child of the startup span")
	}
	if got, want := events(t, starts[0]), []string{"holdfast.attempt holdfast.attempt=1,holdfast.layer=startup,holdfast.outcome=success"}; !slices.Equal(got, want) {
		t.Errorf("startup events = %q, want %q", got, want)
	}
	if !strings.Contains(spanText(connects[0]), "holdfast.stage=startup") {
		t.Errorf("connect span lacks holdfast.stage=startup:\n%s", spanText(connects[0]))
	}
	if l := rig.logs.lines("holdfast: retrying after a transient failure"); len(l) != 1 || !strings.Contains(l[0], `"holdfast.stage":"startup"`) {
		t.Errorf("retry log lines = %q, want one with holdfast.stage startup", l)
	}
}

// A server error of the startup handshake (53300) is retried inside the
// connect, whatever path asked for the connection: layer connect, stage
// pool-growth. The recovery is counted, the connection's holdfast.connect
// span has one event per attempt, and Factory.Acquire has nothing left to
// retry (no holdfast.acquire span).
func TestTelemetryHandshakeRetry(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	admin := refusedRole(t, dsn, "obs_limited_role")

	rig := newRig(t)
	cfg, addr, _ := otelPoolConfig(t, dsn, "user=obs_limited_role")
	cfg.ConnConfig.DialFunc = fakes.NewConnector(addr).Dial
	raised := false
	// The database recovers while the loop backs off: the first log line
	// (the retry) raises the limit. Only the loop's goroutine logs.
	opts := append(rig.options(), holdfast.WithLogger(slog.New(hookHandler{fn: func(slog.Record) {
		if !raised {
			raised = true
			mustExec(t, admin, "ALTER ROLE obs_limited_role CONNECTION LIMIT -1")
		}
	}})))
	f := newFactory(t, opts...)
	pool := newPool(t, f, cfg)
	var one int
	if err := pool.QueryRow(context.Background(), "SELECT 1").Scan(&one); err != nil {
		t.Fatalf("QueryRow = %v", err)
	}

	got := untarget(t, rig.collect(t), cfgPoolName(cfg), cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port)), "postgres")
	connect := "error.type=sqlstate-53300,holdfast.layer=connect,holdfast.stage=pool-growth"
	for name, want := range map[string]map[string]float64{
		"holdfast.retries":          {connect: 1},
		"holdfast.recoveries":       {connect: 1},
		"holdfast.connect.attempts": {"holdfast.outcome=success,holdfast.stage=pool-growth": 1},
	} {
		if !maps.Equal(got[name].points, want) {
			t.Errorf("%s = %v, want %v", name, got[name].points, want)
		}
	}
	if acq := rig.ended("holdfast.acquire"); len(acq) != 0 {
		t.Errorf("a holdfast.acquire span for a connect that recovered by itself:\n%s", allSpans(rig))
	}
	connects := rig.ended("holdfast.connect")
	if len(connects) != 1 || connects[0].Status().Code != codes.Unset {
		t.Fatalf("spans:\n%s", allSpans(rig))
	}
	want := []string{
		"holdfast.attempt holdfast.attempt=1,holdfast.layer=connect,holdfast.outcome=success",
		"holdfast.attempt delay>0=true,error.type=sqlstate-53300,holdfast.attempt=1,holdfast.error.class=transient,holdfast.layer=connect,holdfast.outcome=failure",
		"holdfast.attempt holdfast.attempt=2,holdfast.layer=connect,holdfast.outcome=success",
	}
	if got := events(t, connects[0]); !slices.Equal(got, want) {
		t.Errorf("connect events = %q, want %q", got, want)
	}
}

func allSpans(rig *otelRig) string {
	var b strings.Builder
	for _, s := range rig.spans.Ended() {
		b.WriteString(spanText(s))
	}
	return b.String()
}

// normalize sorts the attributes of every key of m, as collect does.
func normalize(m map[string]instrument) map[string]instrument {
	out := map[string]instrument{}
	for name, in := range m {
		n := instrument{unit: in.unit, points: map[string]float64{}}
		for k, v := range in.points {
			parts := strings.Split(k, ",")
			slices.Sort(parts)
			n.points[strings.Join(parts, ",")] = v
		}
		out[name] = n
	}
	return out
}

func dump(m map[string]instrument) string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&b, "  %s %s\n", name, m[name].unit)
		for _, k := range slices.Sorted(maps.Keys(m[name].points)) {
			fmt.Fprintf(&b, "    {%s} %v\n", k, m[name].points[k])
		}
	}
	return b.String()
}
