package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast/lb"
	"github.com/holdfast-db/holdfast/lb/a10/a10test"
	"github.com/holdfast-db/holdfast/lb/f5/f5test"
	"github.com/holdfast-db/holdfast/lb/internal/pgtest"
)

type cli struct {
	group   string
	fakeF5  *f5test.Server
	fakeA10 *a10test.Server
	f5CA    string // the F5 fake's certificate, its ca_file
	config  string
	env     map[string]string
	dsn     string
}

// caFile writes pem to a file of dir and returns its path.
func caFile(t *testing.T, dir, name string, pem []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, pem, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// newCLI writes a configuration for one group (two F5 pool members and an
// A10 server port) on fresh fakes; edit may change it.
func newCLI(t *testing.T, group string, f5opts f5test.Options, edit func(map[string]any)) *cli {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	group += "-" + hex.EncodeToString(b) // reruns and a shared PGTEST_DSN must not share groups
	c := &cli{group: group, fakeF5: f5test.New(f5opts), fakeA10: a10test.New(a10test.Options{}), dsn: pgtest.DSN(t)}
	t.Cleanup(c.fakeF5.Close)
	t.Cleanup(c.fakeA10.Close)
	dir := t.TempDir()
	// The fakes serve TLS with certificates of their own, which the
	// configuration verifies through ca_file, as for a device.
	f5Endpoint := map[string]any{"vendor": "f5", "endpoint": c.fakeF5.URL(), "username": "admin", "password_env": "F5_PASSWORD"}
	if pem := c.fakeF5.CertificatePEM(); pem != nil {
		c.f5CA = caFile(t, dir, "f5-ca.pem", pem)
		f5Endpoint["ca_file"] = c.f5CA
	} else {
		f5Endpoint["allow_insecure_http"] = true
	}
	cfg := map[string]any{
		"database": map[string]any{"dsn_env": "HOLDFAST_LB_DSN"},
		"balancers": map[string]any{
			"f5-prod":  f5Endpoint,
			"a10-prod": map[string]any{"vendor": "a10", "endpoint": c.fakeA10.URL(), "username": "admin", "password_env": "A10_PASSWORD", "ca_file": caFile(t, dir, "a10-ca.pem", c.fakeA10.CertificatePEM())},
		},
		"groups": map[string]any{group: []any{
			map[string]any{"balancer": "f5-prod", "pool": "web", "node": "web-1", "port": 80},
			map[string]any{"balancer": "f5-prod", "pool": "web", "node": "web-2", "port": 80},
			map[string]any{"balancer": "a10-prod", "node": "app-1", "port": 8080},
		}},
		"operators": map[string]any{"alice": []any{group}, "bob": []any{}},
		"drain":     map[string]any{"interval": "100ms", "timeout": "5s", "concurrency": 2}, // the floor: lb.MinDrainInterval
	}
	if edit != nil {
		edit(cfg)
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	c.config = filepath.Join(dir, "lb.json")
	if err := os.WriteFile(c.config, b, 0o600); err != nil {
		t.Fatal(err)
	}
	c.env = map[string]string{"HOLDFAST_LB_DSN": c.dsn, "F5_PASSWORD": f5test.DefaultPassword, "A10_PASSWORD": a10test.DefaultPassword, "HOLDFAST_LB_CONFIG": c.config}
	return c
}

func (c *cli) members(f5 f5test.Member, a10 a10test.Port) {
	c.fakeF5.AddPoolMember("web", "web-1:80", f5)
	c.fakeF5.AddPoolMember("web", "web-2:80", f5)
	a10.Number = 8080
	c.fakeA10.AddServer("app-1", a10test.Real{Ports: []a10test.Port{a10}})
}

func (c *cli) run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, func(k string) string { return c.env[k] }, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestPipelineDrainDeployEnable(t *testing.T) {
	t.Parallel()
	c := newCLI(t, "cli-pipeline", f5test.Options{}, nil)
	c.members(f5test.Member{Conns: 8, Decay: []int64{5, 2, 0}}, a10test.Port{Conns: 3, Decay: []int64{1, 0}})

	code, out, errOut := c.run(t, "-operator", "alice", "drain", c.group)
	if code != exitOK {
		t.Fatalf("drain exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "ok: drain "+c.group+": 3 members") || !strings.Contains(out, "drained in") {
		t.Errorf("stdout:\n%s", out)
	}
	// A progress line while waiting (one per change: not a terminal).
	if !strings.Contains(errOut, "drain "+c.group+": 3 of 3 members in use") || !strings.Contains(errOut, "0 of 3 members in use, 0 current connections") {
		t.Errorf("no progress lines in stderr:\n%s", errOut)
	}
	// The structured audit line.
	var audit map[string]any
	for _, l := range strings.Split(errOut, "\n") {
		if strings.Contains(l, `"msg":"lb control"`) {
			if err := json.Unmarshal([]byte(l), &audit); err != nil {
				t.Fatal(err)
			}
		}
	}
	if audit["result"] != "ok" || audit["operator"] != "alice" || audit["action"] != "drain" {
		t.Errorf("audit line = %v", audit)
	}
	for _, n := range []string{"web-1:80", "web-2:80"} {
		if st, _ := c.fakeF5.MemberState("web", n); st.State != "user-down" {
			t.Errorf("%s = %+v, want forced offline", n, st)
		}
	}

	// ... deploy ..., then enable.
	c.env["HOLDFAST_LB_OPERATOR"] = "alice"
	if code, out, errOut := c.run(t, "enable", c.group); code != exitOK {
		t.Fatalf("enable exit %d\n%s\n%s", code, out, errOut)
	}
	if a, _ := c.fakeA10.Action("app-1", 8080); a != "enable" {
		t.Errorf("app-1:8080 = %q after enable", a)
	}
	code, out, _ = c.run(t, "status", c.group)
	if code != exitOK || strings.Count(out, "Enabled") != 3 || !strings.Contains(out, "group "+c.group+": not locked") {
		t.Errorf("status exit %d:\n%s", code, out)
	}
	// Two audit rows: the drain and the enable.
	pool, err := pgxpool.New(context.Background(), c.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	store, err := lb.NewPGStore(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := store.Entries(context.Background(), c.group, 0)
	if err != nil || len(entries) != 2 || entries[1].Action != lb.ActionDrain || entries[0].Action != lb.ActionEnable || entries[1].Members[0].FirstConns != 5 {
		t.Errorf("audit rows = %+v, %v", entries, err)
	}
}

func TestDrainTimeoutExitsNonZero(t *testing.T) {
	t.Parallel()
	c := newCLI(t, "cli-timeout", f5test.Options{}, nil)
	c.members(f5test.Member{Conns: 8, Decay: []int64{5, 2}}, a10test.Port{Conns: 3, Decay: []int64{0}})
	code, out, errOut := c.run(t, "-operator", "alice", "drain", "-timeout", "150ms", c.group)
	if code != exitNotDrained {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitNotDrained, out, errOut)
	}
	if !strings.Contains(errOut, "NOT DRAINED") || !strings.Contains(errOut, "web/web-1:80 not drained: 2 current connections after 150ms") || !strings.Contains(errOut, "abort the deploy") {
		t.Errorf("stderr:\n%s", errOut)
	}
	if !strings.Contains(out, "NOT DRAINED after") {
		t.Errorf("stdout:\n%s", out)
	}
}

func TestDrainRestoreOnFailure(t *testing.T) {
	t.Parallel()
	c := newCLI(t, "cli-restore", f5test.Options{}, nil)
	c.members(f5test.Member{Conns: 8, Decay: []int64{2}}, a10test.Port{Conns: 3, Decay: []int64{0}})
	code, _, errOut := c.run(t, "-operator", "alice", "drain", "-timeout", "100ms", "-restore-on-failure", c.group)
	if code != exitNotDrained {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	if st, _ := c.fakeF5.MemberState("web", "web-1:80"); st.Session != "user-enabled" {
		t.Errorf("web-1 = %+v, want restored", st)
	}
	if a, _ := c.fakeA10.Action("app-1", 8080); a != "enable" {
		t.Errorf("app-1 = %q, want restored", a)
	}
}

func TestRefusedBeforeAnyCall(t *testing.T) {
	t.Parallel()
	c := newCLI(t, "cli-refused", f5test.Options{}, nil)
	c.members(f5test.Member{Conns: 1}, a10test.Port{})
	code, _, errOut := c.run(t, "-operator", "bob", "disable", c.group)
	if code != exitRefused || !strings.Contains(errOut, `operator "bob" may not control group "`+c.group+`"`) {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	if n := len(c.fakeF5.Requests()) + len(c.fakeA10.Requests()); n != 0 {
		t.Errorf("the balancers saw %d requests, want 0", n)
	}
}

func TestLockedGroupNamesTheHolder(t *testing.T) {
	t.Parallel()
	c := newCLI(t, "cli-locked", f5test.Options{}, nil)
	c.members(f5test.Member{Conns: 1}, a10test.Port{})
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, c.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	store, err := lb.NewPGStore(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	lease, err := store.Lock(ctx, c.group, "carol")
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)
	code, _, errOut := c.run(t, "-operator", "alice", "drain", c.group)
	if code != exitRefused || !strings.Contains(errOut, "locked by carol@") {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	code, out, _ := c.run(t, "status", c.group)
	if code != exitOK || !strings.Contains(out, "group "+c.group+": locked by carol@") {
		t.Errorf("status exit %d:\n%s", code, out)
	}
}

func TestStatusShowsPhasesAndConnections(t *testing.T) {
	t.Parallel()
	c := newCLI(t, "cli-status", f5test.Options{}, nil)
	c.fakeF5.AddPoolMember("web", "web-1:80", f5test.Member{Conns: 7})
	c.fakeF5.AddPoolMember("web", "web-2:80", f5test.Member{Conns: 7, Decay: []int64{3}})
	c.fakeA10.AddServer("app-1", a10test.Real{Ports: []a10test.Port{{Number: 8080, Conns: 2, StatsDisabled: true}}})
	if code, _, errOut := c.run(t, "-operator", "alice", "forced-offline", "-node", "web-2", c.group); code != exitOK {
		t.Fatalf("forced-offline exit %d\n%s", code, errOut)
	}
	code, out, errOut := c.run(t, "status", c.group)
	if code != exitOK {
		t.Fatalf("status exit %d\n%s", code, errOut)
	}
	for _, want := range []string{
		"group " + c.group + ": not locked",
		"BALANCER  MEMBER",
		"f5-prod   web/web-1:80  Enabled    enabled",
		"f5-prod   web/web-2:80  Disabling  forced-offline",
		"stats off",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status output lacks %q:\n%s", want, out)
		}
	}
}

func TestUsageAndConfigErrors(t *testing.T) {
	t.Parallel()
	c := newCLI(t, "cli-usage", f5test.Options{}, nil)
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"database":{"dsn_env":"X"},"balancers":{"b":{"vendor":"f5","endpoint":"https://u:hunter2@x","username":"u","password":"p"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		env  map[string]string
		args []string
		code int
		want string
	}{
		{"help", nil, []string{"help"}, exitOK, "Exit codes:"},
		{"-h", nil, []string{"-h"}, exitOK, "Usage: holdfast-lb"},
		{"no command", nil, nil, exitUsage, "no command"},
		{"unknown command", nil, []string{"reboot", c.group}, exitUsage, `unknown command "reboot"`},
		{"no group", nil, []string{"-operator", "alice", "drain"}, exitUsage, "want exactly one GROUP"},
		{"unknown group", nil, []string{"-operator", "alice", "drain", "nope"}, exitUsage, `unknown group "nope"`},
		{"bad flag", nil, []string{"drain", "-timeout", "soon", c.group}, exitUsage, "invalid value"},
		{"no config", map[string]string{"HOLDFAST_LB_CONFIG": ""}, []string{"status", c.group}, exitUsage, "no configuration"},
		{"bad config", nil, []string{"-config", bad, "status", c.group}, exitUsage, "balancers.b.endpoint: must not hold user info"},
		{"missing password variable", map[string]string{"F5_PASSWORD": ""}, []string{"-operator", "alice", "drain", c.group}, exitUsage, "F5_PASSWORD is unset or empty"},
		{"no operator", map[string]string{"USER": ""}, []string{"drain", c.group}, exitUsage, "no operator"},
		{"check-config", nil, []string{"check-config"}, exitOK, "ok: 2 balancers, 1 groups, 2 operators"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range c.env {
				env[k] = v
			}
			for k, v := range tt.env {
				env[k] = v
			}
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tt.args, func(k string) string { return env[k] }, &stdout, &stderr)
			all := stdout.String() + stderr.String()
			if code != tt.code || !strings.Contains(all, tt.want) {
				t.Fatalf("exit %d, want %d with %q:\n%s", code, tt.code, tt.want, all)
			}
			if strings.Contains(all, "hunter2") {
				t.Errorf("output shows a password:\n%s", all)
			}
		})
	}
	if n := len(c.fakeF5.Requests()); n != 0 {
		t.Errorf("usage errors made %d balancer requests", n)
	}
}

func TestSecretsNeverPrinted(t *testing.T) {
	t.Parallel()
	const secret = "Vq3-extremely-distinctive-pw"
	c := newCLI(t, "cli-secret", f5test.Options{EchoBody: true}, nil)
	c.members(f5test.Member{Conns: 1}, a10test.Port{})
	c.env["F5_PASSWORD"] = secret // the fake expects another one, and echoes the login body
	code, out, errOut := c.run(t, "-operator", "alice", "drain", c.group)
	if code != exitFailed {
		t.Fatalf("exit %d, want %d\n%s\n%s", code, exitFailed, out, errOut)
	}
	if !strings.Contains(errOut, "authentication failed") {
		t.Errorf("stderr does not say why:\n%s", errOut)
	}
	if strings.Contains(out+errOut, secret) {
		t.Errorf("the password was printed:\n%s\n%s", out, errOut)
	}
	if !strings.Contains(errOut, lb.Redacted) {
		t.Errorf("expected the echoed password to show as %s:\n%s", lb.Redacted, errOut)
	}
	code, out, errOut = c.run(t, "status", c.group)
	if code != exitFailed || strings.Contains(out+errOut, secret) {
		t.Errorf("status exit %d, output:\n%s\n%s", code, out, errOut)
	}
}
