package bluegreentest

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

func TestCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name    string
		ttl     time.Duration
		advance time.Duration // after the change
		want    string        // what the cache answers after the change
	}{
		{name: "within the TTL the old answer", ttl: 5 * time.Second, advance: 4 * time.Second, want: "127.0.0.11"},
		{name: "after the TTL the new answer", ttl: 5 * time.Second, advance: 5 * time.Second, want: "127.0.0.21"},
		{name: "no TTL no cache", ttl: 0, want: "127.0.0.21"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := NewResolver()
			c := r.Cached(tt.ttl)
			now := time.Unix(1000, 0)
			c.now = func() time.Time { return now }
			r.Set("db.example", "127.0.0.11")
			if a, err := c.Lookup(ctx, "DB.example."); err != nil || a[0] != "127.0.0.11" {
				t.Fatalf("first lookup %v, %v", a, err)
			}
			r.Set("db.example", "127.0.0.21")
			now = now.Add(tt.advance)
			if a, err := c.Lookup(ctx, "db.example"); err != nil || a[0] != tt.want {
				t.Errorf("after the change: %v, %v; want %s", a, err, tt.want)
			}
		})
	}

	r := NewResolver()
	c := r.Cached(time.Hour)
	if _, err := c.Lookup(ctx, "gone.example"); err == nil {
		t.Fatal("unknown name resolved")
	}
	r.Set("gone.example", "127.0.0.5")
	if a, err := c.Lookup(ctx, "gone.example"); err != nil || a[0] != "127.0.0.5" {
		t.Errorf("a failed lookup was cached: %v, %v", a, err)
	}
	r.Set("gone.example", "127.0.0.6")
	c.Flush()
	if a, _ := c.Lookup(ctx, "gone.example"); a[0] != "127.0.0.6" || c.TTL() != time.Hour {
		t.Errorf("after Flush: %v", a)
	}
}

func TestResolverAlias(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := NewResolver()
	r.Set("orders.cluster-x.us-east-1.rds.amazonaws.com", "127.0.0.11")
	r.Alias("db.orders.internal", "orders.cluster-x.us-east-1.rds.amazonaws.com")
	r.Alias("DB.Example.", "db.orders.internal") // a chain, names compared case-insensitively
	for _, step := range []struct{ set, want string }{{"", "127.0.0.11"}, {"127.0.0.21", "127.0.0.21"}} {
		if step.set != "" {
			r.Set("orders.cluster-x.us-east-1.rds.amazonaws.com", step.set) // the target moves; its aliases follow
		}
		for _, name := range []string{"db.orders.internal", "db.example"} {
			if got, err := r.Lookup(ctx, name); err != nil || len(got) != 1 || got[0] != step.want {
				t.Errorf("Lookup(%q) = %v, %v; want [%s]", name, got, err, step.want)
			}
		}
	}
	// What a client learns of the chain: one step (a CNAME query), or its
	// end (net.Resolver.LookupCNAME).
	if got := r.CNAME("db.example"); got != "db.orders.internal" {
		t.Errorf("CNAME(db.example) = %q", got)
	}
	if got := r.CNAME("orders.cluster-x.us-east-1.rds.amazonaws.com"); got != "" {
		t.Errorf("CNAME of a name with addresses = %q", got)
	}
	for _, name := range []string{"DB.Example", "orders.cluster-x.us-east-1.rds.amazonaws.com."} {
		if got, err := r.LookupCNAME(ctx, name); err != nil || got != "orders.cluster-x.us-east-1.rds.amazonaws.com." {
			t.Errorf("LookupCNAME(%q) = %q, %v", name, got, err)
		}
	}
	r.Alias("dangling.example", "nowhere.example")
	var dnsErr *net.DNSError
	if _, err := r.LookupCNAME(ctx, "dangling.example"); !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
		t.Errorf("LookupCNAME of a dangling CNAME: %v; want NXDOMAIN", err)
	}
	r.Fail("orders.cluster-x.us-east-1.rds.amazonaws.com")
	if _, err := r.LookupCNAME(ctx, "db.example"); !errors.As(err, &dnsErr) || !dnsErr.IsTemporary {
		t.Errorf("LookupCNAME through a failing name: %v; want a temporary error", err)
	}
	r.Set("orders.cluster-x.us-east-1.rds.amazonaws.com", "127.0.0.21")
	r.Alias("loop.a", "loop.b")
	r.Alias("loop.b", "loop.a")
	if _, err := r.Lookup(ctx, "loop.a"); err == nil {
		t.Error("a CNAME loop resolved")
	}
	if _, err := r.LookupCNAME(ctx, "loop.a"); err == nil {
		t.Error("LookupCNAME of a CNAME loop succeeded")
	}
	r.Alias("db.orders.internal", "")
	if _, err := r.Lookup(ctx, "db.orders.internal"); err == nil {
		t.Error("a removed alias still resolves")
	}
}
