package lb_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/lb"
)

func TestLoadConfigExample(t *testing.T) {
	t.Parallel()
	cfg, err := lb.LoadConfig("testdata/example.json")
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	if got := cfg.Balancers["f5-prod"]; got.Vendor != "f5" || got.PasswordEnv != "F5_PASSWORD" || time.Duration(got.TokenTimeout) != time.Hour {
		t.Errorf("f5-prod = %+v", got)
	}
	if got := cfg.Groups["payments"][2]; got.Balancer != "a10-prod" || got.Node != "pay-batch-1" || got.Port != 8443 {
		t.Errorf("payments[2] = %+v", got)
	}
	if time.Duration(cfg.Drain.Timeout) != 2*time.Minute || cfg.Drain.Concurrency != 4 {
		t.Errorf("drain = %+v", cfg.Drain)
	}
	ms, err := cfg.Members("payments", "pay-2")
	if err != nil || len(ms) != 1 || ms[0].String() != "f5-prod payments_443/pay-2:443" {
		t.Errorf("Members = %v, %v", ms, err)
	}
	if _, err := cfg.Members("payments", "search-1"); !errors.Is(err, lb.ErrInvalidConfig) {
		t.Errorf("Members with a node of another group = %v, want ErrInvalidConfig", err)
	}
}

// valid returns a minimal valid configuration as JSON-ready data.
func valid() map[string]any {
	return map[string]any{
		"database":  map[string]any{"dsn_env": "DSN"},
		"balancers": map[string]any{"f5": map[string]any{"vendor": "f5", "endpoint": "https://bigip", "username": "u", "password_env": "P"}, "a10": map[string]any{"vendor": "a10", "endpoint": "https://thunder", "username": "u", "password": "p"}},
		"groups":    map[string]any{"web": []any{map[string]any{"balancer": "f5", "pool": "web", "node": "web-1", "port": 80}}},
		"operators": map[string]any{"alice": []any{"web"}},
	}
}

func hooks(ws ...map[string]any) map[string]any {
	var l []any
	for _, w := range ws {
		l = append(l, w)
	}
	return map[string]any{"webhooks": l}
}

func am(url string, matchers map[string]any) map[string]any {
	if matchers == nil {
		matchers = map[string]any{"web": []any{map[string]any{"name": "service", "value": "web"}}}
	}
	return map[string]any{"url": url, "matchers": matchers}
}

