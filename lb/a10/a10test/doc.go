// Package a10test is a fake A10 ACOS aXAPI v3 for tests of
// [github.com/holdfast-db/holdfast/lb/a10], on an [net/http/httptest] TLS
// server (plain HTTP with [Options].PlainHTTP).
//
// # What it fakes
//
//   - Signature auth: POST /axapi/v3/auth answers
//     {"authresponse":{"signature": ...}} or 403 with an
//     "authorizationschema" body; calls carry "Authorization: A10 <sig>";
//     sessions end after [Options].IdleTimeout without a call (by
//     [Options].Now) or at POST /axapi/v3/logoff, and then answer 401
//     "Invalid admin session.". GET /axapi/v3/version/oper answers a
//     version, for keep-alives.
//   - Partitions: POST /axapi/v3/active-partition/NAME switches the
//     session; servers live in one partition ([Real].Partition).
//   - Real servers (/axapi/v3/slb/server/NAME) and their ports
//     (.../port/P+PROTO): GET; POST modifies ("action": enable, disable,
//     disable-with-health-check; "stats-data-action"); PUT replaces, so a
//     partial PUT resets what it omits and drops the port list, as on a
//     device. /oper reports Up, or Disabled once the action is not enable.
//   - /stats with curr-conn on the server and curr_conn on ports (ACOS
//     spells them both ways). With statistics disabled, every counter reads
//     0 whatever the traffic: the pitfall a client must catch.
//   - Errors in aXAPI's shape:
//     {"response":{"status":"fail","err":{"code":1023460352,"from":"CM","msg":"..."}}}.
//
// # Connections
//
// An enabled server or port has its Conns connections; once disabled, each
// stats read reports the next value of its Decay (the last one repeats).
//
// # Faults and observation
//
// [Server.Inject] adds a [Fault] (expired session, busy code 1023464193 on
// HTTP 400, no write privilege 419545856, 404, 500, slow answer).
// [Server.Hold], [Server.Requests], [Server.Count], [Server.Logins],
// [Server.ActiveSessions] and [Server.MaxInFlight] work as in the F5 fake.
//
// A Server is safe for concurrent use; [Server.Close] ends held and slow
// requests and stops it.
package a10test
