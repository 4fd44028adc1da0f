package lb

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Redacted is what a [Secret] prints as.
const Redacted = "[REDACTED]"

// Secret is a password or DSN. It prints, formats, logs (slog) and
// marshals to JSON as [Redacted]; only [Secret.Reveal] returns the value.
// It unmarshals from a JSON string as usual.
type Secret string

// Reveal returns the secret itself, for the one place that sends it.
func (s Secret) Reveal() string { return string(s) }

// String returns [Redacted].
func (s Secret) String() string { return Redacted }

// GoString returns [Redacted], quoted.
func (s Secret) GoString() string { return strconv.Quote(Redacted) }

// Format writes [Redacted] whatever the verb, so that %x or %d cannot leak
// the value either.
func (s Secret) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, Redacted) }

// LogValue returns [Redacted], for log/slog.
func (s Secret) LogValue() slog.Value { return slog.StringValue(Redacted) }

// MarshalJSON returns "[REDACTED]".
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(Redacted) }

// Duration is a time.Duration that reads and writes JSON as a Go duration
// string such as "1s" or "2m".
type Duration time.Duration

// MarshalJSON returns the duration as a string, such as "2m0s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON parses a string accepted by [time.ParseDuration].
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New("want a duration string such as \"1s\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("want a duration string such as \"1s\" (got " + strconv.Quote(s) + ")")
	}
	*d = Duration(v)
	return nil
}

// Vendors this package's configuration knows.
const (
	VendorF5  = "f5"
	VendorA10 = "a10"
)

// Config is the JSON configuration of
// [github.com/holdfast-db/holdfast/lb/cmd/holdfast-lb]: balancers, groups of
// members, operators' permissions, drain bounds and the database holding
// the lock and the audit trail. Load it with [LoadConfig] or
// [ParseConfig], which validate it. A Config is plain data;
// do not modify it while others read it.
//
//	{
//	  "database": {"dsn_env": "HOLDFAST_LB_DSN"},
//	  "balancers": {
//	    "f5-prod": {"vendor": "f5", "endpoint": "https://bigip.example.net",
//	                "username": "deploy", "password_env": "F5_PASSWORD", "partition": "Common"}
//	  },
//	  "groups": {
//	    "payments": [{"balancer": "f5-prod", "pool": "payments_443", "node": "pay-1", "port": 443}]
//	  },
//	  "operators": {"alice": ["payments"]},
//	  "drain": {"interval": "1s", "timeout": "2m", "concurrency": 2}
//	}
type Config struct {
	// Database holds the lock and the audit trail. Required.
	Database DatabaseConfig `json:"database"`
	// Balancers by name. At least one.
	Balancers map[string]BalancerConfig `json:"balancers"`
	// Groups of members by name; each group is locked and permitted as a
	// whole. At least one, none empty.
	Groups map[string][]Target `json:"groups"`
	// Operators maps an operator to the groups they may control. "*"
	// means every group.
	Operators Permissions `json:"operators"`
	// Drain bounds drains; zero fields mean the defaults.
	Drain DrainSettings `json:"drain"`
	// Notify says where control events are sent (package notify).
	Notify NotifySettings `json:"notify,omitzero"`
	// Alertmanager, if set, is where a deploy silences the group's
	// alerts for its window (package alertmanager).
	Alertmanager *AlertmanagerSettings `json:"alertmanager,omitempty"`
}

// NotifySettings lists the webhooks control events are sent to.
type NotifySettings struct {
	Webhooks []WebhookConfig `json:"webhooks,omitempty"`
}

// Webhook formats.
const (
	FormatTeams = "teams" // Microsoft Teams (Workflows or incoming webhook): a message with an Adaptive Card
	FormatSlack = "slack" // Slack incoming webhook: text and blocks
	FormatJSON  = "json"  // any receiver: the event as JSON
)

