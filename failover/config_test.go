package failover_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/internal/failovermon"
	"github.com/jackc/pgx/v5/pgxpool"
)

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		c     failover.Config
		field string // "" = valid
	}{
		{"zero", failover.Config{}, ""},
		{"template", failover.Config{InstanceTemplate: "?.abc.us-east-1.rds.amazonaws.com"}, ""},
		{"template with port", failover.Config{InstanceTemplate: "?.db.example.internal:6432"}, ""},
		{"negative interval", failover.Config{FastInterval: -1}, "FastInterval"},
		{"negative hold", failover.Config{HoldTimeout: -time.Second}, "HoldTimeout"},
		{"no placeholder", failover.Config{InstanceTemplate: "db.example.internal"}, "InstanceTemplate"},
		{"placeholder not first", failover.Config{InstanceTemplate: "db.?.example"}, "InstanceTemplate"},
		{"two placeholders", failover.Config{InstanceTemplate: "?.?.example"}, "InstanceTemplate"},
		{"alias", failover.Config{Aliases: map[string]string{"db.orders.internal": "orders.cluster-abc.us-east-1.rds.amazonaws.com"}}, ""},
		{"alias of a reader endpoint", failover.Config{Aliases: map[string]string{"ro.orders.internal": "orders.cluster-ro-abc.us-east-1.rds.amazonaws.com"}}, ""},
		{"alias to a name of your own", failover.Config{Aliases: map[string]string{"db.orders.internal": "db.example.com"}}, "Aliases"},
		{"alias to an address", failover.Config{Aliases: map[string]string{"db.orders.internal": "10.0.0.1"}}, "Aliases"},
		{"alias to a URL", failover.Config{Aliases: map[string]string{"db.orders.internal": "postgres://orders.cluster-abc.us-east-1.rds.amazonaws.com"}}, "Aliases"},
		{"empty alias", failover.Config{Aliases: map[string]string{"": "orders.cluster-abc.us-east-1.rds.amazonaws.com"}}, "Aliases"},
		{"follow the writer", failover.Config{InstancePools: failover.FollowWriter}, ""},
		{"pinned", failover.Config{InstancePools: failover.Pinned}, ""},
		{"readers random, hold", failover.Config{Readers: failover.ReaderConfig{Strategy: failover.Random, MaxLag: time.Second, WhenNoReader: failover.Hold}}, ""},
		{"readers bad strategy", failover.Config{Readers: failover.ReaderConfig{Strategy: 7}}, "Readers.Strategy"},
		{"readers bad choice", failover.Config{Readers: failover.ReaderConfig{WhenNoReader: 3}}, "Readers.WhenNoReader"},
		{"readers negative lag", failover.Config{Readers: failover.ReaderConfig{MaxLag: -1}}, "Readers.MaxLag"},
		{"unknown instance mode", failover.Config{InstancePools: 7}, "InstancePools"},
		{"negative instance mode", failover.Config{InstancePools: -1}, "InstancePools"},
		{"an address as alias", failover.Config{Aliases: map[string]string{"10.0.0.1": "orders.cluster-abc.us-east-1.rds.amazonaws.com"}}, "Aliases"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.c.Validate()
			var ce *failover.ConfigError
			switch {
			case tt.field == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tt.field != "" && (!errors.As(err, &ce) || ce.Field != "Config."+tt.field):
				t.Errorf("Validate() = %v, want a *ConfigError for %s", err, tt.field)
			}
		})
	}
}

func TestTemplateFor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		host, template string
		want           string
		port           uint16
		bad            bool
	}{
		{host: "orders.cluster-abc.us-east-1.rds.amazonaws.com", want: "?.abc.us-east-1.rds.amazonaws.com", port: 5432},
		{host: "orders.cluster-ro-abc.us-east-1.rds.amazonaws.com", want: "?.abc.us-east-1.rds.amazonaws.com", port: 5432},
		{host: "Orders-1.ABC.us-east-1.rds.amazonaws.com.", want: "?.abc.us-east-1.rds.amazonaws.com", port: 5432},
		{host: "db.example.com", template: "?.db.example.internal:6432", want: "?.db.example.internal", port: 6432},
		{host: "10.0.0.1", template: "?.Db.Example.Internal", want: "?.db.example.internal", port: 5432},
		{host: "db.example.com", bad: true},
		{host: "10.0.0.1", bad: true},
		{host: "db.example.com", template: "?.x:0", bad: true},
		{host: "db.example.com", template: "?.x:http", bad: true},
	}
	for _, tt := range tests {
		got, port, err := failovermon.TemplateFor(tt.host, 5432, tt.template)
		if tt.bad {
			var ce *failover.ConfigError
			if !errors.As(err, &ce) || ce.Field != "Config.InstanceTemplate" {
				t.Errorf("TemplateFor(%q, %q) = %q, %v; want a *ConfigError", tt.host, tt.template, got, err)
			}
			continue
		}
		if err != nil || got != tt.want || port != tt.port {
			t.Errorf("TemplateFor(%q, %q) = %q, %d, %v; want %q, %d", tt.host, tt.template, got, port, err, tt.want, tt.port)
		}
	}
}

