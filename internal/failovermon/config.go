package failovermon

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/internal/cfgerr"
	"github.com/holdfast-db/holdfast/internal/topology"
)

// The defaults of failover.Config, as its doc's table lists them
// (TestDefaultsDocumented holds the two equal).
const (
	defaultRefreshInterval   = 30 * time.Second
	defaultFastInterval      = 100 * time.Millisecond
	defaultFastFor           = 30 * time.Second
	defaultHeartbeatInterval = 200 * time.Millisecond
	defaultFailureTimeout    = 400 * time.Millisecond
	defaultHoldTimeout       = 30 * time.Second
	defaultConnectTimeout    = 5 * time.Second
	defaultReaderRefresh     = 5 * time.Second // the reader endpoint's own TTL
	defaultReaderHold        = 5 * time.Second
)

// The names of the events of a Monitor's timeline (failover.Event.Name
// documents them).
const (
	EventSuspect        = "suspect"
	EventWriterDown     = "writer down"
	EventWriterBack     = "writer back"
	EventNewWriter      = "new writer"
	EventDNSAgrees      = "DNS agrees"
	EventLeft           = "instance left"
	EventReaderDown     = "reader down"
	EventReaderBack     = "reader back"
	EventReaderLagging  = "reader lagging"
	EventReaderCaughtUp = "reader caught up"
	// A global cluster's writer moved to another Region.
	EventRegionSwitchover = "region switchover"
	EventRegionFailover   = "region failover"
)

// configError is a *cfgerr.Error of package failover.
func configError(field, why string) error {
	return &cfgerr.Error{Pkg: "failover", Field: field, Why: why}
}

// Validate reports the first invalid field of c as a *cfgerr.Error
// (holdfast.ConfigError) naming it ("Config.HoldTimeout").
func Validate(c failover.Config) error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"RefreshInterval", c.RefreshInterval}, {"FastInterval", c.FastInterval}, {"FastFor", c.FastFor},
		{"HeartbeatInterval", c.HeartbeatInterval}, {"FailureTimeout", c.FailureTimeout},
		{"HoldTimeout", c.HoldTimeout}, {"ConnectTimeout", c.ConnectTimeout},
	} {
		if d.v < 0 {
			return configError("Config."+d.name, "negative")
		}
	}
	if err := ValidateMode(c.InstancePools, "Config.InstancePools"); err != nil {
		return err
	}
	if err := validateReaders(c.Readers); err != nil {
		return err
	}
	if t := c.InstanceTemplate; t != "" {
		if _, _, why := topology.ParseTemplate(t); why != "" {
			return configError("Config.InstanceTemplate", why)
		}
	}
	if h := c.Global.HomeRegion; h != "" && !topology.IsRegion(h) {
		return configError("Config.Global.HomeRegion", fmt.Sprintf("%q: want an AWS Region's name, e.g. \"us-east-1\"", h))
	}
	if m := c.Global.OutOfHome; m < failover.OutOfHomeFollow || m > failover.OutOfHomeHold {
		return configError("Config.Global.OutOfHome", fmt.Sprintf("%d: want failover.OutOfHomeFollow, OutOfHomeReadOnly or OutOfHomeHold", int(m)))
	}
	for _, r := range c.Global.AccessibleRegions {
		if !topology.IsRegion(r) {
			return configError("Config.Global.AccessibleRegions", fmt.Sprintf("%q: want an AWS Region's name, e.g. \"us-east-1\"", r))
		}
	}
	if h := c.Global.HomeRegion; h != "" && len(c.Global.AccessibleRegions) > 0 && !slices.Contains(c.Global.AccessibleRegions, h) {
		return configError("Config.Global.AccessibleRegions", fmt.Sprintf("%v: want the home Region %q among them", c.Global.AccessibleRegions, h))
	}
	for region, v := range c.Global.Regions {
		if !topology.IsRegion(strings.ToLower(strings.TrimSpace(region))) {
			return configError("Config.Global.Regions", fmt.Sprintf("%q: want an AWS Region's name, e.g. \"us-west-2\"", region))
		}
		if _, err := regionTemplate(v); err != nil {
			return configError("Config.Global.Regions", fmt.Sprintf("%q → %q: %v", region, v, err))
		}
	}
	for alias, ep := range c.Aliases {
		a := topology.NormHost(alias)
		switch {
		case a == "" || topology.IsIP(a) || strings.ContainsAny(a, " /:@?"):
			return configError("Config.Aliases", fmt.Sprintf("%q: want a host name", alias))
		case (topology.InstanceDomain([]string{topology.NormHost(ep)}) == "" && topology.KindOf(topology.NormHost(ep)) != topology.KindGlobal) ||
			strings.ContainsAny(ep, " /:@?"):
			return configError("Config.Aliases",
				fmt.Sprintf("%q → %q: want an RDS endpoint, e.g. \"orders.cluster-abc123.us-east-1.rds.amazonaws.com\"", alias, ep))
		}
	}
	return nil
}

// ValidateMode reports an InstanceMode that is neither Pinned nor
// FollowWriter as a *cfgerr.Error naming field.
func ValidateMode(m failover.InstanceMode, field string) error {
	if m != failover.Pinned && m != failover.FollowWriter {
		return configError(field, fmt.Sprintf("%d: want failover.Pinned or failover.FollowWriter", int(m)))
	}
	return nil
}

// validateReaders reports the first invalid field of r.
func validateReaders(r failover.ReaderConfig) error {
	switch {
	case r.Strategy < failover.LeastConnections || r.Strategy > failover.ByDNS:
		return configError("Config.Readers.Strategy", fmt.Sprintf("%d: want failover.LeastConnections, Random or ByDNS", int(r.Strategy)))
	case r.MaxLag < 0:
		return configError("Config.Readers.MaxLag", "negative")
	case r.HoldTimeout < 0:
		return configError("Config.Readers.HoldTimeout", "negative")
	case r.RefreshInterval < 0:
		return configError("Config.Readers.RefreshInterval", "negative")
	}
	return nil
}

// WithDefaults returns c with every zero field set to its default, or the
// error of Validate.
func WithDefaults(c failover.Config) (failover.Config, error) {
	if err := Validate(c); err != nil {
		return c, err
	}
	def := func(p *time.Duration, d time.Duration) {
		if *p == 0 {
			*p = d
		}
	}
	def(&c.RefreshInterval, defaultRefreshInterval)
	def(&c.FastInterval, defaultFastInterval)
	def(&c.FastFor, defaultFastFor)
	def(&c.HeartbeatInterval, defaultHeartbeatInterval)
	def(&c.FailureTimeout, defaultFailureTimeout)
	def(&c.HoldTimeout, defaultHoldTimeout)
	def(&c.ConnectTimeout, defaultConnectTimeout)
	def(&c.Readers.HoldTimeout, defaultReaderHold)
	def(&c.Readers.RefreshInterval, defaultReaderRefresh)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// Endpoint returns the RDS endpoint host stands for: its entry in aliases
// (failover.Config.Aliases), else host itself.
func Endpoint(aliases map[string]string, host string) string {
	h := topology.NormHost(host)
	for alias, ep := range aliases {
		if topology.NormHost(alias) == h {
			return topology.NormHost(ep)
		}
	}
	return host
}