// WebhookConfig is one receiver of events. Its URL usually holds a token:
// it is a [Secret], given through URLEnv (or URL), and never printed; logs
// and errors name the webhook by Name.
type WebhookConfig struct {
	Name   string `json:"name"`              // for logs and errors
	Format string `json:"format"`            // "teams", "slack" or "json"
	URL    Secret `json:"url,omitempty"`     // the webhook's URL
	URLEnv string `json:"url_env,omitempty"` // or the variable holding it
	// Events, when not empty, are the only kinds sent (see [EventKind]).
	Events []EventKind `json:"events,omitempty"`
	// Groups, when not empty, are the only groups whose events are sent.
	Groups []string `json:"groups,omitempty"`
}

// ResolveURL returns the webhook's URL, from the file or the environment,
// checked: an absolute http or https URL with a host. Errors never quote
// it.
func (w WebhookConfig) ResolveURL(getenv func(string) string) (Secret, error) {
	u, err := secretFrom(w.URL, w.URLEnv, "notify.webhooks."+w.Name+".url_env", getenv)
	if err != nil {
		return "", err
	}
	p, err := url.Parse(u.Reveal())
	if err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" {
		return "", &ConfigError{Pkg: "lb", Field: "notify.webhooks." + w.Name + ".url", Why: "must be an absolute http or https URL"}
	}
	return u, nil
}

// AlertmanagerSettings is the Alertmanager a deploy silences the group's
// alerts in (API v2), for at most MaxDuration.
type AlertmanagerSettings struct {
	// URL is Alertmanager's address, "http://alertmanager:9093" (a path
	// prefix such as /alertmanager is kept). No user info.
	URL string `json:"url"`
	// MaxDuration bounds a silence: it ends by itself then, even if the
	// deploy has not expired it. Default 1h, at most 24h.
	MaxDuration Duration `json:"max_duration,omitempty"`
	// Matchers by group: the alerts of the group, as Alertmanager
	// matchers. A group without matchers is deployed without a silence.
	Matchers map[string][]Matcher `json:"matchers"`
}

// DefaultSilenceMax is AlertmanagerSettings.MaxDuration's default.
const DefaultSilenceMax = time.Hour

// Matcher is an Alertmanager label matcher: Name = Value, or with
// IsRegex Name =~ Value; with NotEqual, != and !~.
type Matcher struct {
	Name     string `json:"name"`
	Value    string `json:"value"`
	IsRegex  bool   `json:"is_regex,omitempty"`
	NotEqual bool   `json:"not_equal,omitempty"`
}

// String returns the matcher as Alertmanager writes it, such as
// service="payments" or instance=~"pay-.*".
func (m Matcher) String() string {
	op := "="
	switch {
	case m.IsRegex && m.NotEqual:
		op = "!~"
	case m.IsRegex:
		op = "=~"
	case m.NotEqual:
		op = "!="
	}
	return m.Name + op + strconv.Quote(m.Value)
}

// Validate checks the matcher: a label name, a valid regular expression,
// and not one that matches every alert (Alertmanager refuses a silence
// whose matchers all match the empty value).
func (m Matcher) Validate() error {
	if !labelName.MatchString(m.Name) {
		return &ConfigError{Pkg: "lb", Field: "name", Why: "not a label name: " + strconv.Quote(m.Name)}
	}
	if m.IsRegex {
		if _, err := regexp.Compile("^(?:" + m.Value + ")$"); err != nil {
			return &ConfigError{Pkg: "lb", Field: "value", Why: "not a regular expression: " + strconv.Quote(m.Value)}
		}
	}
	return nil
}

// matchesEmpty reports whether m matches an alert without the label.
func (m Matcher) matchesEmpty() bool {
	eq := m.Value == ""
	if m.IsRegex {
		re, err := regexp.Compile("^(?:" + m.Value + ")$")
		eq = err == nil && re.MatchString("")
	}
	return eq != m.NotEqual
}

