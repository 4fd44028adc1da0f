package topology

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
)

// Kind is the kind of an RDS endpoint, told apart by the shape of its host
// name:
//
//	name.cluster-ID.REGION.rds.amazonaws.com         writer cluster endpoint
//	name.cluster-ro-ID.REGION.rds.amazonaws.com      reader cluster endpoint
//	name.cluster-custom-ID.REGION.rds.amazonaws.com  custom cluster endpoint
//	name.ID.REGION.rds.amazonaws.com                 instance endpoint
//	name.proxy-ID.REGION.rds.amazonaws.com           RDS Proxy endpoint
//	name.endpoint.proxy-ID.REGION.rds.amazonaws.com  RDS Proxy endpoint of your own
//	name.global-ID.global.rds.amazonaws.com          Aurora global database writer endpoint
//
// A host that is not RDS-shaped counts as an instance endpoint.
type Kind int

// The endpoint kinds.
const (
	KindInstance Kind = iota
	KindWriterCluster
	KindReaderCluster
	KindCustomCluster
	// KindProxy is an RDS Proxy endpoint: the proxy follows the cluster's
	// writer (or its readers) itself; its host name names no instance.
	KindProxy
	// KindGlobal is an Aurora global database's writer endpoint: a DNS
	// name that follows the primary cluster's writer across regions.
	KindGlobal
)

// String returns a name for logs: "instance", "cluster", "reader",
// "custom", "proxy", "global".
func (k Kind) String() string {
	switch k {
	case KindWriterCluster:
		return "cluster"
	case KindReaderCluster:
		return "reader"
	case KindCustomCluster:
		return "custom"
	case KindProxy:
		return "proxy"
	case KindGlobal:
		return "global"
	}
	return "instance"
}

// KindOf returns the kind of endpoint host (normalized) is.
func KindOf(host string) Kind {
	switch {
	case isRDS(host) && strings.Contains(host, ".proxy-"):
		return KindProxy
	case isRDS(host) && strings.Contains(host, ".global-") && strings.Contains(host, ".global.rds."):
		return KindGlobal
	case strings.Contains(host, ".cluster-ro-"):
		return KindReaderCluster
	case strings.Contains(host, ".cluster-custom-"):
		return KindCustomCluster
	case strings.Contains(host, ".cluster-"):
		return KindWriterCluster
	}
	return KindInstance
}

// PeerEndpoint returns the cluster's other cluster endpoint: the reader
// endpoint of a writer (cluster) endpoint, the writer endpoint of a reader
// endpoint; "" for any other host.
//
//	mydb.cluster-abc.us-east-1.rds.amazonaws.com     ↔ mydb.cluster-ro-abc.us-east-1.rds.amazonaws.com
func PeerEndpoint(host string) string {
	host = NormHost(host)
	if IsIP(host) || !isRDS(host) {
		return ""
	}
	switch KindOf(host) {
	case KindWriterCluster:
		return strings.Replace(host, ".cluster-", ".cluster-ro-", 1)
	case KindReaderCluster:
		return strings.Replace(host, ".cluster-ro-", ".cluster-", 1)
	}
	return ""
}

// ClusterName returns the cluster a writer or reader cluster endpoint
// names and the domain of its instance endpoints, or "", "" for any other
// host: two clusters in one account and region share the domain and
// differ by name.
//
//	orders.cluster-abc.us-east-1.rds.amazonaws.com    → orders, abc.us-east-1.rds.amazonaws.com
//	orders.cluster-ro-abc.us-east-1.rds.amazonaws.com → orders, abc.us-east-1.rds.amazonaws.com
func ClusterName(host string) (name, domain string) {
	host = NormHost(host)
	switch KindOf(host) {
	case KindWriterCluster, KindReaderCluster:
	default:
		return "", ""
	}
	d := InstanceDomain([]string{host})
	if d == "" {
		return "", ""
	}
	name, _ = FirstLabel(host)
	return name, d
}

// FirstLabel splits host into its first label and the rest (with the dot).
func FirstLabel(host string) (string, string) {
	if i := strings.IndexByte(host, '.'); i >= 0 {
		return host[:i], host[i:]
	}
	return host, ""
}

// IsOld reports whether host is an old blue endpoint renamed by a
// switchover ("-old1" at the end of its first label).
func IsOld(host string) bool {
	l, _ := FirstLabel(host)
	return strings.HasSuffix(l, "-old1")
}

// NormHost lower-cases host and drops a trailing dot.
func NormHost(host string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(host)), ".")
}

// IsIP reports whether host is an IP address literal.
func IsIP(host string) bool { return net.ParseIP(host) != nil }

// isRDS reports whether host is under an RDS domain (rds.amazonaws.com and
// its partitions' variants: .com.cn, sc2s.sgov.gov, c2s.ic.gov, ...).
func isRDS(host string) bool { return strings.Contains(host, ".rds.") }

// SortedCopy returns a sorted copy of s.
func SortedCopy(s []string) []string {
	c := append([]string(nil), s...)
	sort.Strings(c)
	return c
}

// InstanceDomain returns the domain that a cluster's instance endpoints
// share, derived from one of its endpoints as the AWS wrappers do
// ("?.<cluster id>.<region>.rds.amazonaws.com"):
//
//	mydb.cluster-abc.us-east-1.rds.amazonaws.com         → abc.us-east-1.rds.amazonaws.com
//	mydb.cluster-ro-abc.us-east-1.rds.amazonaws.com      → abc.us-east-1.rds.amazonaws.com
//	mydb.cluster-custom-abc.us-east-1.rds.amazonaws.com  → abc.us-east-1.rds.amazonaws.com
//	mydb-1.abc.us-east-1.rds.amazonaws.com               → abc.us-east-1.rds.amazonaws.com
//
// It prefers a writer cluster endpoint among hosts, and returns "" when no
// host is RDS-shaped (an IP address, a CNAME of your own): instance names
// cannot be derived from those.
func InstanceDomain(hosts []string) string {
	sorted := SortedCopy(hosts)
	for _, want := range []Kind{KindWriterCluster, KindReaderCluster, KindCustomCluster, KindInstance} {
		for _, h := range sorted {
			if KindOf(h) != want || IsIP(h) || !isRDS(h) {
				continue
			}
			_, rest := FirstLabel(h)
			rest = strings.TrimPrefix(rest, ".")
			for _, p := range []string{"cluster-ro-", "cluster-custom-", "cluster-"} {
				if strings.HasPrefix(rest, p) {
					rest = rest[len(p):]
					break
				}
			}
			if strings.Count(rest, ".") >= 3 { // id.region.rds.amazonaws.com at least
				return rest
			}
		}
	}
	return ""
}

// Truncate shortens s to n bytes and an ellipsis, for logs.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// ParseTemplate splits an instance-endpoint template ("?.domain", or
// "?.domain:port") into its normalized host pattern and port (0 when it
// has none); why says what is wrong with a template that is not one.
func ParseTemplate(t string) (host string, port uint16, why string) {
	host = t
	if h, p, err := net.SplitHostPort(t); err == nil {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return "", 0, fmt.Sprintf("%q: invalid port", t)
		}
		host, port = h, uint16(n)
	}
	host = NormHost(host)
	if strings.Count(host, "?") != 1 || !strings.HasPrefix(host, "?.") || len(host) < 3 || strings.ContainsAny(host, " /:@") {
		return "", 0, fmt.Sprintf("%q: want one \"?\" as the first label of a host name, e.g. \"?.abc123.us-east-1.rds.amazonaws.com\"", t)
	}
	return host, port, ""
}
