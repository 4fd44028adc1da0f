package obs

import (
	"context"
	"log/slog"
	"net"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// Target is the database a pool reaches, for the attributes of log lines:
// server.address, server.port, db.namespace and, when the user named the
// pool, holdfast.pool. Build it once per pool with [NewTarget]; put it in
// the context of a connect or an Acquire with [WithTarget].
type Target struct {
	attrs []slog.Attr
	key   string // for log sampling
}

// KeyPool is the attribute of a pool name given with holdfast.WithPoolName.
const KeyPool = "holdfast.pool"

// NewTarget describes the pool built from cc, named pool ("" for none).
func NewTarget(cc *pgx.ConnConfig, pool string) *Target {
	t := &Target{
		attrs: []slog.Attr{
			slog.String(string(semconv.ServerAddressKey), cc.Host),
			slog.Int(string(semconv.ServerPortKey), int(cc.Port)),
			slog.String(string(semconv.DBNamespaceKey), cc.Database),
		},
		key: hostPortDB(cc),
	}
	if pool != "" {
		t.attrs = append(t.attrs, slog.String(KeyPool, pool))
		t.key = pool + "@" + t.key
	}
	return t
}

// PoolName is a pool's name in telemetry (db.client.connection.pool.name):
// name when the user gave one, else "host:port/database" of cc, as the
// semantic conventions advise for a pool without a name of its own.
func PoolName(cc *pgx.ConnConfig, name string) string {
	if name != "" {
		return name
	}
	return hostPortDB(cc)
}

// hostPortDB is "host:port/database" of cc.
func hostPortDB(cc *pgx.ConnConfig) string {
	return net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port))) + "/" + cc.Database
}

type targetKey struct{}

// WithTarget returns ctx carrying t.
func WithTarget(ctx context.Context, t *Target) context.Context {
	if t == nil {
		return ctx
	}
	return context.WithValue(ctx, targetKey{}, t)
}

func targetOf(ctx context.Context) *Target {
	t, _ := ctx.Value(targetKey{}).(*Target)
	return t
}

// logEvery is how often a log line of one kind (message, target, layer,
// reason) is written at most; the lines in between are counted and the
// next line says how many were suppressed.
const logEvery = time.Second

// sampler limits repeated log lines. A zero sampler is ready to use.
type sampler struct {
	mu    sync.Mutex
	every time.Duration
	now   func() time.Time
	last  map[string]*sampleState
}

type sampleState struct {
	at         time.Time
	suppressed int
}

// allow reports whether a line of kind key may be written now, and how many
// lines of that kind were suppressed since the last one written.
func (s *sampler) allow(key string) (bool, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.now != nil {
		now = s.now()
	}
	every := s.every
	if every == 0 {
		every = logEvery
	}
	if s.last == nil {
		s.last = map[string]*sampleState{}
	}
	st, ok := s.last[key]
	if !ok {
		if len(s.last) >= maxSampleKeys {
			clear(s.last) // a bound on memory; the worst case is a few extra lines
		}
		s.last[key] = &sampleState{at: now}
		return true, 0
	}
	if now.Sub(st.at) < every {
		st.suppressed++
		return false, 0
	}
	n := st.suppressed
	st.at, st.suppressed = now, 0
	return true, n
}

// maxSampleKeys bounds the sampler's memory.
const maxSampleKeys = 4096

// log writes a sampled line: its attributes, the target's from ctx, and
// "suppressed" when lines of its kind (message, layer, stage, reason,
// target) were dropped since the last one.
func (t *Telemetry) log(ctx context.Context, level slog.Level, msg, layer, reason string, attrs ...slog.Attr) {
	if !t.logger.Enabled(ctx, level) {
		return
	}
	tg := targetOf(ctx)
	key := msg + "|" + layer + "|" + StageOf(ctx, layer) + "|" + reason
	if tg != nil {
		key += "|" + tg.key
		attrs = append(attrs, tg.attrs...)
	}
	ok, suppressed := t.sampler.allow(key)
	if !ok {
		return
	}
	if suppressed > 0 {
		attrs = append(attrs, slog.Int("suppressed", suppressed))
	}
	t.logger.LogAttrs(ctx, level, msg, attrs...)
}

// Version is the version of the holdfast module, from the binary's build
// information, for the instrumentation scope; "(devel)" when holdfast is
// the main module or the information is missing.
var Version = moduleVersion()

func moduleVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	for _, d := range bi.Deps {
		if d.Path == ScopeName {
			if d.Replace != nil && d.Replace.Version != "" {
				return d.Replace.Version
			}
			return d.Version
		}
	}
	if bi.Main.Path == ScopeName && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