var labelName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// DatabaseConfig locates the PostgreSQL database. Exactly one field is set.
type DatabaseConfig struct {
	DSN    Secret `json:"dsn,omitempty"`     // a connection string (it may hold a password)
	DSNEnv string `json:"dsn_env,omitempty"` // the environment variable holding it
}

// BalancerConfig is one load balancer. Exactly one of Password and
// PasswordEnv is set; prefer PasswordEnv, so that the file holds no secret.
type BalancerConfig struct {
	Vendor      string `json:"vendor"`                 // "f5" or "a10"
	Endpoint    string `json:"endpoint"`               // "https://host[:port]", no path, no user info
	Username    string `json:"username"`               // the API account
	Password    Secret `json:"password,omitempty"`     // inline password
	PasswordEnv string `json:"password_env,omitempty"` // or the variable holding it
	// Partition is the F5 partition (default "Common") or the A10
	// partition (default "shared").
	Partition string `json:"partition,omitempty"`
	// CAFile is a PEM bundle to verify the device's certificate with,
	// instead of the system roots.
	CAFile string `json:"ca_file,omitempty"`
	// InsecureSkipVerify turns off certificate verification: anyone on
	// the network path can then pose as the device and receive the
	// password. Avoid; give the device's CA in CAFile instead (the two
	// are not accepted together). When set, every command warns in its
	// log and every request reaching the balancer records the fact in
	// its audit entry ([Entry].Notes).
	InsecureSkipVerify bool `json:"insecure_skip_verify,omitempty"`
	// AllowInsecureHTTP accepts an http:// Endpoint. Without it an
	// http:// endpoint is refused: the login sends the password, and
	// every later request the session token, unencrypted. When set (and
	// the endpoint is http://), commands warn and audit it like
	// InsecureSkipVerify.
	AllowInsecureHTTP bool `json:"allow_insecure_http,omitempty"`
	// Timeout bounds each HTTP request. Default 30s.
	Timeout Duration `json:"timeout,omitempty"`
	// TokenTimeout (F5 only) is the token lifetime requested at login and
	// on keep-alive, at most 10h. Default: the device's (1200 s).
	TokenTimeout Duration `json:"token_timeout,omitempty"`
}

// Target is a member of a named balancer.
type Target struct {
	Balancer string `json:"balancer"`
	Member
}

// String returns "balancer member", such as "f5-prod web/web-1:80".
func (t Target) String() string { return t.Balancer + " " + t.Member.String() }

// DrainSettings are the drain bounds in the configuration file.
type DrainSettings struct {
	Interval    Duration `json:"interval,omitempty"`    // default 1s; at least MinDrainInterval
	Timeout     Duration `json:"timeout,omitempty"`     // default 2m; at most MaxDrainTimeout
	Concurrency int      `json:"concurrency,omitempty"` // members drained at once, default 1
}

// Bounds of the configuration's drain settings ([DrainSettings], and
// holdfast-lb's -interval and -timeout flags). A shorter interval polls
// the devices' management planes in a loop (1ns was accepted before);
// a longer timeout keeps members forced offline, a lock held and a
// silence running for longer than a deploy should wait. [DrainConfig],
// the library's, is not bounded: tests poll every few milliseconds.
const (
	MinDrainInterval = 100 * time.Millisecond
	MaxDrainTimeout  = time.Hour
)

