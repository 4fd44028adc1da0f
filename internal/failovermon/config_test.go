package failovermon_test

import (
	"errors"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/internal/cfgerr"
	"github.com/holdfast-db/holdfast/internal/failovermon"
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
		{"readers random, hold", failover.Config{Readers: failover.ReaderConfig{Strategy: failover.Random, MaxLag: time.Second, Hold: true}}, ""},
		{"readers bad strategy", failover.Config{Readers: failover.ReaderConfig{Strategy: 7}}, "Readers.Strategy"},
		{"readers negative strategy", failover.Config{Readers: failover.ReaderConfig{Strategy: -1}}, "Readers.Strategy"},
		{"readers negative lag", failover.Config{Readers: failover.ReaderConfig{MaxLag: -1}}, "Readers.MaxLag"},
		{"readers negative hold", failover.Config{Readers: failover.ReaderConfig{HoldTimeout: -1}}, "Readers.HoldTimeout"},
		{"readers negative refresh", failover.Config{Readers: failover.ReaderConfig{RefreshInterval: -1}}, "Readers.RefreshInterval"},
		{"unknown instance mode", failover.Config{InstancePools: 7}, "InstancePools"},
		{"negative instance mode", failover.Config{InstancePools: -1}, "InstancePools"},
		{"an address as alias", failover.Config{Aliases: map[string]string{"10.0.0.1": "orders.cluster-abc.us-east-1.rds.amazonaws.com"}}, "Aliases"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := failovermon.Validate(tt.c)
			var ce *cfgerr.Error
			switch {
			case tt.field == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tt.field != "" && (!errors.As(err, &ce) || ce.Field != "Config."+tt.field || ce.Pkg != "failover"):
				t.Errorf("Validate() = %v, want a failover *ConfigError for %s", err, tt.field)
			}
			if _, derr := failovermon.WithDefaults(tt.c); (derr == nil) != (err == nil) {
				t.Errorf("WithDefaults() = %v, Validate() = %v: want the same verdict", derr, err)
			}
		})
	}
}

// TestDefaultsDocumented: WithDefaults gives every zero field of a
// failover.Config the default that the table in Config's doc lists, and
// the table lists every default.
func TestDefaultsDocumented(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("../../failover/config.go")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`^//\t([A-Z][A-Za-z.]+)\s+(\d+) (s|ms)\b`)
	doc := map[string]time.Duration{}
	for _, line := range strings.Split(string(src), "\n") {
		if m := row.FindStringSubmatch(line); m != nil {
			d, err := time.ParseDuration(m[2] + m[3])
			if err != nil {
				t.Fatal(err)
			}
			doc[m[1]] = d
		}
	}
	c, err := failovermon.WithDefaults(failover.Config{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]time.Duration{}
	var walk func(prefix string, v reflect.Value)
	walk = func(prefix string, v reflect.Value) {
		for i := range v.NumField() {
			f, fv := v.Type().Field(i), v.Field(i)
			switch {
			case f.Type == reflect.TypeFor[time.Duration]() && fv.Int() != 0:
				got[prefix+f.Name] = time.Duration(fv.Int())
			case f.Type.Kind() == reflect.Struct:
				walk(prefix+f.Name+".", fv)
			}
		}
	}
	walk("", reflect.ValueOf(c))
	if !reflect.DeepEqual(doc, got) {
		t.Errorf("failover.Config's doc lists the defaults\n%v\nWithDefaults gives\n%v", doc, got)
	}
	if len(got) != 9 {
		t.Errorf("%d defaulted durations, want 9: %v", len(got), got)
	}
	// The detection bound the doc states.
	if d := c.HeartbeatInterval + 2*c.FailureTimeout; d != time.Second {
		t.Errorf("HeartbeatInterval + 2×FailureTimeout = %v, want 1s", d)
	}
	if c.Logger == nil {
		t.Error("no default Logger")
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
			var ce *cfgerr.Error
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
		if failovermon.Validate(failover.Config{InstanceTemplate: template}) != nil {
			return
		}
		got, _, err := failovermon.TemplateFor(host, 5432, template)
		var ce *cfgerr.Error
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

// TestEndpoint: a name of your own for an RDS endpoint (Config.Aliases)
// stands for the endpoint, whatever its case and trailing dot; any other
// host stands for itself.
func TestEndpoint(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		aliases    map[string]string
		host, want string
	}{
		{map[string]string{"DB.Orders.Internal.": "Orders.Cluster-ABC.us-east-1.rds.amazonaws.com"}, "db.orders.internal", "orders.cluster-abc.us-east-1.rds.amazonaws.com"},
		{map[string]string{"DB.Orders.Internal.": "Orders.Cluster-ABC.us-east-1.rds.amazonaws.com"}, "db.ORDERS.internal", "orders.cluster-abc.us-east-1.rds.amazonaws.com"},
		{map[string]string{"DB.Orders.Internal.": "Orders.Cluster-ABC.us-east-1.rds.amazonaws.com"}, "other.internal", "other.internal"},
		{map[string]string{"DB.Orders.Internal.": "Orders.Cluster-ABC.us-east-1.rds.amazonaws.com"}, "10.0.0.1", "10.0.0.1"},
		{map[string]string{"db.orders.internal": "orders.cluster-abc123.us-east-1.rds.amazonaws.com"}, "db.orders.internal", "orders.cluster-abc123.us-east-1.rds.amazonaws.com"},
		{map[string]string{"db.orders.internal": "orders.cluster-abc123.us-east-1.rds.amazonaws.com"}, "db.billing.internal", "db.billing.internal"},
		{nil, "db.billing.internal", "db.billing.internal"},
	} {
		if got := failovermon.Endpoint(tt.aliases, tt.host); got != tt.want {
			t.Errorf("Endpoint(%v, %q) = %q, want %q", tt.aliases, tt.host, got, tt.want)
		}
	}
}

// TestGlobalRegions: Config.Global.Regions takes a Region's RDS endpoint
// or an instance template; a key that is no Region's name, a global or
// proxy endpoint, or a name of your own without "?" is a config error.
func TestGlobalRegions(t *testing.T) {
	ok := failover.Config{Global: failover.GlobalConfig{Regions: map[string]string{
		"us-west-2": "orders.cluster-def456.us-west-2.rds.amazonaws.com",
		"eu-west-1": "?.db.eu-west-1.example.internal",
	}}}
	if err := failovermon.Validate(ok); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	alias := ok
	alias.Aliases = map[string]string{"db.orders.internal": "orders.global-abc123def456.global.rds.amazonaws.com"}
	if err := failovermon.Validate(alias); err != nil {
		t.Errorf("Validate(an alias of a global writer endpoint): %v", err)
	}
	got, err := failovermon.RegionTemplates(ok, "orders.cluster-abc123.us-east-1.rds.amazonaws.com", "?.abc123.us-east-1.rds.amazonaws.com")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"us-east-1": "?.abc123.us-east-1.rds.amazonaws.com",
		"us-west-2": "?.def456.us-west-2.rds.amazonaws.com",
		"eu-west-1": "?.db.eu-west-1.example.internal",
	}
	if len(got) != len(want) {
		t.Fatalf("RegionTemplates = %v; want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("RegionTemplates[%s] = %q; want %q", k, got[k], v)
		}
	}
	for _, bad := range []map[string]string{
		{"uswest2": "orders.cluster-def456.us-west-2.rds.amazonaws.com"},
		{"us-west-2": "orders.global-abc.global.rds.amazonaws.com"},
		{"us-west-2": "db.us-west-2.example.internal"},
		{"us-west-2": "??.x"},
	} {
		err := failovermon.Validate(failover.Config{Global: failover.GlobalConfig{Regions: bad}})
		var ce *cfgerr.Error
		if !errors.As(err, &ce) || ce.Field != "Config.Global.Regions" {
			t.Errorf("Validate(%v) = %v; want a config error naming Config.Global.Regions", bad, err)
		}
	}
	if routed, _ := failovermon.RoutedKind("orders.global-abc.global.rds.amazonaws.com", failover.Config{}); routed {
		t.Error("a global writer endpoint routed without Global.Regions")
	}
	if routed, why := failovermon.RoutedKind("orders.global-abc.global.rds.amazonaws.com", ok); !routed {
		t.Errorf("a global writer endpoint with Global.Regions not routed: %s", why)
	}
}

