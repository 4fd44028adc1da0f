package lb

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// MeterName is the instrumentation scope of the metrics of [Controller]
// and [Monitor] (ControllerConfig.MeterProvider, MonitorConfig.MeterProvider).
//
// The metrics, by OpenTelemetry name (and the Prometheus name the
// otel/exporters/prometheus exporter gives them):
//
//	| OTel name                  | Prometheus                           | Type             | Attributes              |
//	|----------------------------|--------------------------------------|------------------|-------------------------|
//	| holdfast.lb.members        | holdfast_lb_members                  | gauge            | group, phase            |
//	| holdfast.lb.requests       | holdfast_lb_requests_total           | counter          | group, action, result   |
//	| holdfast.lb.drain.duration | holdfast_lb_drain_duration_seconds   | histogram (s)    | group, result           |
//	| holdfast.lb.drain.timeouts | holdfast_lb_drain_timeouts_total     | counter          | group                   |
//	| holdfast.lb.lock.wait      | holdfast_lb_lock_wait_seconds        | histogram (s)    | group, result           |
//	| holdfast.lb.api.errors     | holdfast_lb_api_errors_total         | counter          | vendor, op, kind        |
//
// members counts the members of each group by [Phase] (lower case:
// enabled, disabling, disabled, unknown) as last read by a status read or
// left by a request; every phase is reported, 0 included. A drain's
// duration runs from the request's start to its result (result drained,
// not-drained, failed or canceled). A lock wait runs from the first
// attempt to take the group's lock to getting it (result acquired) or
// giving up (refused, failed); a request that does not wait records its
// single attempt. api.errors counts every failed balancer call, retried
// ones included, by vendor, operation (login, state, connections,
// set-state, ...) and [Kind]. Attribute values are configuration names
// and fixed words: no secret, no operator name.
const MeterName = "github.com/holdfast-db/holdfast/lb"

// Metrics records the metrics of the [Controller]s and [Monitor]s it is
// given (ControllerConfig.Metrics, MonitorConfig.Metrics). Create one per
// MeterProvider with [NewMetrics] and share it: a console builds a
// Controller per request, and they all record into one set of
// instruments. A nil *Metrics records nothing. It is safe for concurrent
// use.
type Metrics struct {
	requests      metric.Int64Counter
	drainDuration metric.Float64Histogram
	drainTimeouts metric.Int64Counter
	lockWait      metric.Float64Histogram
	apiErrors     metric.Int64Counter
	members       metric.Int64ObservableGauge

	mu     sync.Mutex
	phases map[string]map[string]Phase // group → member → phase
}

var allPhases = []Phase{PhaseEnabled, PhaseDisabling, PhaseDisabled, PhaseUnknown}

// NewMetrics creates the instruments (see [MeterName]) on mp's meter
// [MeterName]. A nil mp is a [*ConfigError].
func NewMetrics(mp metric.MeterProvider) (*Metrics, error) {
	if mp == nil {
		return nil, &ConfigError{Pkg: "lb", Field: "NewMetrics", Why: "the MeterProvider must not be nil"}
	}
	mt := mp.Meter(MeterName)
	m := &Metrics{phases: map[string]map[string]Phase{}}
	var err error
	wrap := func(e error) {
		if err == nil && e != nil {
			err = &ConfigError{Pkg: "lb", Field: "MeterProvider", Why: "cannot create an instrument", Err: e}
		}
	}
	var e error
	m.requests, e = mt.Int64Counter("holdfast.lb.requests", metric.WithUnit("{request}"),
		metric.WithDescription("Control requests, by group, action and result."))
	wrap(e)
	m.drainDuration, e = mt.Float64Histogram("holdfast.lb.drain.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from a drain request's start to its result."),
		metric.WithExplicitBucketBoundaries(0.1, 0.5, 1, 2, 5, 10, 20, 30, 60, 90, 120, 180, 300, 600))
	wrap(e)
	m.drainTimeouts, e = mt.Int64Counter("holdfast.lb.drain.timeouts", metric.WithUnit("{timeout}"),
		metric.WithDescription("Drains that ended with connections left at the bound: deploys aborted."))
	wrap(e)
	m.lockWait, e = mt.Float64Histogram("holdfast.lb.lock.wait", metric.WithUnit("s"),
		metric.WithDescription("Time spent taking a group's lock, by result (acquired, refused, failed)."),
		metric.WithExplicitBucketBoundaries(0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 120, 300, 600, 1800))
	wrap(e)
	m.apiErrors, e = mt.Int64Counter("holdfast.lb.api.errors", metric.WithUnit("{error}"),
		metric.WithDescription("Failed load-balancer API calls, by vendor, operation and kind."))
	wrap(e)
	members, e := mt.Int64ObservableGauge("holdfast.lb.members", metric.WithUnit("{member}"),
		metric.WithDescription("Members of each group by phase (enabled, disabling, disabled, unknown), as last read."))
	wrap(e)
	if err != nil {
		return nil, err
	}
	if _, e := mt.RegisterCallback(m.observe, members); e != nil {
		return nil, &ConfigError{Pkg: "lb", Field: "MeterProvider", Why: "cannot register the members callback", Err: e}
	}
	m.members = members
	return m, nil
}

