package holdfast_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/fakes"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
)

// The faults an on-call engineer meets, each played on a real server, and
// the log lines holdfast writes for them: every line names its target
// (server.address, server.port, db.namespace, holdfast.pool), durations
// are seconds ("_s" keys, floats), "recovered" appears only when the
// operation succeeded, a connect that gives up says so, and a failure no
// retry fixes gets one ERROR line with what to check.
func TestLogLinesForOnCall(t *testing.T) {
	if testing.Short() {
		t.Skip("plays outages against real servers for every on-call log line: skipped with -short")
	}
	t.Parallel()
	s := pgtest.NewServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	for _, sql := range []string{
		"CREATE ROLE oncall_limited LOGIN CONNECTION LIMIT 0",
		"CREATE ROLE oncall_app LOGIN",
		"CREATE DATABASE oncall_revoked",
		"REVOKE CONNECT ON DATABASE oncall_revoked FROM PUBLIC",
	} {
		if err := s.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	if err := s.PasswordRole(ctx, "oncall_pw", "right-password"); err != nil {
		t.Fatal(err)
	}
	dsn := func(user, db string) string {
		return fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable&pool_max_conns=2", user, s.Addr(), db)
	}
	wrongPassword := holdfast.WithPasswordFunc(func(context.Context, string) (string, error) { return "wrong-password", nil })
	// The token source down for a while: the pool's first fetch succeeds,
	// the next two (the pool's next connect, the prober's first check)
	// answer 503, then it is back.
	errToken := errors.New("token API: 503 Service Unavailable")
	tokenBlip := func() []holdfast.Option {
		var calls sync.Mutex
		n := 0
		return []holdfast.Option{
			holdfast.WithPasswordFunc(func(context.Context, string) (string, error) {
				calls.Lock()
				defer calls.Unlock()
				n++
				if n == 2 || n == 3 {
					return "", errToken
				}
				return "unused-by-trust-auth", nil
			}),
			holdfast.WithClassifier(func(err error) (classify.Verdict, bool) {
				return classify.Verdict{Class: classify.Transient, Reason: classify.ReasonPrefixTokenFetch + "503"}, errors.Is(err, errToken)
			}),
		}
	}

	type want struct {
		msg, level, reason string
		min, max           int // lines of the kind
	}
	tests := []struct {
		name    string
		dsn     string
		opts    []holdfast.Option
		refused bool     // the first dial is refused once (a restart's blip)
		outage  bool     // the pool connects, then its dials are refused twice (a restart: down, then back)
		act     string   // "ping" (the pool path), "acquire" (Factory.Acquire) or "outage" (ping, Reset, ping)
		ok      bool     // the operation succeeds
		want    []want   // kinds of lines, with their counts
		none    []string // messages that must not appear
		check   func(t *testing.T, line map[string]any)
	}{
		{name: "blip then recovered", dsn: dsn("oncall_app", "postgres"), refused: true, act: "ping", ok: true,
			want: []want{{obsRetrying, "WARN", "conn-refused", 1, 1}, {obsRecovered, "INFO", "conn-refused", 1, 1}},
			none: []string{obsGaveUp, obsCannotConnect}},
		{name: "sustained 53300", dsn: dsn("oncall_limited", "postgres"), act: "ping",
			want: []want{{obsRetrying, "WARN", "sqlstate-53300", 1, 3}, {obsGaveUp, "WARN", "sqlstate-53300", 1, 1}},
			none: []string{obsRecovered, obsCannotConnect}},
		{name: "CONNECT revoked", dsn: dsn("oncall_app", "oncall_revoked"), act: "ping",
			want: []want{{obsCannotConnect, "ERROR", "sqlstate-42501", 1, 1}},
			none: []string{obsRecovered, obsRetrying},
			check: func(t *testing.T, l map[string]any) {
				if h, _ := l["hint"].(string); !strings.Contains(h, `GRANT CONNECT ON DATABASE "oncall_revoked" TO "oncall_app"`) {
					t.Errorf("hint = %q, want the GRANT to run", h)
				}
			}},
		{name: "missing database", dsn: dsn("oncall_app", "oncall_missing"), act: "ping",
			want: []want{{obsCannotConnect, "ERROR", "sqlstate-3D000", 1, 1}},
			none: []string{obsRecovered, obsRetrying}},
		{name: "wrong password on the pool path", dsn: dsn("oncall_pw", "postgres") + "&password=wrong-password", act: "ping",
			want: []want{{obsCannotConnect, "ERROR", "sqlstate-28P01", 1, 1}},
			none: []string{obsRecovered}},
		{name: "wrong password after a fresh one", dsn: dsn("oncall_pw", "postgres"), opts: []holdfast.Option{wrongPassword}, act: "acquire",
			want: []want{{obsCannotConnect, "ERROR", "sqlstate-28P01", 1, 2}, {obsRetrying, "WARN", "auth-failed-fresh-token", 1, 1},
				{obsGaveUpFatal, "ERROR", "sqlstate-28P01", 1, 1}},
			none: []string{obsRecovered},
			check: func(t *testing.T, l map[string]any) {
				if l["msg"] == obsGaveUpFatal && l["fresh_credential"] != true {
					t.Errorf("the give-up line does not say a fresh password was refused too: %v", l)
				}
			}},
		{name: "password function panics", dsn: dsn("oncall_pw", "postgres"), act: "ping",
			opts: []holdfast.Option{holdfast.WithPasswordFunc(func(context.Context, string) (string, error) {
				panic("the secrets client is nil")
			})},
			want: []want{{obsPanicked, "ERROR", "", 1, 1}, {obsCannotConnect, "ERROR", "panic", 1, 1}},
			none: []string{obsRecovered}},
		{name: "database down, then back", dsn: dsn("oncall_app", "postgres"), outage: true, act: "outage", ok: true,
			want: []want{{obsDatabaseDown, "WARN", "conn-refused", 1, 1}, {obsDatabaseBack, "INFO", "", 1, 1}},
			none: []string{obsGaveUp, obsCannotConnect},
			check: func(t *testing.T, l map[string]any) {
				if l["msg"] == obsDatabaseBack {
					if _, ok := l["downtime_s"].(float64); !ok {
						t.Errorf("the back line has no downtime_s: %v", l)
					}
				}
			}},
		{name: "token source down, then back", dsn: dsn("oncall_app", "postgres"), opts: tokenBlip(), act: "outage", ok: true,
			want: []want{{obsTokenDown, "WARN", "token-fetch-503", 1, 1}, {obsTokenBack, "INFO", "", 1, 1}},
			none: []string{obsGaveUp, obsCannotConnect, obsDatabaseDown, obsDatabaseBack},
			check: func(t *testing.T, l map[string]any) {
				if h, _ := l["hint"].(string); l["msg"] == obsTokenDown && !strings.Contains(h, "Check the token source") {
					t.Errorf("the token source's line does not say what to check: %v", l)
				}
			}},
		{name: "password function fails for good", dsn: dsn("oncall_pw", "postgres"), act: "ping",
			opts: []holdfast.Option{holdfast.WithPasswordFunc(func(context.Context, string) (string, error) {
				return "", errors.New("secrets store: access denied")
			})},
			want: []want{{obsCannotConnect, "ERROR", "", 1, 1}},
			none: []string{obsRecovered}},
	}
	var seenMu sync.Mutex
	seen := map[string]bool{}
	t.Run("scenarios", func(t *testing.T) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				rig := newRig(t)
				cfg, err := pgxpool.ParseConfig(tt.dsn)
				if err != nil {
					t.Fatal(err)
				}
				if tt.refused {
					cfg.ConnConfig.DialFunc = fakes.NewConnector(s.Addr(), fakes.Refused()).Dial
				}
				if tt.outage {
					// The pool's first connection, then its next connect and
					// the prober's first check refused, its second connects.
					cfg.ConnConfig.DialFunc = fakes.NewConnector(s.Addr(), fakes.Connect(), fakes.Refused(), fakes.Refused()).Dial
				}
				f := newFactory(t, append(rig.options(), tt.opts...)...)
				var pool *pgxpool.Pool
				if err := f.Configure(cfg, holdfast.PoolName("oncall")); err != nil {
					t.Fatal(err)
				}
				pool, err = pgxpool.NewWithConfig(ctx, cfg)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(pool.Close)
				actx, acancel := context.WithTimeout(ctx, 20*time.Second)
				defer acancel()
				switch tt.act {
				case "ping":
					err = pool.Ping(actx)
				case "acquire":
					var c *pgxpool.Conn
					if c, err = f.Acquire(actx, pool); err == nil {
						c.Release()
					}
				case "outage":
					if err = pool.Ping(actx); err == nil {
						pool.Reset()
						err = pool.Ping(actx)
					}
				}
				if (err == nil) != tt.ok {
					t.Fatalf("operation: %v, want ok=%v", err, tt.ok)
				}
				if os.Getenv("HOLDFAST_PRINT_LOGS") != "" {
					t.Log(rig.logs.String())
				}
				lines := parseLines(t, rig.logs.String())
				if t.Failed() {
					return
				}
				count := map[string]int{}
				for _, l := range lines {
					msg, _ := l["msg"].(string)
					count[msg]++
					seenMu.Lock()
					seen[msg] = true
					seenMu.Unlock()
					checkTargetAndUnits(t, l, s.Addr(), "oncall")
					if tt.check != nil {
						tt.check(t, l)
					}
				}
				for _, w := range tt.want {
					n := 0
					for _, l := range lines {
						if l["msg"] != w.msg {
							continue
						}
						n++
						if l["level"] != w.level {
							t.Errorf("%q at %v, want %s", w.msg, l["level"], w.level)
						}
						if w.reason != "" && l["error.reason"] != w.reason {
							t.Errorf("%q with error.reason %v, want %s", w.msg, l["error.reason"], w.reason)
						}
						if w.level == "ERROR" && w.msg != obsPanicked {
							if h, _ := l["hint"].(string); h == "" {
								t.Errorf("%q has no hint: %v", w.msg, l)
							}
						}
					}
					if n < w.min || n > w.max {
						t.Errorf("%d lines %q, want %d..%d:\n%s", n, w.msg, w.min, w.max, rig.logs.String())
					}
				}
				for _, msg := range tt.none {
					if count[msg] > 0 {
						t.Errorf("%d lines %q, want none:\n%s", count[msg], msg, rig.logs.String())
					}
				}
				if strings.Contains(rig.logs.String(), "right-password") || strings.Contains(rig.logs.String(), "wrong-password") {
					t.Errorf("a password in the logs:\n%s", rig.logs.String())
				}
			})
		}
	})
	// Every line kind docs/telemetry.md lists was played and checked here,
	// but the blue/green one (TestTelemetrySwitchover checks its keys) and
	// the wake of a paused instance (TestServerlessV2 checks its keys).
	for _, msg := range documentedLogLines(t) {
		if !seen[msg] && msg != "holdfast: suspended by a blue/green switchover" && msg != "holdfast: database woke" {
			t.Errorf("docs/telemetry.md lists the line %q, which no scenario wrote", msg)
		}
	}
}