// FuzzTemplateFor: any host and template give a template with one "?"
// as its first label, or a *ConfigError; never a panic.
func FuzzTemplateFor(f *testing.F) {
	for _, s := range [][2]string{{"orders.cluster-abc.us-east-1.rds.amazonaws.com", ""}, {"x", "?.y:1"}, {"10.0.0.1", "?.a"}, {"", ""}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, host, template string) {
		c := failover.Config{InstanceTemplate: template}
		if c.Validate() != nil {
			return
		}
		got, _, err := failovermon.TemplateFor(host, 5432, template)
		var ce *failover.ConfigError
		if err != nil {
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is not a *ConfigError", err)
			}
			return
		}
		if !strings.HasPrefix(got, "?.") || strings.Count(got, "?") != 1 {
			t.Fatalf("TemplateFor(%q, %q) = %q", host, template, got)
		}
	})
}

func TestIsWriterEndpoint(t *testing.T) {
	t.Parallel()
	for host, want := range map[string]bool{
		"orders.cluster-abc.us-east-1.rds.amazonaws.com":        true,
		"ORDERS.CLUSTER-ABC.us-east-1.rds.amazonaws.com.":       true,
		"orders.cluster-ro-abc.us-east-1.rds.amazonaws.com":     false,
		"orders.cluster-custom-abc.us-east-1.rds.amazonaws.com": false,
		"orders-1.abc.us-east-1.rds.amazonaws.com":              false,
		"db.example.com": false,
	} {
		if got := failovermon.IsWriterEndpoint(host); got != want {
			t.Errorf("IsWriterEndpoint(%q) = %v, want %v", host, got, want)
		}
	}
}

func TestRule(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err    error
		class  classify.Class
		reason string
		ok     bool
	}{
		{&failover.HoldError{Host: "h", Err: context.DeadlineExceeded}, classify.Transient, failover.ReasonHeld, true},
		{fmt.Errorf("connect: %w", &failover.HoldError{Host: "h", Err: context.Canceled}), 0, "", false},
		{&failover.NotWriterError{Host: "h", Addr: "a", Why: "in hot standby"}, classify.Transient, failover.ReasonNotWriter, true},
		{fmt.Errorf("query: %w", &failover.CutError{OldWriter: "a", NewWriter: "b", Err: context.DeadlineExceeded}), classify.Transient, failover.ReasonCut, true},
		{errors.New("other"), 0, "", false},
	}
	for _, tt := range tests {
		v, ok := failover.Rule(tt.err)
		if ok != tt.ok || (ok && (v.Class != tt.class || v.Reason != tt.reason)) {
			t.Errorf("Rule(%v) = %v, %v; want %v %q, %v", tt.err, v, ok, tt.class, tt.reason, tt.ok)
		}
	}
}

