package lb_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os/user"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast/lb"
	"github.com/holdfast-db/holdfast/lb/a10/a10test"
	"github.com/holdfast-db/holdfast/lb/f5"
	"github.com/holdfast-db/holdfast/lb/f5/f5test"
	"github.com/holdfast-db/holdfast/lb/internal/pgtest"
)

// TestAuditRecordsTheOriginBesideTheAssertedOperator pins issue 34,
// problem 5: the operator is whatever the caller asserts, so the audit
// records beside it how it was given, the OS account of the process
// (looked up by uid, not read from $USER) and the CI system's identity
// variables, in the row and in the log line. Before the fix the row had
// the operator's name and nothing else.
func TestAuditRecordsTheOriginBesideTheAssertedOperator(t *testing.T) {
	t.Parallel()
	me, err := user.Current()
	if err != nil {
		t.Skip("no OS user to compare with:", err)
	}
	env := map[string]string{
		"USER":           "mallory", // never read: the OS user is looked up
		"GITHUB_ACTOR":   "octocat",
		"GITHUB_RUN_ID":  "4242",
		"GITHUB_TOKEN":   "ghs_never-recorded", // not an identity variable
		"CI_JOB_ID":      "77\n\x1b[31mforged line",
		"BUILD_TAG":      strings.Repeat("x", 500),
		"GITHUB_WORKFLO": "a misspelt name is not one",
	}
	origin := lb.ProcessOrigin(func(k string) string { return env[k] })
	if want := me.Username + " (uid " + me.Uid + ")"; origin.OSUser != want {
		t.Errorf("OSUser = %q, want %q", origin.OSUser, want)
	}
	if origin.CI["GITHUB_ACTOR"] != "octocat" || origin.CI["GITHUB_RUN_ID"] != "4242" || origin.CI["CI_JOB_ID"] != "77[31mforged line" ||
		len(origin.CI["BUILD_TAG"]) != 200 || len(origin.CI) != 4 {
		t.Errorf("CI = %q", origin.CI)
	}

	group := uniq("origin")
	e := newEnv(t, envOpts{groups: map[string][]lb.Target{group: {f5Member("web", "web-1", 80)}}, perms: lb.Permissions{"alice": {group}}})
	e.f5.AddPoolMember("web", "web-1:80", f5test.Member{Conns: 1})
	// newEnv's controller has the default Origin, the process's.
	out, err := e.ctrl.Do(context.Background(), lb.Request{Operator: "alice", OperatorVia: "-operator", Action: lb.ActionDisable, Group: group})
	if err != nil {
		t.Fatal(err)
	}
	if got := out.Entry.Origin; got.Via != "-operator" || got.OSUser != origin.OSUser {
		t.Errorf("entry origin = %+v", got)
	}
	// A controller given an Origin (as holdfast-lb gives it, from its
	// environment) records it, refused requests too, and stores it.
	store, _ := newStore(t)
	ctrl, err := lb.NewController(lb.ControllerConfig{
		Balancers: map[string]lb.Balancer{"f5": newF5Client(t, e.f5)}, Groups: map[string][]lb.Target{group: {f5Member("web", "web-1", 80)}},
		Permissions: lb.Permissions{"alice": {group}}, Locker: store, Audit: store, Drain: fast, Origin: origin,
		Logger: slog.New(slog.NewJSONHandler(e.logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ctrl.Do(context.Background(), lb.Request{Operator: "bob", OperatorVia: "$USER", Action: lb.ActionEnable, Group: group}); !errors.Is(err, lb.ErrNotPermitted) {
		t.Fatalf("bob = %v", err)
	}
	if _, err := ctrl.Do(context.Background(), lb.Request{Operator: "alice", OperatorVia: "$HOLDFAST_LB_OPERATOR", Action: lb.ActionEnable, Group: group}); err != nil {
		t.Fatal(err)
	}
	es := e.entries(t, group)
	if len(es) != 3 {
		t.Fatalf("%d entries, want 3", len(es))
	}
	for i, want := range []string{"$HOLDFAST_LB_OPERATOR", "$USER", "-operator"} {
		got := es[i].Origin
		if got.Via != want || got.OSUser != origin.OSUser {
			t.Errorf("entry %d (%s) origin = %+v, want via %q", i, es[i].Operator, got, want)
		}
		if i < 2 && (got.CI["GITHUB_ACTOR"] != "octocat" || got.CI["GITHUB_TOKEN"] != "") {
			t.Errorf("entry %d CI = %q", i, got.CI)
		}
	}
	var line map[string]any
	for _, l := range e.logs.lines(t) {
		if l["msg"] == "lb control" && l["operator"] == "bob" {
			line = l
		}
	}
	if ci, _ := line["ci"].(map[string]any); line["operator_via"] != "$USER" || line["os_user"] != origin.OSUser || ci["GITHUB_ACTOR"] != "octocat" {
		t.Errorf("bob's log line = %v", line)
	}
	if strings.Contains(e.logs.String(), "ghs_never-recorded") {
		t.Error("a CI token reached the log")
	}
}

// The schema of holdfast_lb_audit before issue 34, as released.
const auditSchemaV1 = `
CREATE TABLE holdfast_lb_lock (
	group_name  text PRIMARY KEY,
	owner       text NOT NULL,
	host        text NOT NULL,
	since       timestamptz NOT NULL,
	backend_pid integer NOT NULL,
	lock_key    integer NOT NULL
);
CREATE TABLE holdfast_lb_audit (
	id          bigserial PRIMARY KEY,
	started_at  timestamptz NOT NULL,
	finished_at timestamptz,
	duration_ms double precision NOT NULL DEFAULT 0,
	operator    text NOT NULL,
	host        text NOT NULL,
	action      text NOT NULL,
	group_name  text NOT NULL,
	nodes       text[] NOT NULL,
	members     jsonb NOT NULL,
	result      text NOT NULL,
	error       text NOT NULL DEFAULT ''
);
CREATE INDEX holdfast_lb_audit_group ON holdfast_lb_audit (group_name, id);`

// The INSERT of a holdfast-lb released before issue 34.
const auditInsertV1 = `
INSERT INTO holdfast_lb_audit (started_at, finished_at, duration_ms, operator, host, action, group_name, nodes, members, result, error)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING id`

// TestAuditMigrationKeepsOldRowsReadable pins the migration of problem
// 5: a database made by an older holdfast-lb, with its rows, is brought
// up to date by NewPGStore (twice, harmlessly); its rows read back as
// they were, with a zero Origin; new rows carry theirs; and an older
// holdfast-lb still writes to the migrated table.
func TestAuditMigrationKeepsOldRowsReadable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := strings.ReplaceAll(uniq("lb_migration"), "-", "_")
	admin, err := pgx.Connect(ctx, pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })
	pc, err := pgxpool.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	pc.ConnConfig.RuntimeParams["search_path"] = schema
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, auditSchemaV1); err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(-time.Hour).Truncate(time.Microsecond)
	old := func() int64 {
		t.Helper()
		var id int64
		err := pool.QueryRow(ctx, auditInsertV1, start, start.Add(time.Second), 1000.0, "alice", "ci-7", "drain", "web", []string{"f5 web/web-1:80"},
			`[{"balancer":"f5","member":"web/web-1:80","before":"enabled","after":"forced-offline","conns_before":3,"conns_after":0,"first_conns":1,"polls":2,"duration_ms":900,"drained":true,"changed":true}]`,
			"ok", "").Scan(&id)
		if err != nil {
			t.Fatalf("the old INSERT: %v", err)
		}
		return id
	}
	id1 := old()

	var store *lb.PGStore
	for range 2 {
		if store, err = lb.NewPGStore(ctx, pool); err != nil {
			t.Fatalf("NewPGStore on the old schema: %v", err)
		}
	}
	e, err := store.Entry(ctx, id1)
	if err != nil || e == nil {
		t.Fatalf("the old row after the migration: %+v, %v", e, err)
	}
	if e.Operator != "alice" || e.Host != "ci-7" || e.Result != lb.ResultOK || e.Duration != time.Second || len(e.Members) != 1 || !e.Members[0].Drained ||
		!e.Origin.IsZero() || e.Notes != nil || !e.Started.Equal(start) {
		t.Errorf("the old row reads %+v", e)
	}
	// New rows carry their origin and notes.
	ne := &lb.Entry{Started: time.Now(), Operator: "bob", Host: "h", Action: lb.ActionEnable, Group: "web", Result: lb.ResultOK,
		Origin: lb.Origin{Via: "-operator", OSUser: "deploy (uid 1001)", CI: map[string]string{"GITHUB_ACTOR": "octocat"}},
		Notes:  []string{"balancer f5: plain http"}}
	if err := store.Record(ctx, ne); err != nil {
		t.Fatal(err)
	}
	got, err := store.Entry(ctx, ne.ID)
	if err != nil || got == nil {
		t.Fatal(err)
	}
	if b1, _ := json.Marshal(got.Origin); string(b1) != `{"via":"-operator","os_user":"deploy (uid 1001)","ci":{"GITHUB_ACTOR":"octocat"}}` || len(got.Notes) != 1 {
		t.Errorf("new row = %+v", got)
	}
	// An older holdfast-lb still writes (the new columns are nullable),
	// and everything reads.
	id3 := old()
	es, err := store.Entries(ctx, "", 10)
	if err != nil || len(es) != 3 || es[0].ID != id3 || !es[0].Origin.IsZero() {
		t.Errorf("entries after an old write = %+v, %v", es, err)
	}
	// The lock works on the migrated schema, members included.
	l, err := store.Lock(ctx, "web", "alice", lb.LockMember{Device: "f5 bigip:443 Common", Member: lb.Member{Node: "web-1"}, Name: "f5 web-1"})
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Release(ctx)
}

// TestTransportNotesAreAuditedAndLogged pins the audit side of issue 34,
// problem 8: a request reaching a balancer whose transport is not
// verified TLS records the note in its audit entry (the row too) and
// logs its lines as warnings; requests not reaching it do not.
func TestTransportNotesAreAuditedAndLogged(t *testing.T) {
	t.Parallel()
	srv, fc := newF5(t, f5test.Options{})
	srv.AddPoolMember("web", "web-1:80", f5test.Member{Conns: 1})
	asrv, ac := newA10(t, a10test.Options{})
	asrv.AddServer("app-1", a10test.Real{})
	store, _ := newStore(t)
	logs := &syncBuffer{}
	g, other := uniq("notes"), uniq("no-notes")
	note := lb.BalancerConfig{Endpoint: "https://bigip", InsecureSkipVerify: true}.TransportWarning()
	ctrl, err := lb.NewController(lb.ControllerConfig{
		Balancers:   map[string]lb.Balancer{"f5": fc, "a10": ac},
		Groups:      map[string][]lb.Target{g: {f5Member("web", "web-1", 80)}, other: {{Balancer: "a10", Member: lb.Member{Node: "app-1"}}}},
		Permissions: lb.Permissions{"alice": {"*"}}, Locker: store, Audit: store, Drain: fast,
		Logger: slog.New(slog.NewJSONHandler(logs, nil)), TransportNotes: map[string]string{"f5": note},
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := ctrl.Do(context.Background(), lb.Request{Operator: "alice", Action: lb.ActionDisable, Group: g})
	if err != nil {
		t.Fatal(err)
	}
	want := "balancer f5: " + note
	if len(out.Entry.Notes) != 1 || out.Entry.Notes[0] != want {
		t.Errorf("notes = %q, want %q", out.Entry.Notes, want)
	}
	if es, err := store.Entries(context.Background(), g, 1); err != nil || len(es) != 1 || len(es[0].Notes) != 1 || es[0].Notes[0] != want {
		t.Errorf("stored = %+v, %v", es, err)
	}
	for _, l := range logs.lines(t) {
		if l["group"] == g && (l["level"] != "WARN" || l["notes"] == nil) {
			t.Errorf("log line without the warning: %v", l)
		}
	}
	out, _ = ctrl.Do(context.Background(), lb.Request{Operator: "alice", Action: lb.ActionDisable, Group: other})
	if out.Entry.Notes != nil || out.Entry.Result != lb.ResultOK {
		t.Errorf("a request not reaching f5: %s, notes %q", out.Entry.Result, out.Entry.Notes)
	}
}

// newF5Client returns another client of srv.
func newF5Client(t *testing.T, srv *f5test.Server) *f5.Client {
	t.Helper()
	c, err := f5.New(f5.Config{Endpoint: srv.URL(), Username: f5test.DefaultUsername, Password: f5test.DefaultPassword, HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestConfigRefusesInsecureTransportsAndUnboundedDrains pins issue 34,
// problem 8, in the configuration: an http:// endpoint is refused unless
// allow_insecure_http says so, ca_file and insecure_skip_verify are not
// accepted together, drain.interval has a floor of 100ms and
// drain.timeout a ceiling of 1h, each a *ConfigError naming the field.
// Before the fix all of these were accepted (drain.interval even at 1ns).
func TestConfigRefusesInsecureTransportsAndUnboundedDrains(t *testing.T) {
	t.Parallel()
	bal := func(c map[string]any) map[string]any { return c["balancers"].(map[string]any)["f5"].(map[string]any) }
	tests := []struct {
		name  string
		edit  func(map[string]any)
		field string // "" when the configuration is valid
		why   string
	}{
		{"http", func(c map[string]any) { bal(c)["endpoint"] = "http://bigip" }, "balancers.f5.endpoint", "allow_insecure_http"},
		{"HTTP upper case", func(c map[string]any) { bal(c)["endpoint"] = "HTTP://bigip" }, "balancers.f5.endpoint", "unencrypted"},
		{"http allowed", func(c map[string]any) { bal(c)["endpoint"] = "http://bigip"; bal(c)["allow_insecure_http"] = true }, "", ""},
		{"https with the flag", func(c map[string]any) { bal(c)["allow_insecure_http"] = true }, "", ""},
		{"skip verify", func(c map[string]any) { bal(c)["insecure_skip_verify"] = true }, "", ""},
		{"skip verify and ca_file", func(c map[string]any) { bal(c)["insecure_skip_verify"] = true; bal(c)["ca_file"] = "/ca.pem" }, "balancers.f5.insecure_skip_verify", "ca_file"},
		{"interval 1ns", func(c map[string]any) { c["drain"] = map[string]any{"interval": "1ns"} }, "drain.interval", "at least 100ms"},
		{"interval 99ms", func(c map[string]any) { c["drain"] = map[string]any{"interval": "99ms"} }, "drain.interval", "at least 100ms"},
		{"interval 100ms", func(c map[string]any) { c["drain"] = map[string]any{"interval": "100ms"} }, "", ""},
		{"timeout 1h", func(c map[string]any) { c["drain"] = map[string]any{"timeout": "1h"} }, "", ""},
		{"timeout 1h1s", func(c map[string]any) { c["drain"] = map[string]any{"timeout": "1h0m1s"} }, "drain.timeout", "at most 1h0m0s"},
		{"timeout 100h", func(c map[string]any) { c["drain"] = map[string]any{"timeout": "100h"} }, "drain.timeout", "at most 1h0m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := valid()
			tt.edit(c)
			b, _ := json.Marshal(c)
			_, err := lb.ParseConfig(strings.NewReader(string(b)))
			if tt.field == "" {
				if err != nil {
					t.Fatalf("ParseConfig = %v, want valid", err)
				}
				return
			}
			ce, ok := errors.AsType[*lb.ConfigError](err)
			if !ok || !errors.Is(err, lb.ErrInvalidConfig) || ce.Field != tt.field || !strings.Contains(err.Error(), tt.why) {
				t.Fatalf("ParseConfig = %v, want a *ConfigError on %s saying %q", err, tt.field, tt.why)
			}
		})
	}
	for _, tt := range []struct {
		b    lb.BalancerConfig
		want string
	}{
		{lb.BalancerConfig{Endpoint: "https://bigip"}, ""},
		{lb.BalancerConfig{Endpoint: "https://bigip", CAFile: "/ca.pem"}, ""},
		{lb.BalancerConfig{Endpoint: "https://bigip", InsecureSkipVerify: true}, "TLS certificate not verified (insecure_skip_verify)"},
		{lb.BalancerConfig{Endpoint: "http://bigip", AllowInsecureHTTP: true}, "plain http (allow_insecure_http)"},
	} {
		if got := tt.b.TransportWarning(); !strings.HasPrefix(got, tt.want) || (tt.want == "") != (got == "") {
			t.Errorf("TransportWarning(%+v) = %q, want %q...", tt.b, got, tt.want)
		}
	}
}