// Validate returns a [*ConfigError] naming the field (drain.interval,
// drain.timeout, drain.concurrency) when a setting is negative, the
// interval is below [MinDrainInterval] or the timeout above
// [MaxDrainTimeout]. Zero fields are the defaults and valid.
func (d DrainSettings) Validate() error {
	switch {
	case d.Interval < 0:
		return &ConfigError{Pkg: "lb", Field: "drain.interval", Why: "must not be negative"}
	case d.Interval != 0 && time.Duration(d.Interval) < MinDrainInterval:
		return &ConfigError{Pkg: "lb", Field: "drain.interval", Why: "must be at least " + MinDrainInterval.String() + " (or 0 for the default, " + DefaultInterval.String() + "), got " + time.Duration(d.Interval).String()}
	case d.Timeout < 0:
		return &ConfigError{Pkg: "lb", Field: "drain.timeout", Why: "must not be negative"}
	case time.Duration(d.Timeout) > MaxDrainTimeout:
		return &ConfigError{Pkg: "lb", Field: "drain.timeout", Why: "must be at most " + MaxDrainTimeout.String() + " (0 for the default, " + DefaultTimeout.String() + "), got " + time.Duration(d.Timeout).String()}
	case d.Concurrency < 0:
		return &ConfigError{Pkg: "lb", Field: "drain.concurrency", Why: "must not be negative"}
	}
	return nil
}

// LoadConfig reads and validates the JSON configuration file at path.
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, &ConfigError{Pkg: "lb", Why: "cannot read the configuration file", Err: err}
	}
	return ParseConfig(bytes.NewReader(b))
}

// ParseConfig decodes and validates a JSON configuration. Unknown fields
// are errors, so that a misspelt key is not silently ignored.
func ParseConfig(r io.Reader) (*Config, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var c Config
	if err := dec.Decode(&c); err != nil {
		return nil, &ConfigError{Pkg: "lb", Why: "bad JSON", Err: jsonError(err)}
	}
	if dec.More() {
		return nil, &ConfigError{Pkg: "lb", Why: "bad JSON: data after the configuration object"}
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// jsonError keeps what locates a JSON error and drops anything that might
// quote the input.
func jsonError(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("syntax error at byte %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Errorf("field %q: want %s, got a JSON %s", te.Field, te.Type, te.Value)
	case errors.Is(err, io.EOF):
		return errors.New("empty input")
	}
	return err // unknown field names, Duration errors: no secret in them
}

// Validate checks the configuration and returns a [*ConfigError] naming
// the first problem found (in a stable order), or nil.
func (c *Config) Validate() error {
	if (c.Database.DSN == "") == (c.Database.DSNEnv == "") {
		return &ConfigError{Pkg: "lb", Field: "database", Why: "set exactly one of dsn and dsn_env"}
	}
	if len(c.Balancers) == 0 {
		return &ConfigError{Pkg: "lb", Field: "balancers", Why: "at least one is required"}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Balancers)) {
		if err := c.Balancers[name].Validate(); err != nil {
			return prefix("balancers."+name, err)
		}
	}
	if len(c.Groups) == 0 {
		return &ConfigError{Pkg: "lb", Field: "groups", Why: "at least one is required"}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Groups)) {
		if err := c.validateGroup(name, c.Groups[name]); err != nil {
			return prefix("groups."+name, err)
		}
	}
	for _, op := range slices.Sorted(maps.Keys(c.Operators)) {
		if strings.TrimSpace(op) == "" {
			return &ConfigError{Pkg: "lb", Field: "operators", Why: "an operator name is empty"}
		}
		for _, g := range c.Operators[op] {
			if _, ok := c.Groups[g]; !ok && g != "*" {
				return &ConfigError{Pkg: "lb", Field: "operators." + op, Why: "unknown group " + strconv.Quote(g)}
			}
		}
	}
	if err := c.validateNotify(); err != nil {
		return err
	}
	if err := c.validateAlertmanager(); err != nil {
		return err
	}
	return c.Drain.Validate()
}