func TestParseConfigErrors(t *testing.T) {
	t.Parallel()
	bal := func(c map[string]any) map[string]any { return c["balancers"].(map[string]any)["f5"].(map[string]any) }
	member := func(c map[string]any) map[string]any {
		return c["groups"].(map[string]any)["web"].([]any)[0].(map[string]any)
	}
	tests := []struct {
		name   string
		edit   func(c map[string]any)
		raw    string
		field  string
		reason string
	}{
		{name: "no database", edit: func(c map[string]any) { delete(c, "database") }, field: "database", reason: "exactly one of dsn and dsn_env"},
		{name: "two databases", edit: func(c map[string]any) { c["database"] = map[string]any{"dsn": "x", "dsn_env": "Y"} }, field: "database", reason: "exactly one"},
		{name: "no balancers", edit: func(c map[string]any) { delete(c, "balancers") }, field: "balancers", reason: "at least one"},
		{name: "unknown vendor", edit: func(c map[string]any) { bal(c)["vendor"] = "citrix" }, field: "balancers.f5.vendor", reason: `"citrix"`},
		{name: "endpoint with credentials", edit: func(c map[string]any) { bal(c)["endpoint"] = "https://u:hunter2@bigip" }, field: "balancers.f5.endpoint", reason: "user info"},
		{name: "endpoint without scheme", edit: func(c map[string]any) { bal(c)["endpoint"] = "bigip:443" }, field: "balancers.f5.endpoint", reason: "scheme"},
		{name: "endpoint with path", edit: func(c map[string]any) { bal(c)["endpoint"] = "https://bigip/mgmt" }, field: "balancers.f5.endpoint", reason: "path"},
		{name: "no username", edit: func(c map[string]any) { delete(bal(c), "username") }, field: "balancers.f5.username", reason: "empty"},
		{name: "no password", edit: func(c map[string]any) { delete(bal(c), "password_env") }, field: "balancers.f5.password", reason: "exactly one"},
		{name: "two passwords", edit: func(c map[string]any) { bal(c)["password"] = "x" }, field: "balancers.f5.password", reason: "exactly one"},
		{name: "token timeout too long", edit: func(c map[string]any) { bal(c)["token_timeout"] = "11h" }, field: "balancers.f5.token_timeout", reason: "10h"},
		{name: "bad duration", edit: func(c map[string]any) { bal(c)["timeout"] = "soon" }, reason: `"soon"`},
		{name: "no groups", edit: func(c map[string]any) { delete(c, "groups") }, field: "groups", reason: "at least one"},
		{name: "empty group", edit: func(c map[string]any) { c["groups"] = map[string]any{"web": []any{}} }, field: "groups.web", reason: "no members"},
		{name: "unknown balancer", edit: func(c map[string]any) { member(c)["balancer"] = "nope" }, field: "groups.web.0.balancer", reason: `"nope"`},
		{name: "pool without port", edit: func(c map[string]any) { delete(member(c), "port") }, field: "groups.web.0.pool", reason: "both pool and port"},
		{name: "port out of range", edit: func(c map[string]any) { member(c)["port"] = 70000 }, field: "groups.web.0.port", reason: "65535"},
		{name: "a10 pool", edit: func(c map[string]any) { member(c)["balancer"] = "a10" }, field: "groups.web.0.pool", reason: "service-group"},
		{name: "duplicate member", edit: func(c map[string]any) {
			g := c["groups"].(map[string]any)
			g["web"] = append(g["web"].([]any), g["web"].([]any)[0])
		}, field: "groups.web.1", reason: "duplicate"},
		{name: "operator with unknown group", edit: func(c map[string]any) { c["operators"] = map[string]any{"alice": []any{"nope"}} }, field: "operators.alice", reason: `"nope"`},
		{name: "negative drain timeout", edit: func(c map[string]any) { c["drain"] = map[string]any{"timeout": "-1s"} }, field: "drain.timeout", reason: "negative"},
		{name: "misspelt key", edit: func(c map[string]any) { bal(c)["pasword_env"] = "P" }, reason: "pasword_env"},
		{name: "webhook without name", edit: func(c map[string]any) { c["notify"] = hooks(map[string]any{"format": "teams", "url_env": "U"}) }, field: "notify.webhooks.0.name", reason: "empty"},
		{name: "webhook format", edit: func(c map[string]any) {
			c["notify"] = hooks(map[string]any{"name": "w", "format": "irc", "url_env": "U"})
		}, field: "notify.webhooks.0.format", reason: `"irc"`},
		{name: "webhook two urls", edit: func(c map[string]any) {
			c["notify"] = hooks(map[string]any{"name": "w", "format": "slack", "url_env": "U", "url": "https://hooks.slack.com/services/T/B/hunter2"})
		}, field: "notify.webhooks.0.url", reason: "exactly one"},
		{name: "webhook bad url", edit: func(c map[string]any) {
			c["notify"] = hooks(map[string]any{"name": "w", "format": "json", "url": "hooks/hunter2"})
		}, field: "notify.webhooks.w.url", reason: "absolute"},
		{name: "webhook event", edit: func(c map[string]any) {
			c["notify"] = hooks(map[string]any{"name": "w", "format": "json", "url_env": "U", "events": []any{"exploded"}})
		}, field: "notify.webhooks.0.events", reason: `"exploded"`},
		{name: "webhook group", edit: func(c map[string]any) {
			c["notify"] = hooks(map[string]any{"name": "w", "format": "json", "url_env": "U", "groups": []any{"nope"}})
		}, field: "notify.webhooks.0.groups", reason: `"nope"`},
		{name: "duplicate webhook", edit: func(c map[string]any) {
			w := map[string]any{"name": "w", "format": "json", "url_env": "U"}
			c["notify"] = hooks(w, w)
		}, field: "notify.webhooks.1.name", reason: "duplicate"},
		{name: "alertmanager url", edit: func(c map[string]any) { c["alertmanager"] = am("am:9093", nil) }, field: "alertmanager.url", reason: "scheme"},
		{name: "alertmanager user info", edit: func(c map[string]any) { c["alertmanager"] = am("http://u:hunter2@am", nil) }, field: "alertmanager.url", reason: "user info"},
		{name: "alertmanager unknown group", edit: func(c map[string]any) {
			c["alertmanager"] = am("http://am:9093", map[string]any{"nope": []any{map[string]any{"name": "service", "value": "x"}}})
		}, field: "alertmanager.matchers.nope", reason: "unknown group"},
		{name: "alertmanager label", edit: func(c map[string]any) {
			c["alertmanager"] = am("http://am:9093", map[string]any{"web": []any{map[string]any{"name": "svc-name", "value": "x"}}})
		}, field: "alertmanager.matchers.web.0.name", reason: "label name"},
		{name: "alertmanager regexp", edit: func(c map[string]any) {
			c["alertmanager"] = am("http://am:9093", map[string]any{"web": []any{map[string]any{"name": "svc", "value": "(", "is_regex": true}}})
		}, field: "alertmanager.matchers.web.0.value", reason: "regular expression"},
		{name: "alertmanager silences everything", edit: func(c map[string]any) {
			c["alertmanager"] = am("http://am:9093", map[string]any{"web": []any{map[string]any{"name": "svc", "value": ".*", "is_regex": true}, map[string]any{"name": "env", "value": "prod", "not_equal": true}}})
		}, field: "alertmanager.matchers.web", reason: "every alert"},
		{name: "alertmanager max", edit: func(c map[string]any) {
			c["alertmanager"] = map[string]any{"url": "http://am:9093", "max_duration": "48h", "matchers": map[string]any{}}
		}, field: "alertmanager.max_duration", reason: "24h"},
		{name: "syntax error", raw: `{"database": {`, reason: "bad JSON"},
		{name: "wrong type", raw: `{"database": {"dsn_env": 5}}`, reason: `field "database.dsn_env"`},
		{name: "empty input", raw: ``, reason: "empty input"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			raw := tt.raw
			if tt.edit != nil {
				c := valid()
				tt.edit(c)
				b, _ := json.Marshal(c)
				raw = string(b)
			}
			_, err := lb.ParseConfig(strings.NewReader(raw))
			var ce *lb.ConfigError
			if !errors.As(err, &ce) || !errors.Is(err, lb.ErrInvalidConfig) {
				t.Fatalf("ParseConfig = %v, want a *ConfigError", err)
			}
			if tt.field != "" && ce.Field != tt.field {
				t.Errorf("Field = %q, want %q (error %q)", ce.Field, tt.field, err)
			}
			if !strings.Contains(err.Error(), tt.reason) || !strings.HasPrefix(err.Error(), "lb: invalid ") {
				t.Errorf("error = %q, want it to mention %q", err, tt.reason)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error = %q shows a password", err)
			}
		})
	}
	c := valid()
	b, _ := json.Marshal(c)
	if _, err := lb.ParseConfig(bytes.NewReader(b)); err != nil {
		t.Errorf("the base configuration is invalid: %v", err)
	}
}

