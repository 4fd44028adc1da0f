package bluegreentest

import (
	"context"
	"strings"
	"sync"
	"time"
)

// Cache is a client-side DNS cache in front of a [Resolver], as real
// clients have one (the JVM, nscd, systemd-resolved, a sidecar): an answer
// is reused for TTL after it was fetched, so a client sees a DNS change up
// to TTL late. Failed lookups are not cached. [Cache.Lookup] is a
// pgconn.LookupFunc.
//
// Build one with [Resolver.Cached]. A Cache is safe for concurrent use and
// owns no goroutines.
type Cache struct {
	r   *Resolver
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	entries map[string]cacheEntry
}

type cacheEntry struct {
	addrs   []string
	expires time.Time
}

// Cached returns a Cache in front of r with the given TTL (RDS publishes
// its endpoints with a 5 s TTL). A TTL of zero or less caches nothing.
func (r *Resolver) Cached(ttl time.Duration) *Cache {
	return &Cache{r: r, ttl: ttl, now: time.Now, entries: map[string]cacheEntry{}}
}

// TTL returns the cache's TTL.
func (c *Cache) TTL() time.Duration { return c.ttl }

// Lookup resolves host through the cache: a cached answer younger than
// the TTL, else the Resolver's (cached when it succeeds). It has the
// signature of pgconn.LookupFunc.
func (c *Cache) Lookup(ctx context.Context, host string) ([]string, error) {
	if c.ttl <= 0 {
		return c.r.Lookup(ctx, host)
	}
	k := strings.TrimSuffix(strings.ToLower(host), ".")
	now := c.now()
	c.mu.Lock()
	e, ok := c.entries[k]
	c.mu.Unlock()
	if ok && now.Before(e.expires) {
		return append([]string(nil), e.addrs...), nil
	}
	addrs, err := c.r.Lookup(ctx, host)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.entries[k] = cacheEntry{addrs: append([]string(nil), addrs...), expires: now.Add(c.ttl)}
	c.mu.Unlock()
	return addrs, nil
}

// Flush forgets every cached answer.
func (c *Cache) Flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.entries)
}
