package faults_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/holdfast-db/holdfast/fakes/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// proxy is a toxiproxy proxy in front of the test server.
type proxy struct {
	p    *toxiproxy.Proxy
	addr string // where it listens
	n    atomic.Int64
}

var toxiServer = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())

// newProxy starts a proxy to upstream on a free loopback port; the test's
// cleanup stops it (closing its connections).
func newProxy(t *testing.T, upstream string) *proxy {
	t.Helper()
	p := toxiproxy.NewProxy(toxiServer, fmt.Sprintf("%s-%d", t.Name(), proxySeq.Add(1)), "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return &proxy{p: p, addr: p.Listen}
}

var proxySeq atomic.Int64

// toxic adds a toxic of type typ to stream ("upstream" or "downstream").
func (p *proxy) toxic(t *testing.T, typ, stream string, attrs string) string {
	t.Helper()
	name := fmt.Sprintf("%s-%s-%d", typ, stream, p.n.Add(1))
	js := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"attributes":{%s}}`, name, typ, stream, attrs)
	if _, err := p.p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
		t.Fatal(err)
	}
	return name
}

// freeze stops all data through the proxy in both directions, existing
// connections included, without closing anything: a silent drop.
func (p *proxy) freeze(t *testing.T) {
	p.toxic(t, "timeout", "upstream", `"timeout":0`)
	p.toxic(t, "timeout", "downstream", `"timeout":0`)
}

// clear removes every toxic.
func (p *proxy) clear() { p.p.Toxics.ResetToxics(context.Background()) }

// serverAddr is the test server's host:port.
func serverAddr(t *testing.T) (dsn, addr string) {
	t.Helper()
	dsn = pgtest.DSN(t)
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return dsn, net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port)))
}

// routedConfig returns a pool config for the test server whose host name
// resolves to whatever route returns at connect time (a DNS record that
// moves), without TLS.
func routedConfig(t *testing.T, dsn string, route func() string, extra string) *pgxpool.Config {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn + "&sslmode=disable" + extra)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Host = "db.faults.test"
	cfg.ConnConfig.LookupFunc = func(context.Context, string) ([]string, error) { return []string{route()}, nil }
	return cfg
}
