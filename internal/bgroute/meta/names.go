package meta

import (
	"net"
	"regexp"
	"sort"
	"strings"

	"github.com/holdfast-db/holdfast/internal/topology"
)

// greenSuffix is the infix RDS adds to the first label of green endpoints.
var greenSuffix = regexp.MustCompile(`-green-[0-9a-z]{6}$`)

// stripGreen removes the "-green-xxxxxx" infix from host's first label.
func stripGreen(host string) string {
	l, rest := topology.FirstLabel(host)
	return greenSuffix.ReplaceAllString(l, "") + rest
}

// readerTwin returns the reader cluster endpoint of a writer cluster
// endpoint.
func readerTwin(host string) string {
	return strings.Replace(host, ".cluster-", ".cluster-ro-", 1)
}

// Correspond maps every blue host to its green counterpart, by role and
// sorted name, as the AWS wrappers do:
//
//   - writer cluster endpoint → green writer cluster endpoint;
//   - reader cluster endpoint → green reader cluster endpoint (else the green
//     writer cluster endpoint);
//   - custom cluster endpoint → the green custom endpoint of the same name
//     once "-green-xxxxxx" is stripped;
//   - blue writer instance → green writer instance;
//   - blue reader instances, sorted by name → green reader instances, sorted
//     by name, round robin; with no green readers, the green writer.
//
// The writer instance of a side is the one the topology names (writers,
// from aurora_replica_status()); else the instance whose address equals its
// writer cluster endpoint's address (a cluster endpoint is a DNS alias of
// the writer instance); else the first instance by name. ips gives the
// known address of each host. Blue hosts without a counterpart are left
// out.
func Correspond(blue, green []string, ips map[string]string, writers map[string]bool) map[string]string {
	type side struct {
		writerCluster, readerCluster string
		custom                       []string
		writer                       string
		readers                      []string
	}
	split := func(hosts []string) side {
		var s side
		var instances []string
		for _, h := range hosts {
			switch topology.KindOf(h) {
			case topology.KindWriterCluster:
				if s.writerCluster == "" {
					s.writerCluster = h
				}
			case topology.KindReaderCluster:
				if s.readerCluster == "" {
					s.readerCluster = h
				}
			case topology.KindCustomCluster:
				s.custom = append(s.custom, h)
			default:
				instances = append(instances, h)
			}
		}
		sort.Strings(instances)
		wi := -1
		for i, h := range instances {
			if writers[h] {
				wi = i
				break
			}
		}
		if ip := ips[s.writerCluster]; wi < 0 && ip != "" {
			for i, h := range instances {
				if ips[h] == ip {
					wi = i
					break
				}
			}
		}
		if wi < 0 && len(instances) > 0 {
			wi = 0
		}
		for i, h := range instances {
			if i == wi {
				s.writer = h
			} else {
				s.readers = append(s.readers, h)
			}
		}
		return s
	}
	b, g := split(topology.SortedCopy(blue)), split(topology.SortedCopy(green))
	m := make(map[string]string)
	set := func(from, to string) {
		if from != "" && to != "" {
			m[from] = to
		}
	}
	set(b.writerCluster, g.writerCluster)
	if g.readerCluster != "" {
		set(b.readerCluster, g.readerCluster)
	} else {
		set(b.readerCluster, g.writerCluster)
	}
	for _, c := range b.custom {
		for _, gc := range g.custom {
			if stripGreen(gc) == c {
				set(c, gc)
			}
		}
	}
	set(b.writer, g.writer)
	for i, r := range b.readers {
		if len(g.readers) > 0 {
			set(r, g.readers[i%len(g.readers)])
		} else {
			set(r, g.writer)
		}
	}
	return m
}

func IsIP(host string) bool { return net.ParseIP(host) != nil }
