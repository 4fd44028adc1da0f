package obs

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/holdfast-db/holdfast/classify"
)

// The outage layer's telemetry (holdfast.WithOutage): one gauge per pool
// and two log lines per outage.
const (
	// MetricDatabaseDown is 1 while the pool's outage layer finds its
	// database down (new connections held), 0 otherwise, from Configure
	// on.
	MetricDatabaseDown = "holdfast.database.down"
	// MsgDatabaseDown is the WARN line of an outage's start (once per
	// outage); MsgDatabaseBack the INFO line of its end.
	MsgDatabaseDown = "holdfast: database down"
	MsgDatabaseBack = "holdfast: database back"
	// MsgTokenSourceDown and MsgTokenSourceBack are the same lines when
	// the outage is the token source's: no token or certificate could be
	// fetched (the database may be up, and the pool's open connections
	// still serve).
	MsgTokenSourceDown = "holdfast: token source down"
	MsgTokenSourceBack = "holdfast: token source back"
	// MsgDatabaseWoke is the INFO line of a wake (holdfast.WithServerlessV2)
	// that took a second or more: the instance was most likely paused.
	MsgDatabaseWoke = "holdfast: database woke"
)

// Outage records one pool's outages. Build it with [Telemetry.Outage];
// its methods accept a nil *Outage and are safe for concurrent use.
type Outage struct {
	t      *Telemetry
	target *Target
	set    metric.RecordOption
}

// Outage returns the outage telemetry of the pool of target, and records
// its state up (0).
func (t *Telemetry) Outage(target *Target) *Outage {
	if t == nil {
		return nil
	}
	var kvs []attribute.KeyValue
	if target != nil {
		kvs = target.kvs
	}
	o := &Outage{t: t, target: target, set: metric.WithAttributeSet(attribute.NewSet(kvs...))}
	t.dbDown.Record(context.Background(), 0, o.set)
	return o
}

// Down records the start of an outage: the gauge 1 and one WARN line
// with its cause (the prober's failed check: err, its verdict v, the
// address it tried, "" when none), what the requests do meanwhile
// (hold), and the target; token: the outage is the token source's
// (MsgTokenSourceDown).
func (o *Outage) Down(cause error, v classify.Verdict, addr, hold string, token bool) {
	if o == nil {
		return
	}
	ctx := WithTarget(context.Background(), o.target)
	o.t.dbDown.Record(ctx, 1, o.set)
	attrs := []slog.Attr{
		slog.String("error.class", v.Class.String()),
		slog.String("error.reason", v.Reason),
		slog.String("hint", hold),
		slog.String("error", o.t.redactErr(cause)),
	}
	if addr != "" {
		attrs = append(attrs, slog.String(string(semconv.NetworkPeerAddressKey), addr))
	}
	msg := MsgDatabaseDown
	if token {
		msg = MsgTokenSourceDown
	}
	o.t.log(ctx, slog.LevelWarn, msg, "", v.Reason, attrs...)
}

// Back records an outage's end: the gauge 0 and one INFO line with how
// long the database was down, the address that answered, and the
// addresses left behind (moved: the name leads elsewhere now); token:
// the outage was the token source's (MsgTokenSourceBack).
func (o *Outage) Back(downtime time.Duration, addr string, moved []string, token bool) {
	if o == nil {
		return
	}
	ctx := WithTarget(context.Background(), o.target)
	o.t.dbDown.Record(ctx, 0, o.set)
	attrs := []slog.Attr{slog.Float64("downtime_s", downtime.Seconds())}
	if addr != "" {
		attrs = append(attrs, slog.String(string(semconv.NetworkPeerAddressKey), addr))
	}
	if len(moved) > 0 {
		attrs = append(attrs, slog.String("moved_from", strings.Join(moved, ",")))
	}
	msg := MsgDatabaseBack
	if token {
		msg = MsgTokenSourceBack
	}
	o.t.log(ctx, slog.LevelInfo, msg, "", "", attrs...)
}

// Woke records the end of a wake that took took (a paused instance
// resumed, most likely): one INFO line with how long, and the address
// that answered. The gauge is not moved: a wake is no outage.
func (o *Outage) Woke(took time.Duration, addr string) {
	if o == nil {
		return
	}
	ctx := WithTarget(context.Background(), o.target)
	attrs := []slog.Attr{slog.Float64("wake_s", took.Seconds())}
	if addr != "" {
		attrs = append(attrs, slog.String(string(semconv.NetworkPeerAddressKey), addr))
	}
	o.t.log(ctx, slog.LevelInfo, MsgDatabaseWoke, "", "", attrs...)
}