// documentedLogLines returns the messages of the table "Log lines" of
// docs/telemetry.md.
func documentedLogLines(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("docs/telemetry.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n## Log lines\n")
	if !ok {
		t.Fatal("docs/telemetry.md has no section \"Log lines\"")
	}
	rest, _, _ = strings.Cut(rest, "\n## ")
	var out []string
	for _, l := range strings.Split(rest, "\n") {
		cells := strings.Split(l, "|")
		if len(cells) < 4 || cells[0] != "" {
			continue // not a table row
		}
		switch strings.TrimSpace(cells[1]) {
		case "WARN", "INFO", "ERROR", "DEBUG":
			out = append(out, strings.Trim(strings.TrimSpace(cells[2]), "`"))
		}
	}
	if len(out) < 6 {
		t.Fatalf("found %d log lines in docs/telemetry.md's table: %q", len(out), out)
	}
	return out
}

// The messages of the package doc's log table.
const (
	obsRetrying      = "holdfast: retrying after a transient failure"
	obsGaveUp        = "holdfast: giving up after transient failures"
	obsRecovered     = "holdfast: recovered"
	obsCannotConnect = "holdfast: cannot connect"
	obsGaveUpFatal   = "holdfast: giving up on a failure that is not retryable"
	obsPanicked      = "holdfast: the password function panicked"
	obsDatabaseDown  = "holdfast: database down"
	obsDatabaseBack  = "holdfast: database back"
	obsTokenDown     = "holdfast: token source down"
	obsTokenBack     = "holdfast: token source back"
)

func parseLines(t *testing.T, text string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Errorf("not a JSON line: %q: %v", l, err)
			continue
		}
		out = append(out, m)
	}
	return out
}

// checkTargetAndUnits fails when a holdfast line does not name its target
// (the server of addr, database, pool) or carries a duration that is not
// in seconds.
func checkTargetAndUnits(t *testing.T, l map[string]any, addr, pool string) {
	t.Helper()
	msg, _ := l["msg"].(string)
	if !strings.HasPrefix(msg, "holdfast:") {
		return
	}
	host, port, _ := strings.Cut(addr, ":")
	if l["server.address"] != host || fmt.Sprint(l["server.port"]) != port || l["db.namespace"] == nil || l["holdfast.pool"] != pool {
		t.Errorf("line does not name its target (server.address %s, server.port %s, db.namespace, holdfast.pool %s): %v", host, port, pool, l)
	}
	for k, v := range l {
		switch k {
		case "delay", "took", "waited", "elapsed":
			t.Errorf("duration %q without its unit: %v", k, l)
		}
		if strings.HasSuffix(k, "_s") {
			if _, ok := v.(float64); !ok {
				t.Errorf("%s = %v (%T), want seconds as a number", k, v, v)
			}
		}
	}
}