func TestSecretNeverPrints(t *testing.T) {
	t.Parallel()
	const pw = "S3cr3t-distinctive-value"
	bc := lb.BalancerConfig{Vendor: "f5", Endpoint: "https://x", Username: "u", Password: pw}
	cfg := lb.Config{Database: lb.DatabaseConfig{DSN: "postgres://u:" + pw + "@db/x"}, Balancers: map[string]lb.BalancerConfig{"b": bc}}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("config", "cfg", cfg, "pw", bc.Password)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("config", "cfg", cfg, "pw", bc.Password)
	js, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	outputs := map[string]string{
		"%v": fmt.Sprintf("%v", cfg), "%+v": fmt.Sprintf("%+v", cfg), "%#v": fmt.Sprintf("%#v", cfg),
		"%s": fmt.Sprintf("%s", bc.Password), "%q": fmt.Sprintf("%q", bc.Password), "%x": fmt.Sprintf("%x", bc.Password),
		"%d": fmt.Sprintf("%d", bc.Password), "json": string(js), "slog": logs.String(),
	}
	for how, out := range outputs {
		if strings.Contains(out, pw) || strings.Contains(out, fmt.Sprintf("%x", pw)) {
			t.Errorf("%s shows the secret: %s", how, out)
		}
		if !strings.Contains(out, lb.Redacted) {
			t.Errorf("%s does not say [REDACTED]: %s", how, out)
		}
	}
	if bc.Password.Reveal() != pw {
		t.Error("Reveal lost the value")
	}
	var back lb.BalancerConfig
	if err := json.Unmarshal([]byte(`{"password":"`+pw+`"}`), &back); err != nil || back.Password.Reveal() != pw {
		t.Errorf("unmarshal: %v, %q", err, back.Password.Reveal())
	}
}

func TestResolveSecrets(t *testing.T) {
	t.Parallel()
	env := map[string]string{"F5_PASSWORD": "from-env"}
	getenv := func(k string) string { return env[k] }
	if pw, err := (lb.BalancerConfig{PasswordEnv: "F5_PASSWORD"}).ResolvePassword(getenv); err != nil || pw.Reveal() != "from-env" {
		t.Errorf("ResolvePassword = %q, %v", pw.Reveal(), err)
	}
	if pw, err := (lb.BalancerConfig{Password: "inline"}).ResolvePassword(getenv); err != nil || pw.Reveal() != "inline" {
		t.Errorf("ResolvePassword = %q, %v", pw.Reveal(), err)
	}
	_, err := (lb.BalancerConfig{PasswordEnv: "A10_PASSWORD"}).ResolvePassword(getenv)
	if !errors.Is(err, lb.ErrInvalidConfig) || !strings.Contains(err.Error(), "A10_PASSWORD is unset or empty") {
		t.Errorf("ResolvePassword of an unset variable = %v", err)
	}
	_, err = (lb.DatabaseConfig{DSNEnv: "NO_DSN"}).ResolveDSN(getenv)
	if !errors.Is(err, lb.ErrInvalidConfig) || !strings.Contains(err.Error(), "NO_DSN") {
		t.Errorf("ResolveDSN of an unset variable = %v", err)
	}
}

