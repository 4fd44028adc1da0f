package main

import (
	"os/user"
	"strings"
	"testing"

	"github.com/holdfast-db/holdfast/lb/a10/a10test"
	"github.com/holdfast-db/holdfast/lb/f5/f5test"
)

// TestOperatorIsAssertedAndTheAuditSaysHow pins issue 34, problem 5, in
// the command: the operator comes from -operator, $HOLDFAST_LB_OPERATOR
// or $USER, whatever the person running it says, so each audit entry
// records which it was, the OS user (looked up, not $USER) and the CI's
// identity variables, never its tokens. Before the fix the entry held the
// name alone.
func TestOperatorIsAssertedAndTheAuditSaysHow(t *testing.T) {
	t.Parallel()
	me, err := user.Current()
	if err != nil {
		t.Skip("no OS user:", err)
	}
	c := newCLI(t, "cli-origin", f5test.Options{}, nil)
	c.members(f5test.Member{Conns: 1}, a10test.Port{})
	c.env["GITHUB_ACTOR"], c.env["GITHUB_RUN_ID"], c.env["GITHUB_TOKEN"] = "octocat", "99", "ghs_never-recorded"
	runs := []struct {
		env  map[string]string
		args []string
		via  string
	}{
		{map[string]string{"USER": "mallory"}, []string{"-operator", "alice", "disable", c.group}, "-operator"},
		{map[string]string{"USER": "mallory", "HOLDFAST_LB_OPERATOR": "alice"}, []string{"enable", c.group}, "$HOLDFAST_LB_OPERATOR"},
		{map[string]string{"USER": "alice"}, []string{"disable", c.group}, "$USER"},
	}
	for _, r := range runs {
		for k, v := range r.env {
			c.env[k] = v
		}
		if code, out, errOut := c.run(t, r.args...); code != exitOK {
			t.Fatalf("%v: exit %d\n%s%s", r.args, code, out, errOut)
		} else if !strings.Contains(errOut, `"operator_via":"`+r.via+`"`) || strings.Contains(errOut, "ghs_never-recorded") {
			t.Errorf("%v: the log line lacks the origin or shows the token:\n%s", r.args, errOut)
		}
		for k := range r.env {
			delete(c.env, k)
		}
	}
	es := c.entries(t)
	if len(es) != len(runs) {
		t.Fatalf("%d entries, want %d", len(es), len(runs))
	}
	for i, r := range runs {
		o := es[len(es)-1-i].Origin
		if o.Via != r.via || o.OSUser != me.Username+" (uid "+me.Uid+")" || o.CI["GITHUB_ACTOR"] != "octocat" || o.CI["GITHUB_RUN_ID"] != "99" || len(o.CI) != 2 {
			t.Errorf("%v: origin %+v, want via %q, the OS user and the two GitHub variables", r.args, o, r.via)
		}
	}
	if _, out, _ := c.run(t, "help"); !strings.Contains(out, "asserted,") || !strings.Contains(out, "not authenticated: the audit records beside it") {
		t.Error("the usage does not say that the operator is asserted")
	}
}

// TestInsecureTransports pins issue 34, problem 8, in the command: an
// http:// endpoint is refused unless allow_insecure_http, before any
// call; an allowed one, or insecure_skip_verify, works with a warning
// when the command starts and a note in every audit entry; -interval,
// -timeout and -poll have the configuration's bounds. Before the fix
// http:// and insecure_skip_verify went unremarked and -interval 1ns ran.
func TestInsecureTransports(t *testing.T) {
	t.Parallel()
	t.Run("http refused", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t, "cli-http-refused", f5test.Options{PlainHTTP: true}, func(cfg map[string]any) {
			delete(cfg["balancers"].(map[string]any)["f5-prod"].(map[string]any), "allow_insecure_http")
		})
		c.members(f5test.Member{Conns: 1}, a10test.Port{})
		code, _, errOut := c.run(t, "-operator", "alice", "disable", c.group)
		if code != exitUsage || !strings.Contains(errOut, "balancers.f5-prod.endpoint: http:// sends the password") || !strings.Contains(errOut, "allow_insecure_http") {
			t.Fatalf("exit %d, want %d refusing http://:\n%s", code, exitUsage, errOut)
		}
		if n := len(c.fakeF5.Requests()); n != 0 {
			t.Errorf("the refused configuration made %d requests", n)
		}
	})
	for _, tt := range []struct {
		name string
		opts f5test.Options
		edit func(map[string]any)
		note string
	}{
		{"http allowed", f5test.Options{PlainHTTP: true}, nil, "balancer f5-prod: plain http (allow_insecure_http)"},
		{"verification off", f5test.Options{}, func(cfg map[string]any) {
			b := cfg["balancers"].(map[string]any)["f5-prod"].(map[string]any)
			delete(b, "ca_file")
			b["insecure_skip_verify"] = true
		}, "balancer f5-prod: TLS certificate not verified (insecure_skip_verify)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t, "cli-insecure", tt.opts, tt.edit)
			c.members(f5test.Member{Conns: 1}, a10test.Port{})
			code, out, errOut := c.run(t, "-operator", "alice", "disable", c.group)
			if code != exitOK {
				t.Fatalf("exit %d\n%s%s", code, out, errOut)
			}
			if !strings.Contains(errOut, `"level":"WARN","msg":"lb balancer transport is not secure","balancer":"f5-prod"`) {
				t.Errorf("no start-up warning:\n%s", errOut)
			}
			es := c.entries(t)
			if len(es) != 1 || len(es[0].Notes) != 1 || !strings.HasPrefix(es[0].Notes[0], tt.note) {
				t.Errorf("audit notes = %+v, want %q", es, tt.note)
			}
			if !strings.Contains(errOut, `"notes":["`+tt.note) {
				t.Errorf("the audit log line lacks the note:\n%s", errOut)
			}
		})
	}
	t.Run("verified", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t, "cli-verified", f5test.Options{}, nil)
		c.members(f5test.Member{Conns: 1}, a10test.Port{})
		code, _, errOut := c.run(t, "-operator", "alice", "disable", c.group)
		if code != exitOK || strings.Contains(errOut, "not secure") || strings.Contains(errOut, `"notes"`) {
			t.Fatalf("exit %d, or a warning for a verified https balancer:\n%s", code, errOut)
		}
		if es := c.entries(t); len(es) != 1 || es[0].Notes != nil {
			t.Errorf("audit = %+v", es)
		}
	})
	t.Run("flag bounds", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t, "cli-bounds", f5test.Options{}, nil)
		for _, tt := range []struct {
			args []string
			want string
		}{
			{[]string{"-operator", "alice", "drain", "-interval", "1ns", c.group}, "invalid -interval: must be at least 100ms"},
			{[]string{"-operator", "alice", "drain", "-timeout", "2h", c.group}, "invalid -timeout: must be at most 1h0m0s"},
			{[]string{"-operator", "alice", "deploy", "-interval", "10ms", c.group, "--", "true"}, "invalid -interval"},
			{[]string{"-operator", "alice", "serve", "-poll", "1ms"}, "invalid -poll: must be at least 100ms"},
		} {
			if code, _, errOut := c.run(t, tt.args...); code != exitUsage || !strings.Contains(errOut, tt.want) {
				t.Errorf("%v: exit %d, want %d with %q:\n%s", tt.args, code, exitUsage, tt.want, errOut)
			}
		}
		if n := len(c.fakeF5.Requests()); n != 0 {
			t.Errorf("refused flags made %d requests", n)
		}
	})
}