func (c *Config) validateNotify() error {
	names := map[string]bool{}
	for i, w := range c.Notify.Webhooks {
		field := "notify.webhooks." + strconv.Itoa(i)
		switch {
		case strings.TrimSpace(w.Name) == "":
			return &ConfigError{Pkg: "lb", Field: field + ".name", Why: "must not be empty"}
		case names[w.Name]:
			return &ConfigError{Pkg: "lb", Field: field + ".name", Why: "duplicate webhook " + strconv.Quote(w.Name)}
		case w.Format != FormatTeams && w.Format != FormatSlack && w.Format != FormatJSON:
			return &ConfigError{Pkg: "lb", Field: field + ".format", Why: "must be \"teams\", \"slack\" or \"json\" (got " + strconv.Quote(w.Format) + ")"}
		case (w.URL == "") == (w.URLEnv == ""):
			return &ConfigError{Pkg: "lb", Field: field + ".url", Why: "set exactly one of url and url_env"}
		}
		names[w.Name] = true
		if w.URL != "" {
			if _, err := w.ResolveURL(nil); err != nil {
				return err
			}
		}
		for _, k := range w.Events {
			if !k.known() {
				return &ConfigError{Pkg: "lb", Field: field + ".events", Why: "unknown event " + strconv.Quote(string(k))}
			}
		}
		for _, g := range w.Groups {
			if _, ok := c.Groups[g]; !ok {
				return &ConfigError{Pkg: "lb", Field: field + ".groups", Why: "unknown group " + strconv.Quote(g)}
			}
		}
	}
	return nil
}

func (c *Config) validateAlertmanager() error {
	am := c.Alertmanager
	if am == nil {
		return nil
	}
	if err := ValidateEndpointPath(am.URL); err != nil {
		return prefix("alertmanager.url", err)
	}
	if am.MaxDuration < 0 || time.Duration(am.MaxDuration) > 24*time.Hour {
		return &ConfigError{Pkg: "lb", Field: "alertmanager.max_duration", Why: "must be between 0 (the default, 1h) and 24h"}
	}
	for _, g := range slices.Sorted(maps.Keys(am.Matchers)) {
		field := "alertmanager.matchers." + g
		if _, ok := c.Groups[g]; !ok {
			return &ConfigError{Pkg: "lb", Field: field, Why: "unknown group"}
		}
		ms := am.Matchers[g]
		if len(ms) == 0 {
			return &ConfigError{Pkg: "lb", Field: field, Why: "is empty: leave the group out to deploy it without a silence"}
		}
		all := true
		for i, m := range ms {
			if err := m.Validate(); err != nil {
				return prefix(field+"."+strconv.Itoa(i), err)
			}
			all = all && m.matchesEmpty()
		}
		if all {
			return &ConfigError{Pkg: "lb", Field: field, Why: "every matcher matches the empty value: the silence would silence every alert"}
		}
	}
	return nil
}

// SilenceMax returns MaxDuration, or DefaultSilenceMax when it is 0.
func (a AlertmanagerSettings) SilenceMax() time.Duration {
	if a.MaxDuration == 0 {
		return DefaultSilenceMax
	}
	return time.Duration(a.MaxDuration)
}

// ValidateEndpointPath checks a service URL that may have a path prefix:
// an absolute http or https URL with a host, no user info, query or
// fragment.
func ValidateEndpointPath(endpoint string) error {
	return validateURL(endpoint, urlRules{
		user:   "must not hold user info",
		scheme: "scheme must be http or https",
		rest:   "must not have a query or fragment",
	})
}

// urlRules are what [validateURL] says of a URL that breaks them. With
// noPath, a path other than "/" breaks the rule of rest too.
type urlRules struct {
	noPath             bool
	user, scheme, rest string
}