func TestCutErrorText(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		err  *failover.CutError
		want string
	}{
		{&failover.CutError{OldWriter: "db-1", NewWriter: "db-2", Addr: "10.0.0.1:5432"},
			"failover: connection to the old writer db-1 (10.0.0.1:5432) closed: the cluster failed over to db-2 (a transaction open on it was rolled back)"},
		{&failover.CutError{Left: "db-3", Addr: "10.0.0.3:5432"},
			"failover: connection to db-3 (10.0.0.3:5432) closed: the instance left the cluster's topology (a transaction open on it was rolled back)"},
		{&failover.CutError{Down: "db-2", Why: "timeout", Addr: "10.0.0.2:5432"},
			"failover: connection to 10.0.0.2:5432 closed: reader db-2 down (timeout), it stopped answering (a transaction open on it was rolled back)"},
	} {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

func TestErrorsSafeToRetry(t *testing.T) {
	t.Parallel()
	for _, err := range []interface{ SafeToRetry() bool }{&failover.HoldError{}, &failover.NotWriterError{}} {
		if !err.SafeToRetry() {
			t.Errorf("%T.SafeToRetry() = false", err)
		}
	}
}

// The defaults bound how long a dead writer goes unnoticed.
func ExampleConfig_WithDefaults() {
	c, _ := failover.Config{}.WithDefaults()
	fmt.Println("refresh", c.RefreshInterval, "fast", c.FastInterval, "for", c.FastFor)
	fmt.Println("detection", c.HeartbeatInterval+2*c.FailureTimeout, "hold", c.HoldTimeout)
	// Output:
	// refresh 30s fast 100ms for 30s
	// detection 1s hold 30s
}

// TemplateFor gives the instance endpoints of the cluster a pool's host
// belongs to.
func TestTemplateForExample(t *testing.T) {
	tmpl, port, _ := failovermon.TemplateFor("orders.cluster-abc123.us-east-1.rds.amazonaws.com", 5432, "")
	if tmpl != "?.abc123.us-east-1.rds.amazonaws.com" || port != 5432 {
		t.Errorf("TemplateFor = %q, %d", tmpl, port)
	}
	if _, _, err := failovermon.TemplateFor("db.internal.example.com", 5432, ""); err == nil {
		t.Error("a name of your own without a template")
	}
}

// A name of your own for the cluster endpoint is routed as the endpoint.
func ExampleConfig_Endpoint() {
	c := failover.Config{Aliases: map[string]string{
		"db.orders.internal": "orders.cluster-abc123.us-east-1.rds.amazonaws.com",
	}}
	fmt.Println(c.Endpoint("db.orders.internal"))
	fmt.Println(c.Endpoint("db.billing.internal"))
	// Output:
	// orders.cluster-abc123.us-east-1.rds.amazonaws.com
	// db.billing.internal
}

// A pool on a host whose instance endpoints cannot be derived (an IP
// address, a name of your own) is refused at Configure unless the
// template is given: misconfiguration is never silent.
func TestConfigureNeedsTemplate(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		host, template string
		ok             bool
	}{
		{"orders.cluster-abc.us-east-1.rds.amazonaws.com", "", true},
		{"10.0.0.1", "", false},
		{"db.internal.example.com", "", false},
		{"db.internal.example.com", "?.db.internal.example.com", true},
	} {
		f, err := holdfast.New(holdfast.WithFailover(failover.Config{InstanceTemplate: tt.template}))
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := pgxpool.ParseConfig("postgres://u@" + tt.host + ":5432/db")
		if err != nil {
			t.Fatal(err)
		}
		err = f.Configure(cfg)
		var ce *holdfast.ConfigError
		switch {
		case tt.ok && err != nil:
			t.Errorf("Configure(%s, template %q) = %v, want nil", tt.host, tt.template, err)
		case !tt.ok && (!errors.As(err, &ce) || ce.Field != "WithFailover"):
			t.Errorf("Configure(%s) = %v, want a *holdfast.ConfigError for WithFailover", tt.host, err)
		}
		f.Close()
	}
	if _, err := holdfast.New(holdfast.WithFailover(failover.Config{HoldTimeout: -1})); !errors.Is(err, holdfast.ErrInvalidConfig) {
		t.Errorf("New with a negative HoldTimeout: %v, want ErrInvalidConfig", err)
	}
}

func TestConfigEndpoint(t *testing.T) {
	t.Parallel()
	c := failover.Config{Aliases: map[string]string{"DB.Orders.Internal.": "Orders.Cluster-ABC.us-east-1.rds.amazonaws.com"}}
	for host, want := range map[string]string{
		"db.orders.internal": "orders.cluster-abc.us-east-1.rds.amazonaws.com",
		"db.ORDERS.internal": "orders.cluster-abc.us-east-1.rds.amazonaws.com",
		"other.internal":     "other.internal",
		"10.0.0.1":           "10.0.0.1",
	} {
		if got := c.Endpoint(host); got != want {
			t.Errorf("Endpoint(%q) = %q, want %q", host, got, want)
		}
	}
}