// TestHomeRegionConfig: HomeRegion and AccessibleRegions are Regions'
// names, the home among the accessible ones, OutOfHome one of the modes.
func TestHomeRegionConfig(t *testing.T) {
	good := failover.GlobalConfig{HomeRegion: "us-east-1", OutOfHome: failover.OutOfHomeReadOnly, AccessibleRegions: []string{"us-east-1", "eu-west-1"}}
	if err := failovermon.Validate(failover.Config{Global: good}); err != nil {
		t.Fatalf("Validate(%+v): %v", good, err)
	}
	for field, g := range map[string]failover.GlobalConfig{
		"Config.Global.HomeRegion":        {HomeRegion: "east"},
		"Config.Global.OutOfHome":         {OutOfHome: 7},
		"Config.Global.AccessibleRegions": {HomeRegion: "us-east-1", AccessibleRegions: []string{"eu-west-1"}},
	} {
		err := failovermon.Validate(failover.Config{Global: g})
		var ce *cfgerr.Error
		if !errors.As(err, &ce) || ce.Field != field {
			t.Errorf("Validate(%+v) = %v; want a config error naming %s", g, err, field)
		}
	}
	bad := failover.GlobalConfig{AccessibleRegions: []string{"nowhere"}}
	if err := failovermon.Validate(failover.Config{Global: bad}); err == nil {
		t.Errorf("Validate(%+v) = nil; want an error", bad)
	}
}

// TestGlobalClusterKey: a pool on a global writer endpoint needs no
// template (each Region's comes from Global.Regions), and its monitor is
// never a Region's cluster's: a global cluster beside a plain Aurora
// cluster of the same name and Region shares no monitor.
func TestGlobalClusterKey(t *testing.T) {
	const global = "orders.global-abc123def456.global.rds.amazonaws.com"
	tmpl, port, err := failovermon.TemplateFor(global, 5432, "")
	if err != nil || tmpl != "" || port != 5432 {
		t.Fatalf("TemplateFor(%s) = %q, %d, %v; want no template", global, tmpl, port, err)
	}
	regional := "orders.cluster-abc123.us-east-1.rds.amazonaws.com"
	rt, _, _ := failovermon.TemplateFor(regional, 5432, "")
	if a, b := failovermon.ClusterKey(global, tmpl, port), failovermon.ClusterKey(regional, rt, 5432); a == b {
		t.Errorf("ClusterKey: the global endpoint and a Region's cluster endpoint share %q", a)
	}
}
