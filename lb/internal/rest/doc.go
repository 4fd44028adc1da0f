// Package rest is the HTTP plumbing shared by the lb adapters: JSON
// requests, bounded response reads (1 MiB), and redaction of secrets (in
// plain, JSON-escaped and URL-escaped forms) from device messages and
// transport errors, which may end up in errors and logs; and [Session],
// the session credential with serialised logins and re-logins.
package rest
