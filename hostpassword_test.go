package holdfast_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
)

// TestHostPasswordFunc: without blue/green routing, the host password
// function is told the connection's own host, once per new connection.
// (bluegreen's TestNamesThroughSwitchover covers the names a switchover
// substitutes, and the retry after a 28000 for the other name.)
func TestHostPasswordFunc(t *testing.T) {
	t.Parallel()
	cfg, _ := poolConfig(t, pgtest.DSN(t), "sslmode=disable")
	var mu sync.Mutex
	var hosts []string
	f := newFactory(t, holdfast.WithPasswordFunc(func(_ context.Context, host string) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		hosts = append(hosts, host)
		return cfg.ConnConfig.Password, nil // the test server trusts everyone
	}))
	pool := newPool(t, f, cfg)
	if err := pool.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(hosts, []string{cfg.ConnConfig.Host}) {
		t.Errorf("password function called for %q, want once for %q", hosts, cfg.ConnConfig.Host)
	}
}
