package failover

import (
	"fmt"
	"github.com/holdfast-db/holdfast/internal/cfgerr"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/holdfast-db/holdfast/internal/topology"
)

// Defaults of Config. HeartbeatInterval + 2×FailureTimeout bounds how long
// the monitor takes to notice a writer that stopped answering (1 s).
const (
	DefaultRefreshInterval   = 30 * time.Second
	DefaultFastInterval      = 100 * time.Millisecond
	DefaultFastFor           = 30 * time.Second
	DefaultHeartbeatInterval = 200 * time.Millisecond
	DefaultFailureTimeout    = 400 * time.Millisecond
	DefaultHoldTimeout       = 30 * time.Second
	DefaultConnectTimeout    = 5 * time.Second
)

// Config configures writer-failover routing. Every zero field takes its
// default (the Default* constants).
type Config struct {
	// InstanceTemplate names the cluster's instance endpoints: "?" stands
	// for the server id (aurora_replica_status()'s server_id), as in the
	// AWS wrappers' clusterInstanceHostPattern, e.g.
	// "?.abc123.us-east-1.rds.amazonaws.com" or "?.db.example.internal:5432".
	// Default: derived from the pool's host when it is an RDS endpoint
	// (mydb.cluster-abc123.us-east-1.rds.amazonaws.com gives
	// "?.abc123.us-east-1.rds.amazonaws.com"). Required for a pool on an IP
	// address or a CNAME of your own.
	InstanceTemplate string

	// Aliases maps names of your own to the RDS endpoint each stands for:
	// a CNAME or Route 53 alias such as "db.orders.internal" →
	// "orders.cluster-abc123.us-east-1.rds.amazonaws.com". A pool on an
	// alias is routed as a pool on its endpoint: the instance endpoints
	// and the reader endpoint are derived from the endpoint, it shares the
	// endpoint's monitor, and an alias of a writer (cluster) endpoint is
	// held and redirected through a failover like the endpoint itself. Its
	// DNS is checked by the alias, the name the pool resolves. Without an
	// entry, a pool on a name of your own needs InstanceTemplate and is
	// not redirected (its connections to an old writer are still cut).
	Aliases map[string]string

	// InstancePools is what a pool on an instance endpoint does through a
	// failover: Pinned (the default) keeps it on its instance, a reader
	// after the failover; FollowWriter routes it as a pool on the cluster
	// (writer) endpoint, to the writer of the moment, as the AWS wrappers'
	// failoverMode strict-writer. holdfast.PoolInstanceMode chooses for
	// one pool. See "Instance-endpoint pools" in the package doc.
	InstancePools InstanceMode

	// Readers configures reader routing for the pools on the reader
	// endpoint: by default each new connection goes to the reader with
	// the fewest of the pool's connections.
	Readers ReaderConfig

	// RefreshInterval is how often the topology is read while nothing is
	// wrong (the AWS wrappers' clusterTopologyRefreshRateMs).
	RefreshInterval time.Duration
	// FastInterval is how often it is read, and every instance probed,
	// from the first sign of trouble until FastFor after the last one (the
	// wrappers' clusterTopologyHighRefreshRateMs).
	FastInterval time.Duration
	FastFor      time.Duration

	// HeartbeatInterval is how often the monitor pings the writer on its
	// own connection; FailureTimeout bounds each ping and each probe
	// connection during trouble. A writer is presumed down when a ping and
	// then a fresh connection to it both fail or time out: at most
	// HeartbeatInterval + 2×FailureTimeout after it stops answering (1 s
	// with the defaults), at once when it refuses or resets.
	HeartbeatInterval time.Duration
	FailureTimeout    time.Duration

	// HoldTimeout is the longest a new connection by the writer endpoint
	// is held while the writer is down and no new one is known (the
	// caller's context bounds it too). Then it fails with a *HoldError.
	HoldTimeout time.Duration

	// ConnectTimeout bounds the monitor's own connection to the writer
	// while nothing is wrong.
	ConnectTimeout time.Duration

	// Logger receives the monitor's lines (a failover at Info, a suspect
	// writer at Debug). Default: the factory's logger, else
	// slog.Default().
	Logger *slog.Logger

	// OnEvent, when set, is called with each event of the monitor's
	// timeline (Status.Events), on the monitor's goroutine; it must not
	// block. holdfast's factory counts them in the
	// holdfast.failover.events metric.
	OnEvent func(Event)

	// Redact, when set, is applied to the error texts the monitor logs
	// and reports in Status. holdfast's factory sets it to its redactor
	// of the passwords and tokens it has seen.
	Redact func(string) string
}

// InstanceMode is what a pool on an instance endpoint (an RDS instance
// endpoint, an IP address, a name of your own that Config.Aliases does not
// list) does when the writer changes: Config.InstancePools.
type InstanceMode int

