// Package pgurl writes the connection strings the fakes' PostgreSQL
// servers are reached by: as the superuser postgres, which the fakes run
// their servers with.
package pgurl

import "net/url"

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
