package bluegreentest

import (
	"context"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
)

// Resolver is a fake DNS: host names resolve to the addresses set with
// [Resolver.Set], removed names do not exist (NXDOMAIN), and failing names
// answer a temporary error (SERVFAIL). [Resolver.Lookup] is a
// pgconn.LookupFunc: give it to pgx (ConnConfig.LookupFunc) and every name
// the pool and holdfast's blue/green monitors resolve comes from here.
//
// The zero value is not usable; call [NewResolver]. A Resolver is safe for
// concurrent use. Names are compared case-insensitively.
type Resolver struct {
	mu      sync.Mutex
	addrs   map[string][]string
	cnames  map[string]string
	failing map[string]bool
	lookups map[string]int
	pickers map[string]func(n int) int
	changed chan struct{}
}

// NewResolver returns a Resolver that knows no names.
func NewResolver() *Resolver {
	return &Resolver{
		addrs:   map[string][]string{},
		cnames:  map[string]string{},
		failing: map[string]bool{},
		lookups: map[string]int{},
		pickers: map[string]func(n int) int{},
		changed: make(chan struct{}),
	}
}

func key(host string) string { return strings.TrimSuffix(strings.ToLower(host), ".") }

// Set makes host resolve to addrs (IP addresses, optionally "ip:port", which
// pgx takes as a port override), replacing what it resolved to, and ends a
// failure set by Fail. Set with no addrs is Remove.
func (r *Resolver) Set(host string, addrs ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := key(host)
	delete(r.failing, k)
	if len(addrs) == 0 {
		delete(r.addrs, k)
	} else {
		r.addrs[k] = append([]string(nil), addrs...)
	}
	r.notify()
}

// Alias makes name a CNAME of target: name resolves to whatever target
// resolves to, now and after target changes (as a DNS CNAME of an RDS
// endpoint does). An empty target removes the alias.
func (r *Resolver) Alias(name, target string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if target == "" {
		delete(r.cnames, key(name))
	} else {
		r.cnames[key(name)] = key(target)
	}
	r.notify()
}

// Pick makes each Lookup of host answer one of its addresses, the one at
// index pick(n) of the n it has (as Aurora's reader endpoint answers each
// lookup with one reader chosen at random), instead of all of them. pick
// is called with the Resolver's lock held, n ≥ 1; a result out of range
// answers the first address. It applies to the addresses host has now
// and after later Set calls; a nil pick restores answering all.
// [Resolver.Addrs] still returns all of them.
func (r *Resolver) Pick(host string, pick func(n int) int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if pick == nil {
		delete(r.pickers, key(host))
	} else {
		r.pickers[key(host)] = pick
	}
	r.notify()
}

// Remove makes host not exist: Lookup returns a *net.DNSError with
// IsNotFound set, as for NXDOMAIN.
func (r *Resolver) Remove(host string) { r.Set(host) }

// Fail makes Lookup of host return a temporary *net.DNSError (IsTemporary,
// as for SERVFAIL) until the next Set or Remove of host.
func (r *Resolver) Fail(host string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failing[key(host)] = true
	r.notify()
}

func (r *Resolver) notify() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// Lookup resolves host: an IP address literal resolves to itself; a name
// set with Set to its addresses; any other name fails with a
// *net.DNSError. It has the signature of pgconn.LookupFunc and honours
// ctx.
func (r *Resolver) Lookup(ctx context.Context, host string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, &net.DNSError{Err: err.Error(), Name: host, IsTimeout: true}
	}
	if net.ParseIP(host) != nil {
		return []string{host}, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	k := key(host)
	r.lookups[k]++
	k = r.canonicalLocked(k)
	if r.failing[k] {
		return nil, &net.DNSError{Err: "server misbehaving", Name: host, IsTemporary: true}
	}
	a, ok := r.addrs[k]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	if pick := r.pickers[k]; pick != nil && len(a) > 1 {
		i := pick(len(a))
		if i < 0 || i >= len(a) {
			i = 0
		}
		return []string{a[i]}, nil
	}
	return append([]string(nil), a...), nil
}

// CNAME returns the name host is a CNAME of (set by [Resolver.Alias]), ""
// when it is none: one step of the chain, what a DNS query of type CNAME
// for host answers (dig host CNAME), so that a client can walk the chain
// step by step.
func (r *Resolver) CNAME(host string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cnames[key(host)]
}

// LookupCNAME returns the canonical name of host as
// [net.Resolver.LookupCNAME] does: the last name of its chain of CNAMEs
// (host itself when it has none), fully qualified with a final dot. Like
// net's, it fails (a *net.DNSError) when the chain does not end at
// addresses: IsNotFound for a name that does not exist, IsTemporary for
// one that fails ([Resolver.Fail]). It has net's signature, so that code
// written against a *net.Resolver can be given this one.
func (r *Resolver) LookupCNAME(ctx context.Context, host string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", &net.DNSError{Err: err.Error(), Name: host, IsTimeout: true}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	k := r.canonicalLocked(key(host))
	if r.failing[k] {
		return "", &net.DNSError{Err: "server misbehaving", Name: host, IsTemporary: true}
	}
	if _, ok := r.addrs[k]; !ok {
		return "", &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return k + ".", nil
}

// canonicalLocked follows the chain of CNAMEs from the name k, as a
// resolver does (bounded), and returns its last name; r.mu is held.
func (r *Resolver) canonicalLocked(k string) string {
	for range 8 {
		t, ok := r.cnames[k]
		if !ok {
			break
		}
		k = t
	}
	return k
}

// Addrs returns what host resolves to now (nil when it does not).
func (r *Resolver) Addrs(host string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.addrs[key(host)]...)
}

// Names returns every name that resolves, sorted.
func (r *Resolver) Names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.AppendSeq(make([]string, 0, len(r.addrs)), maps.Keys(r.addrs))
	slices.Sort(out)
	return out
}

// Lookups returns how many times host was looked up (IP literals are not
// counted).
func (r *Resolver) Lookups(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lookups[key(host)]
}

// Changed returns a channel closed at the next Set, Remove or Fail.
func (r *Resolver) Changed() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changed
}