func (m *Metrics) observe(_ context.Context, o metric.Observer) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, g := range slices.Sorted(maps.Keys(m.phases)) {
		counts := map[Phase]int64{}
		for _, p := range m.phases[g] {
			counts[p]++
		}
		for _, p := range allPhases {
			o.ObserveInt64(m.members, counts[p], metric.WithAttributes(attribute.String("group", g), attribute.String("phase", strings.ToLower(string(p)))))
		}
	}
	return nil
}

// observePhases records the members' phases.
func (m *Metrics) observePhases(group string, ms []MemberStatus) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.phases[group]
	if g == nil {
		g = map[string]Phase{}
		m.phases[group] = g
	}
	for _, s := range ms {
		g[s.Target.String()] = s.Phase
	}
}

// knowGroups makes every configured member count, as unknown until read.
func (m *Metrics) knowGroups(groups map[string][]Target) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, ts := range groups {
		g := m.phases[name]
		if g == nil {
			g = map[string]Phase{}
			m.phases[name] = g
		}
		for _, t := range ts {
			if _, ok := g[t.String()]; !ok {
				g[t.String()] = PhaseUnknown
			}
		}
	}
}

func (m *Metrics) request(ctx context.Context, e *Entry) {
	if m == nil {
		return
	}
	m.requests.Add(ctx, 1, metric.WithAttributes(attribute.String("group", e.Group), attribute.String("action", string(e.Action)), attribute.String("result", string(e.Result))))
	if e.Action != ActionDrain {
		return
	}
	var result string
	switch e.Result {
	case ResultOK:
		result = "drained"
	case ResultNotDrained:
		result = "not-drained"
		m.drainTimeouts.Add(ctx, 1, metric.WithAttributes(attribute.String("group", e.Group)))
	case ResultFailed, ResultCanceled:
		result = string(e.Result)
	default:
		return // refused before it started: no drain
	}
	m.drainDuration.Record(ctx, e.Duration.Seconds(), metric.WithAttributes(attribute.String("group", e.Group), attribute.String("result", result)))
}

func (m *Metrics) lockWaited(ctx context.Context, group, result string, d time.Duration) {
	if m == nil {
		return
	}
	m.lockWait.Record(ctx, d.Seconds(), metric.WithAttributes(attribute.String("group", group), attribute.String("result", result)))
}

func (m *Metrics) apiError(ctx context.Context, vendor, op string, err error) {
	if m == nil || err == nil || errors.Is(err, context.Canceled) || kindOf(err) == KindStatsDisabled {
		return // not a failure of the device: the caller gave up, or it does not count connections
	}
	kind := "other"
	if k := kindOf(err); k != 0 {
		kind = k.String()
	}
	m.apiErrors.Add(ctx, 1, metric.WithAttributes(attribute.String("vendor", vendor), attribute.String("op", op), attribute.String("kind", kind)))
}

// instrumented counts a balancer's failed calls.
type instrumented struct {
	Balancer
	m *Metrics
}

// instrument wraps b when m records.
func instrument(b Balancer, m *Metrics) Balancer {
	if m == nil {
		return b
	}
	return instrumented{Balancer: b, m: m}
}

func (b instrumented) Login(ctx context.Context) error {
	err := b.Balancer.Login(ctx)
	b.m.apiError(ctx, b.Vendor(), "login", err)
	return err
}

func (b instrumented) KeepAlive(ctx context.Context) error {
	err := b.Balancer.KeepAlive(ctx)
	b.m.apiError(ctx, b.Vendor(), "keep-alive", err)
	return err
}

func (b instrumented) Logout(ctx context.Context) error {
	err := b.Balancer.Logout(ctx)
	b.m.apiError(ctx, b.Vendor(), "logout", err)
	return err
}

func (b instrumented) State(ctx context.Context, mb Member) (State, error) {
	s, err := b.Balancer.State(ctx, mb)
	b.m.apiError(ctx, b.Vendor(), "state", err)
	return s, err
}

func (b instrumented) Connections(ctx context.Context, mb Member) (int64, error) {
	n, err := b.Balancer.Connections(ctx, mb)
	b.m.apiError(ctx, b.Vendor(), "connections", err)
	return n, err
}

func (b instrumented) SetState(ctx context.Context, mb Member, s AdminState) error {
	err := b.Balancer.SetState(ctx, mb, s)
	b.m.apiError(ctx, b.Vendor(), "set-state", err)
	return err
}
