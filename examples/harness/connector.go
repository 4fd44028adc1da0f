package harness

import (
	"context"
	"net"
	"strconv"

	"github.com/holdfast-db/holdfast/fakes"
	"github.com/jackc/pgx/v5"
)

// FakeConnector makes cc dial through a fakes.Connector that plays steps,
// then connects for real to cc's host and port, as the Cloud SQL
// connector would: once per connect. The host is not looked up (it may
// resolve to several addresses, each dialled in turn), and there is no
// second try with or without TLS; when the sslmode allows a connection
// without TLS (disable, allow, prefer: the default), that is the one kept.
// So each failing step fails one connect, and the dial counts are exact
// (the demo and otel examples print them).
func FakeConnector(cc *pgx.ConnConfig, steps ...fakes.Step) *fakes.Connector {
	conn := fakes.NewConnector(net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port))), steps...)
	cc.DialFunc = conn.Dial
	cc.LookupFunc = func(_ context.Context, host string) ([]string, error) {
		return []string{host}, nil
	}
	plain := cc.TLSConfig == nil
	for _, fb := range cc.Fallbacks {
		plain = plain || fb.TLSConfig == nil
	}
	if plain {
		cc.TLSConfig = nil
	}
	cc.Fallbacks = nil
	return conn
}