func TestPermissions(t *testing.T) {
	t.Parallel()
	p := lb.Permissions{"alice": {"payments", "search"}, "sre": {"*"}, "bob": nil}
	tests := []struct {
		op, group string
		ok        bool
	}{
		{"alice", "payments", true},
		{"alice", "search", true},
		{"alice", "billing", false},
		{"sre", "billing", true},
		{"bob", "payments", false},
		{"mallory", "payments", false},
		{"", "payments", false},
	}
	for _, tt := range tests {
		t.Run(tt.op+"/"+tt.group, func(t *testing.T) {
			err := p.Check(tt.op, tt.group)
			if (err == nil) != tt.ok {
				t.Fatalf("Check = %v, want ok=%v", err, tt.ok)
			}
			if err != nil {
				var pe *lb.NotPermittedError
				if !errors.As(err, &pe) || !errors.Is(err, lb.ErrNotPermitted) || pe.Operator != tt.op || pe.Group != tt.group {
					t.Errorf("error = %#v", err)
				}
			}
		})
	}
	if got := fmt.Sprint(p.Groups("alice")); got != "[payments search]" {
		t.Errorf("Groups = %s", got)
	}
}

func TestAdminStateText(t *testing.T) {
	t.Parallel()
	for _, s := range []lb.AdminState{lb.StateUnknown, lb.Enabled, lb.Disabled, lb.ForcedOffline} {
		b, _ := s.MarshalText()
		var back lb.AdminState
		if err := back.UnmarshalText(b); err != nil || back != s {
			t.Errorf("round trip of %v = %v, %v", s, back, err)
		}
	}
	if _, err := lb.ParseAdminState("sideways"); !errors.Is(err, lb.ErrInvalidConfig) {
		t.Errorf("ParseAdminState = %v", err)
	}
	if s, _ := lb.ParseAdminState("Forced_Offline"); s != lb.ForcedOffline {
		t.Errorf("ParseAdminState(Forced_Offline) = %v", s)
	}
	if got := lb.AdminState(9).String(); got != "AdminState(9)" {
		t.Errorf("String = %q", got)
	}
}

func TestMemberString(t *testing.T) {
	t.Parallel()
	for m, want := range map[lb.Member]string{
		{Pool: "web", Node: "web-1", Port: 80}:   "web/web-1:80",
		{Node: "db-1"}:                           "db-1",
		{Node: "app", Port: 53, Protocol: "udp"}: "app:53/udp",
		{Node: "app", Port: 53, Protocol: "tcp"}: "app:53",
	} {
		if got := m.String(); got != want {
			t.Errorf("%+v.String() = %q, want %q", m, got, want)
		}
	}
}

func TestNotifyAndAlertmanagerSettings(t *testing.T) {
	t.Parallel()
	c := valid()
	c["notify"] = hooks(map[string]any{"name": "ops", "format": "teams", "url_env": "TEAMS", "events": []any{"timed-out"}, "groups": []any{"web"}})
	c["alertmanager"] = am("http://am.example:9093/alertmanager", map[string]any{"web": []any{
		map[string]any{"name": "service", "value": "web"},
		map[string]any{"name": "instance", "value": "web-[0-9]+", "is_regex": true},
		map[string]any{"name": "env", "value": "dev", "not_equal": true},
	}})
	b, _ := json.Marshal(c)
	cfg, err := lb.ParseConfig(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Alertmanager.SilenceMax() != lb.DefaultSilenceMax {
		t.Errorf("SilenceMax = %v", cfg.Alertmanager.SilenceMax())
	}
	var ms []string
	for _, m := range cfg.Alertmanager.Matchers["web"] {
		ms = append(ms, m.String())
	}
	if got := strings.Join(ms, ","); got != `service="web",instance=~"web-[0-9]+",env!="dev"` {
		t.Errorf("matchers = %s", got)
	}
	u, err := cfg.Notify.Webhooks[0].ResolveURL(func(k string) string { return map[string]string{"TEAMS": "https://x.example/hook?sig=hunter2"}[k] })
	if err != nil || u.String() != lb.Redacted || u.Reveal() != "https://x.example/hook?sig=hunter2" {
		t.Errorf("ResolveURL = %v, %v", u, err)
	}
	if _, err := cfg.Notify.Webhooks[0].ResolveURL(func(string) string { return "ftp://x" }); !errors.Is(err, lb.ErrInvalidConfig) || strings.Contains(err.Error(), "ftp://x") {
		t.Errorf("ResolveURL(ftp) = %v", err)
	}
}