// validateURL checks an absolute http or https URL with a host, no user
// info, query or fragment (nor a path, with rules.noPath), in that order;
// the first broken rule is a [*ConfigError] saying what rules say of it.
func validateURL(endpoint string, rules urlRules) error {
	u, err := url.Parse(endpoint)
	why := ""
	switch {
	case err != nil:
		why = "not a URL"
	case u.User != nil:
		why = rules.user
	case u.Scheme != "https" && u.Scheme != "http":
		why = rules.scheme
	case u.Host == "":
		why = "host is missing"
	case (rules.noPath && u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "":
		why = rules.rest
	default:
		return nil
	}
	return &ConfigError{Pkg: "lb", Why: why}
}

func (c *Config) validateGroup(name string, members []Target) error {
	if strings.TrimSpace(name) == "" {
		return &ConfigError{Pkg: "lb", Why: "a group name is empty"}
	}
	if len(members) == 0 {
		return &ConfigError{Pkg: "lb", Why: "has no members"}
	}
	seen := map[Target]bool{}
	for i, t := range members {
		field := strconv.Itoa(i)
		b, ok := c.Balancers[t.Balancer]
		if !ok {
			return &ConfigError{Pkg: "lb", Field: field + ".balancer", Why: "unknown balancer " + strconv.Quote(t.Balancer)}
		}
		if err := t.Member.Validate(); err != nil {
			return prefix(field, err)
		}
		if err := checkVendorMember(b.Vendor, t.Member); err != nil {
			return prefix(field, err)
		}
		if seen[t] {
			return &ConfigError{Pkg: "lb", Field: field, Why: "duplicate member " + t.String()}
		}
		seen[t] = true
	}
	return nil
}

// checkVendorMember applies the vendors' addressing rules.
func checkVendorMember(vendor string, m Member) error {
	switch vendor {
	case VendorF5:
		if (m.Pool == "") != (m.Port == 0) {
			return &ConfigError{Pkg: "lb", Field: "pool", Why: "f5: a pool member needs both pool and port; a node has neither"}
		}
	case VendorA10:
		if m.Pool != "" {
			return &ConfigError{Pkg: "lb", Field: "pool", Why: "a10: service-group members are not supported; name the server (and port)"}
		}
	}
	return nil
}

// Validate checks one balancer's settings.
func (b BalancerConfig) Validate() error {
	if b.Vendor != VendorF5 && b.Vendor != VendorA10 {
		return &ConfigError{Pkg: "lb", Field: "vendor", Why: "must be \"f5\" or \"a10\" (got " + strconv.Quote(b.Vendor) + ")"}
	}
	if err := ValidateEndpoint(b.Endpoint); err != nil {
		return prefix("endpoint", err)
	}
	if u, _ := url.Parse(b.Endpoint); u.Scheme == "http" && !b.AllowInsecureHTTP {
		return &ConfigError{Pkg: "lb", Field: "endpoint", Why: "http:// sends the password and the session token unencrypted: use https, or set allow_insecure_http to accept that"}
	}
	if b.Username == "" {
		return &ConfigError{Pkg: "lb", Field: "username", Why: "must not be empty"}
	}
	if (b.Password == "") == (b.PasswordEnv == "") {
		return &ConfigError{Pkg: "lb", Field: "password", Why: "set exactly one of password and password_env"}
	}
	if b.Timeout < 0 {
		return &ConfigError{Pkg: "lb", Field: "timeout", Why: "must not be negative"}
	}
	if b.TokenTimeout != 0 && b.Vendor != VendorF5 {
		return &ConfigError{Pkg: "lb", Field: "token_timeout", Why: "applies to f5 only"}
	}
	if b.TokenTimeout < 0 || time.Duration(b.TokenTimeout) > 10*time.Hour {
		return &ConfigError{Pkg: "lb", Field: "token_timeout", Why: "must be between 0 and 10h"}
	}
	if b.CAFile != "" && b.InsecureSkipVerify {
		return &ConfigError{Pkg: "lb", Field: "insecure_skip_verify", Why: "is set with ca_file, which it would make useless: verify with ca_file, or drop it"}
	}
	return nil
}

// TransportWarning says what is unsafe about reaching the balancer, or ""
// when its endpoint is https:// with certificate verification on: an
// allowed http:// endpoint, or InsecureSkipVerify. holdfast-lb logs it as
// a warning when it starts and records it in the audit entry of every
// request that reaches the balancer ([ControllerConfig].TransportNotes).
func (b BalancerConfig) TransportWarning() string {
	if u, err := url.Parse(b.Endpoint); err == nil && u.Scheme == "http" {
		return "plain http (allow_insecure_http): the password and the session token cross the network unencrypted"
	}
	if b.InsecureSkipVerify {
		return "TLS certificate not verified (insecure_skip_verify): anyone on the network path can pose as the device and receive its password"
	}
	return ""
}

// ValidateEndpoint checks a balancer endpoint's shape: an absolute http or
// https URL with a host and nothing after it, and no user info
// (credentials belong in the password fields, which are never printed).
// Whether http is acceptable is the caller's decision:
// [BalancerConfig.Validate] and the adapters refuse it unless allowed
// explicitly.
func ValidateEndpoint(endpoint string) error {
	return validateURL(endpoint, urlRules{
		noPath: true,
		user:   "must not hold user info; use username and password_env",
		scheme: "scheme must be https (or http)",
		rest:   "must not have a path, query or fragment",
	})
}

// ResolvePassword returns the password, from the file or from the
// environment variable PasswordEnv read with getenv. An unset or empty
// variable is a [*ConfigError] naming the variable.
func (b BalancerConfig) ResolvePassword(getenv func(string) string) (Secret, error) {
	return secretFrom(b.Password, b.PasswordEnv, "password_env", getenv)
}

// ResolveDSN returns the database DSN, from the file or the environment.
func (d DatabaseConfig) ResolveDSN(getenv func(string) string) (Secret, error) {
	return secretFrom(d.DSN, d.DSNEnv, "database.dsn_env", getenv)
}

// secretFrom returns a secret given in the file (value) or through an
// environment variable: when env names one, its value read with getenv.
// An unset or empty variable is a [*ConfigError] at field that names the
// variable.
func secretFrom(value Secret, env, field string, getenv func(string) string) (Secret, error) {
	if env == "" {
		return value, nil
	}
	v := getenv(env)
	if v == "" {
		return "", &ConfigError{Pkg: "lb", Field: field, Why: "environment variable " + env + " is unset or empty"}
	}
	return Secret(v), nil
}

// Members returns the targets of group, restricted to the given nodes when
// any are named. Unknown groups and nodes are [*ConfigError]s.
func (c *Config) Members(group string, nodes ...string) ([]Target, error) {
	return selectMembers(c.Groups, group, nodes)
}

func selectMembers(groups map[string][]Target, group string, nodes []string) ([]Target, error) {
	all, ok := groups[group]
	if !ok {
		return nil, &ConfigError{Pkg: "lb", Field: "group", Why: "unknown group " + strconv.Quote(group)}
	}
	if len(nodes) == 0 {
		return slices.Clone(all), nil
	}
	var out []Target
	for _, n := range nodes {
		found := false
		for _, t := range all {
			if t.Node == n {
				out = append(out, t)
				found = true
			}
		}
		if !found {
			return nil, &ConfigError{Pkg: "lb", Field: "node", Why: "group " + strconv.Quote(group) + " has no node " + strconv.Quote(n)}
		}
	}
	return out, nil
}

// Permissions maps an operator to the groups they may control. A group
// "*" grants every group. The zero value permits nothing. It is read-only
// after construction and then safe for concurrent use.
type Permissions map[string][]string

// Check returns nil if operator may control group, else a
// [*NotPermittedError].
func (p Permissions) Check(operator, group string) error {
	if operator != "" {
		for _, g := range p[operator] {
			if g == group || g == "*" {
				return nil
			}
		}
	}
	return &NotPermittedError{Operator: operator, Group: group}
}

// Groups returns the groups operator may control, sorted ("*" included
// as is).
func (p Permissions) Groups(operator string) []string {
	g := slices.Clone(p[operator])
	sort.Strings(g)
	return g
}
