// Package f5 is an [lb.Balancer] for F5 BIG-IP, over iControl REST.
//
// # Session
//
// [Client.Login] posts the credentials to /mgmt/shared/authn/login and
// sends the token it gets as X-F5-Auth-Token on every call. A token lives
// 1200 s by default; [Config].TokenTimeout sets another lifetime (PATCH
// /mgmt/shared/authz/tokens/TOKEN {"timeout": N}) at login and on every
// [Client.KeepAlive]. BIG-IP refuses to extend a token past 36000 s with
// 406; KeepAlive then deletes it and logs in again. Any call answered 401
// logs in again once and is retried; a second 401 means the account lacks
// the privilege. [Client.Logout] deletes the token: each user has 100
// token slots.
//
// # Members
//
// A member with Pool and Port is a pool member,
// /mgmt/tm/ltm/pool/~P~pool/members/~P~node:port; a member with neither is
// a node, /mgmt/tm/ltm/node/~P~node (every pool), where P is the
// partition (default "Common"). The state is written with a PATCH of the
// (session, state) pair (see [Client.SetState]) and read back through
// [AdminState], since BIG-IP reports "monitor-enabled" and the monitor's
// view instead of what was written. Connections are
// serverside.curConns of /stats ([ParseCurConns]), whether the counter
// comes whole or split into 32-bit halves.
//
// # Errors
//
// Failures are [*lb.APIError]s classified by HTTP status: 401 after the
// re-login and 403 no privilege, 404 not found, 503 busy (BIG-IP
// restarting), other 5xx unavailable, other 4xx rejected; at login, 400,
// 401 and 403 are authentication failures. The password and the token are
// redacted from every message.
package f5
