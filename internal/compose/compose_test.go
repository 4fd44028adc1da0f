package compose

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The layers' Pinging is told exactly when the composed ShouldPing says
// yes: pgx's default (idle over a second) or a layer's.
func TestPingingToldWhenPinged(t *testing.T) {
	cfg, err := pgxpool.ParseConfig("postgres://u@localhost/db")
	if err != nil {
		t.Fatal(err)
	}
	type owner struct{}
	c := Begin(cfg, &owner{})
	peek := false
	c.Add(Eviction, Layer{
		ShouldPing: func(context.Context, *pgx.Conn, time.Duration) bool { return peek },
		IdleAfter:  50 * time.Millisecond,
	})
	told := 0
	c.Add(Connect, Layer{Pinging: func(*pgx.Conn) { told++ }})
	c.Install(cfg, func(context.Context, *pgx.ConnConfig) Conn { return nil })
	for _, tc := range []struct {
		idle       time.Duration
		peek, want bool
	}{
		{idle: 10 * time.Millisecond, peek: true, want: false}, // not asked: idle up to IdleAfter
		{idle: 100 * time.Millisecond, peek: false, want: false},
		{idle: 100 * time.Millisecond, peek: true, want: true}, // the layer's
		{idle: 2 * time.Second, peek: false, want: true},       // pgx's default
	} {
		peek, told = tc.peek, 0
		got := cfg.ShouldPing(context.Background(), pgxpool.ShouldPingParams{IdleDuration: tc.idle})
		if got != tc.want || told != map[bool]int{true: 1}[tc.want] {
			t.Errorf("idle %v, layer says %v: ShouldPing %v, Pinging told %d times; want %v, once when pinged", tc.idle, tc.peek, got, told, tc.want)
		}
	}

	// Without a layer's ShouldPing, pgx's default, or the config's own.
	for _, user := range []bool{false, true} {
		cfg, err := pgxpool.ParseConfig("postgres://u@localhost/db")
		if err != nil {
			t.Fatal(err)
		}
		if user {
			cfg.ShouldPing = func(_ context.Context, p pgxpool.ShouldPingParams) bool { return p.IdleDuration > time.Minute }
		}
		c := Begin(cfg, &owner{})
		told := 0
		c.Add(Connect, Layer{Pinging: func(*pgx.Conn) { told++ }})
		c.Install(cfg, func(context.Context, *pgx.ConnConfig) Conn { return nil })
		bound := PgxPingIdle
		if user {
			bound = time.Minute
		}
		for _, idle := range []time.Duration{bound - time.Millisecond, bound + time.Millisecond} {
			told = 0
			want := idle > bound
			if got := cfg.ShouldPing(context.Background(), pgxpool.ShouldPingParams{IdleDuration: idle}); got != want || told != map[bool]int{true: 1}[want] {
				t.Errorf("own ShouldPing %v, idle %v: ShouldPing %v, Pinging told %d times; want %v", user, idle, got, told, want)
			}
		}
	}
}

// A layer's Acquire hooks run only while its switch is on: pgxpool calls
// the pool config's tracer on every Acquire, and while every database is
// up that call is one atomic load (the outage layer's switch is on only
// while the database is not up). A pool without such a hook, a composed
// Acquire tracer or an attach gets no pool tracer at all.
func TestAcquireHooksArmed(t *testing.T) {
	type owner struct{}
	cfg, err := pgxpool.ParseConfig("postgres://u@localhost/db")
	if err != nil {
		t.Fatal(err)
	}
	c := Begin(cfg, &owner{})
	var set func(bool)
	starts, ends := 0, 0
	c.Add(Outage, Layer{
		AcquireStart: func(ctx context.Context, _ *pgxpool.Pool) context.Context { starts++; return ctx },
		AcquireEnd:   func(context.Context) { ends++ },
		ArmAcquire:   func(s func(bool)) { set = s },
	})
	c.Install(cfg, func(context.Context, *pgx.ConnConfig) Conn { return nil })
	tr, ok := cfg.ConnConfig.Tracer.(pgxpool.AcquireTracer)
	if !ok || set == nil {
		t.Fatalf("tracer %T, switch given %v: want an Acquire tracer and the layer's switch", cfg.ConnConfig.Tracer, set != nil)
	}
	if _, ok := cfg.ConnConfig.Tracer.(pgxpool.ReleaseTracer); ok || TracesAcquire(cfg.ConnConfig.Tracer) {
		t.Errorf("tracer %T traces Release or more than the hooks on Acquire", cfg.ConnConfig.Tracer)
	}
	if OwnerOf[owner](cfg) == nil {
		t.Error("OwnerOf lost the owner")
	}
	acquire := func() {
		ctx := tr.TraceAcquireStart(context.Background(), nil, pgxpool.TraceAcquireStartData{})
		tr.TraceAcquireEnd(ctx, nil, pgxpool.TraceAcquireEndData{})
	}
	acquire()
	if starts+ends != 0 {
		t.Errorf("switch off: hooks ran %d and %d times, want none", starts, ends)
	}
	set(true)
	acquire()
	set(false)
	acquire()
	if starts != 1 || ends != 1 {
		t.Errorf("switch on for one Acquire: hooks ran %d and %d times, want once each", starts, ends)
	}

	plain, err := pgxpool.ParseConfig("postgres://u@localhost/db")
	if err != nil {
		t.Fatal(err)
	}
	Begin(plain, &owner{}).Install(plain, func(context.Context, *pgx.ConnConfig) Conn { return nil })
	if _, ok := plain.ConnConfig.Tracer.(pgxpool.AcquireTracer); ok {
		t.Errorf("no Acquire hook: tracer %T traces Acquire", plain.ConnConfig.Tracer)
	}
}

// SetSwitch follows the switches' contract: on while needed; off only when
// not, and on again when a change came as it turned off.
func TestSetSwitch(t *testing.T) {
	SetSwitch(nil, func() bool { t.Fatal("need asked with no switch"); return false })
	for _, tc := range []struct {
		name  string
		needs []bool // need's answers, in turn
		want  []bool // the switch's settings
	}{
		{"needed", []bool{true}, []bool{true}},
		{"not needed", []bool{false, false}, []bool{false}},
		{"a change as it turned off", []bool{false, true}, []bool{false, true}},
	} {
		var got []bool
		i := 0
		SetSwitch(func(on bool) { got = append(got, on) }, func() bool { i++; return tc.needs[i-1] })
		if i != len(tc.needs) || !slices.Equal(got, tc.want) {
			t.Errorf("%s: need asked %d times, switch set %v; want %d and %v", tc.name, i, got, len(tc.needs), tc.want)
		}
	}
}