// The instance modes.
const (
	// Pinned keeps the pool on its instance, whatever its role: its
	// connections are cut when the instance stops being the writer (or
	// leaves the topology) and reconnect to it, a reader then, where
	// writes fail with 25006. The default.
	Pinned InstanceMode = iota
	// FollowWriter routes the pool as a pool on the cluster (writer)
	// endpoint: its connections go to the writer of the moment by address
	// (TLS still verifies, and IAM tokens are for, the configured host),
	// are held while the writer is down, cut when it changes, and a
	// connection that reaches a reader is refused and retried to the
	// writer. The instance endpoint is where the pool finds the cluster,
	// not where it stays: a pool on a reader's instance endpoint goes to
	// the writer too (the AWS wrappers' strict-writer).
	FollowWriter
)

// String returns "pinned" or "follow-writer".
func (m InstanceMode) String() string {
	switch m {
	case Pinned:
		return "pinned"
	case FollowWriter:
		return "follow-writer"
	}
	return "InstanceMode(" + strconv.Itoa(int(m)) + ")"
}

// Validate reports an InstanceMode that is neither Pinned nor
// FollowWriter as a *ConfigError naming field.
func (m InstanceMode) Validate(field string) error {
	if m != Pinned && m != FollowWriter {
		return &ConfigError{Pkg: "failover", Field: field, Why: fmt.Sprintf("%d: want failover.Pinned or failover.FollowWriter", int(m))}
	}
	return nil
}

// ConfigError reports a nil or nonsense option, argument or configuration
// field. It is not retryable: fix the configuration. Every package of
// holdfast reports its configuration errors with this one type
// (holdfast.ConfigError, bluegreen.ConfigError, failover.ConfigError, ...
// are the same), so one errors.As finds any of them; Error reads
// "failover: invalid <Field>: <Why>", and Unwrap returns Err.
type ConfigError = cfgerr.Error

// Validate reports the first invalid field as a *ConfigError.
func (c Config) Validate() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"RefreshInterval", c.RefreshInterval}, {"FastInterval", c.FastInterval}, {"FastFor", c.FastFor},
		{"HeartbeatInterval", c.HeartbeatInterval}, {"FailureTimeout", c.FailureTimeout},
		{"HoldTimeout", c.HoldTimeout}, {"ConnectTimeout", c.ConnectTimeout},
	} {
		if d.v < 0 {
			return &ConfigError{Pkg: "failover", Field: "Config." + d.name, Why: "negative"}
		}
	}
	if err := c.InstancePools.Validate("Config.InstancePools"); err != nil {
		return err
	}
	if err := c.Readers.Validate(); err != nil {
		return err
	}
	if t := c.InstanceTemplate; t != "" {
		if err := parseTemplate(t); err != nil {
			return err
		}
	}
	for alias, ep := range c.Aliases {
		a := topology.NormHost(alias)
		switch {
		case a == "" || topology.IsIP(a) || strings.ContainsAny(a, " /:@?"):
			return &ConfigError{Pkg: "failover", Field: "Config.Aliases", Why: fmt.Sprintf("%q: want a host name", alias)}
		case topology.InstanceDomain([]string{topology.NormHost(ep)}) == "" || strings.ContainsAny(ep, " /:@?"):
			return &ConfigError{Pkg: "failover", Field: "Config.Aliases",
				Why: fmt.Sprintf("%q → %q: want an RDS endpoint, e.g. \"orders.cluster-abc123.us-east-1.rds.amazonaws.com\"", alias, ep)}
		}
	}
	return nil
}

// Endpoint returns the RDS endpoint host stands for: its entry in Aliases,
// else host itself.
func (c Config) Endpoint(host string) string {
	h := topology.NormHost(host)
	for alias, ep := range c.Aliases {
		if topology.NormHost(alias) == h {
			return topology.NormHost(ep)
		}
	}
	return host
}

// parseTemplate checks an InstanceTemplate.
func parseTemplate(t string) error {
	if _, _, why := topology.ParseTemplate(t); why != "" {
		return &ConfigError{Pkg: "failover", Field: "Config.InstanceTemplate", Why: why}
	}
	return nil
}

// WithDefaults returns c with every zero field set to its default, or the
// error of Validate.
func (c Config) WithDefaults() (Config, error) {
	if err := c.Validate(); err != nil {
		return c, err
	}
	def := func(p *time.Duration, d time.Duration) {
		if *p == 0 {
			*p = d
		}
	}
	def(&c.RefreshInterval, DefaultRefreshInterval)
	def(&c.FastInterval, DefaultFastInterval)
	def(&c.FastFor, DefaultFastFor)
	def(&c.HeartbeatInterval, DefaultHeartbeatInterval)
	def(&c.FailureTimeout, DefaultFailureTimeout)
	def(&c.HoldTimeout, DefaultHoldTimeout)
	def(&c.ConnectTimeout, DefaultConnectTimeout)
	def(&c.Readers.HoldTimeout, DefaultReaderHold)
	def(&c.Readers.RefreshInterval, DefaultReaderRefresh)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}
