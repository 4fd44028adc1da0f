// Package pgurl writes the connection strings the fakes' PostgreSQL
// servers are reached by: as the superuser postgres, which the fakes run
// their servers with.
package pgurl

import (
	"net"
	"net/url"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Superuser returns "postgres://postgres@host/database?query", then each
// of extra ("key=value" settings) after an "&".
func Superuser(host, database, query string, extra ...string) string {
	u := url.URL{Scheme: "postgres", User: url.User("postgres"), Host: host, Path: "/" + database, RawQuery: query}
	s := u.String()
	for _, e := range extra {
		s += "&" + e
	}
	return s
}

// Endpoint returns a superuser connection string for host, database
// postgres: host is an endpoint name, which a client's LookupFunc
// resolves to "ip:port" (a name without a port is given port, which the
// resolver's answer overrides), or an "ip:port". Without caFile it has
// sslmode=disable. With it, a name gets
// sslmode=verify-full&sslrootcert=caFile: the server's certificate must
// be signed by that CA and name host, whatever address the name leads
// to. An IP address keeps sslmode=disable: a certificate names no
// address. extra are more "key=value" settings.
func Endpoint(host string, port int, caFile string, extra ...string) string {
	name, _, err := net.SplitHostPort(host)
	if err != nil {
		name = host
		host = net.JoinHostPort(host, strconv.Itoa(port))
	}
	query := "sslmode=disable"
	if caFile != "" && net.ParseIP(name) == nil {
		query = "sslmode=verify-full&sslrootcert=" + url.QueryEscape(caFile)
	}
	return Superuser(host, "postgres", query, extra...)
}

// PoolConfig parses dsn and sets its LookupFunc to lookup (a fake DNS, or
// a client-side cache in front of one).
func PoolConfig(dsn string, lookup pgconn.LookupFunc) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.ConnConfig.LookupFunc = lookup
	return cfg, nil
}
