// Package rest is the HTTP plumbing shared by the lb adapters: JSON
// requests, bounded response reads (1 MiB), and redaction of secrets (in
// plain, JSON-escaped and URL-escaped forms) from device messages and
// transport errors, which may end up in errors and logs; [Session], the
// session credential with serialised logins and re-logins; and [Device],
// which sends a member call with the session's credential, logs in again
// once when the answer says the session has ended, and turns every
// failure into an [*lb.APIError] as the vendor's [Dialect] reads it.
package rest
