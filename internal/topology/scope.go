package topology

import (
	"errors"
	"slices"
	"strconv"
	"strings"
)

// MaxRows is how many rows a monitor uses from one read of a cluster's
// topology, and from one role of a blue/green deployment's metadata: an
// Aurora cluster has at most 16 instances, a Multi-AZ DB cluster 3, and a
// deployment's metadata lists a role's endpoints (its cluster endpoints
// and instances). Rows beyond it are left out, with one WARN.
const MaxRows = 64

// MaxConcurrent bounds how many probes (and their logins) a monitor runs
// at once: every instance of the largest Aurora cluster (16) in one wave,
// so that what a real cluster sees is unchanged.
const MaxConcurrent = 16

// Scope is where a cluster's endpoints may lie, as the configuration says:
// the host names configured (the pool's hosts, an alias's endpoint) and
// the domains derived from them (an RDS endpoint's account and Region
// suffix, "abc123.us-east-1.rds.amazonaws.com") or configured (an instance
// template's "?.domain"). A host name that a server names — a topology
// row, a blue/green metadata row — is dialed, routed to, accepted in a
// certificate or given a password or token only when the Scope contains
// it: a row alone never decides where a connection goes.
//
// The zero Scope contains nothing. A Scope is immutable.
type Scope struct {
	hosts   []string // normalized
	domains []string // normalized, without a leading dot
}

// NewScope returns the Scope of hosts (configured host names, each
// contained; an RDS-shaped one adds its domain) and domains (each the
// domain of instance endpoints "<label>.<domain>", as an instance
// template's; a leading "?." or "." is dropped, and so is a ":port").
func NewScope(hosts []string, domains ...string) Scope {
	var s Scope
	add := func(list *[]string, v string) {
		if v != "" && !slices.Contains(*list, v) {
			*list = append(*list, v)
		}
	}
	for _, h := range hosts {
		h = NormHost(h)
		add(&s.hosts, h)
		add(&s.domains, DomainOf(h))
	}
	for _, d := range domains {
		if t, _, why := ParseTemplate(d); why == "" {
			d = strings.TrimPrefix(t, "?.")
		}
		add(&s.domains, strings.TrimPrefix(NormHost(d), "."))
	}
	slices.Sort(s.hosts)
	slices.Sort(s.domains)
	return s
}

// Contains reports whether host is one of the Scope's hosts, or a DNS name
// under one of its domains: "<label>.<domain>", or, for an RDS domain, an
// endpoint of that account and Region (its cluster, reader, custom or
// proxy endpoints: "<label>.cluster-<id>.<region>.rds.amazonaws.com").
// An IP address is contained only when configured.
func (s Scope) Contains(host string) bool {
	h := NormHost(host)
	if h == "" {
		return false
	}
	if slices.Contains(s.hosts, h) {
		return true
	}
	if IsIP(h) || !validHost(h) || len(s.domains) == 0 {
		return false
	}
	_, rest := FirstLabel(h)
	rest = strings.TrimPrefix(rest, ".")
	if slices.Contains(s.domains, rest) {
		return true
	}
	d := DomainOf(h)
	return d != "" && slices.Contains(s.domains, d)
}

// Filter returns the names among names that s contains, in their order
// (names itself when it contains them all).
func (s Scope) Filter(names []string) []string {
	for i, n := range names {
		if s.Contains(n) {
			continue
		}
		out := slices.Clone(names[:i])
		for _, n := range names[i+1:] {
			if s.Contains(n) {
				out = append(out, n)
			}
		}
		return out
	}
	return names
}

// Domains returns the Scope's domains, sorted.
func (s Scope) Domains() []string { return slices.Clone(s.domains) }

// String describes the Scope for log lines and errors: its domains as
// "*.domain", then its hosts.
func (s Scope) String() string {
	parts := make([]string, 0, len(s.domains)+len(s.hosts))
	for _, d := range s.domains {
		parts = append(parts, "*."+d)
	}
	parts = append(parts, s.hosts...)
	if len(parts) == 0 {
		return "(nothing)"
	}
	return strings.Join(parts, ", ")
}

// DomainOf returns the account and Region domain of an RDS endpoint —
// what its instance endpoints share, "abc123.us-east-1.rds.amazonaws.com"
// — for any RDS-shaped host but an Aurora global endpoint; "" for any
// other host (an IP address, a name of your own):
//
//	mydb.cluster-abc123.us-east-1.rds.amazonaws.com         → abc123.us-east-1.rds.amazonaws.com
//	mydb.cluster-ro-abc123.us-east-1.rds.amazonaws.com      → abc123.us-east-1.rds.amazonaws.com
//	mydb.cluster-custom-abc123.us-east-1.rds.amazonaws.com  → abc123.us-east-1.rds.amazonaws.com
//	mydb-1.abc123.us-east-1.rds.amazonaws.com               → abc123.us-east-1.rds.amazonaws.com
//	proxy.proxy-abc123.us-east-1.rds.amazonaws.com          → abc123.us-east-1.rds.amazonaws.com
//	ep.endpoint.proxy-abc123.us-east-1.rds.amazonaws.com    → abc123.us-east-1.rds.amazonaws.com
func DomainOf(host string) string {
	h := NormHost(host)
	if IsIP(h) || !isRDS(h) || !validHost(h) || KindOf(h) == KindGlobal {
		return ""
	}
	_, rest := FirstLabel(h)
	rest = strings.TrimPrefix(rest, ".")
	rest = strings.TrimPrefix(rest, "endpoint.proxy-") // a proxy endpoint of your own
	for _, p := range []string{"cluster-ro-", "cluster-custom-", "cluster-", "proxy-"} {
		if strings.HasPrefix(rest, p) {
			rest = rest[len(p):]
			break
		}
	}
	if strings.Count(rest, ".") < 3 || !strings.Contains(rest, ".rds.") { // id.region.rds.amazonaws.com at least
		return ""
	}
	return rest
}

// ErrOutsideScope is matched by every *OutsideError.
var ErrOutsideScope = errors.New("topology: host outside the cluster's domain")

// OutsideError reports a host name, read from a server (a topology or
// metadata row), that lies outside the cluster's domain (the [Scope] its
// configuration gives): it is not dialed, routed to or given a password.
// It is not retryable: the next read names the same host.
type OutsideError struct {
	Host  string // as read, truncated
	Scope string // Scope.String()
}

func (e *OutsideError) Error() string {
	return "topology: " + strconv.Quote(e.Host) + " is outside the cluster's domain (" + e.Scope + "): not connected to"
}

// Is matches ErrOutsideScope.
func (e *OutsideError) Is(target error) bool { return target == ErrOutsideScope }

// Check returns an *OutsideError when s does not contain host, else nil.
func (s Scope) Check(host string) error {
	if s.Contains(host) {
		return nil
	}
	return &OutsideError{Host: Truncate(NormHost(host), 128), Scope: s.String()}
}
