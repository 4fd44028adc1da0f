// Package f5test is a fake F5 BIG-IP iControl REST API for tests of
// [github.com/holdfast-db/holdfast/lb/f5], on an [net/http/httptest] TLS
// server (plain HTTP with [Options].PlainHTTP).
//
// # What it fakes
//
//   - Token auth: POST /mgmt/shared/authn/login answers a token object
//     (token.token, token.timeout 1200, ...); PATCH
//     /mgmt/shared/authz/tokens/T {"timeout": N} extends it, with 406 past
//     the 36000 s absolute lifetime; DELETE ends it; at most
//     [Options].MaxTokens per user (400 beyond). Tokens expire by
//     [Options].Now. An unknown or expired token answers 401
//     "X-F5-Auth-Token does not exist.".
//   - Pool members (/mgmt/tm/ltm/pool/~P~pool/members/~P~node:port) and
//     nodes (/mgmt/tm/ltm/node/~P~node): GET, and PATCH of the session
//     ("user-enabled", "user-disabled") and state ("user-up",
//     "user-down"), other values answering 400. The read-back differs from
//     what was written, as on a device: with a monitor, an enabled member
//     reads "monitor-enabled" and "up"; without, "unchecked".
//   - /stats in BIG-IP's envelope (entries.<self link>.nestedStats.entries)
//     with serverside.curConns as {"value": n} or, with
//     [Member].SplitCounters, {"high": h, "low": l}.
//   - Errors in iControl's shape: {"code": 404, "message": "01020036:3: The
//     requested Pool Member (...) was not found.", ...}.
//
// # Connections
//
// An enabled member has [Member].Conns connections. Once it is disabled or
// forced offline, each stats read reports the next value of
// [Member].Decay (the last one repeats), so a test drives the decay by the
// number of polls, not by time.
//
// # Faults and observation
//
// [Server.Inject] adds a [Fault] (expired token, busy 503, denied 401, 404,
// 500, slow answer) for matching requests, after Skip of them, Times
// times. [Server.Hold] holds requests until n of them wait at once, to
// prove or bound concurrency. [Server.Requests], [Server.Count],
// [Server.Logins], [Server.ActiveTokens] and [Server.MaxInFlight] report
// what the fake saw.
//
// A Server is safe for concurrent use; [Server.Close] ends held and slow
// requests and stops it.
package f5test
