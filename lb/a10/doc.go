// Package a10 is an [lb.Balancer] for A10 Thunder / ACOS, over aXAPI v3.
//
// # Session
//
// [Client.Login] posts the credentials to /axapi/v3/auth, sends the
// signature it gets as "Authorization: A10 <signature>", and activates
// [Config].Partition (POST /axapi/v3/active-partition/NAME) unless it is
// "shared". aXAPI has no session extension: sessions end after an idle
// time set on the device, so [Client.KeepAlive] makes a cheap call (GET
// /axapi/v3/version/oper), and any call answered 401 (or code 419495936)
// authenticates again once and is retried. [Client.Logout] posts
// /axapi/v3/logoff.
//
// # Members
//
// A member is a real server, /axapi/v3/slb/server/NAME, or one of its
// ports when Port is set, .../port/PORT+PROTO. Its state is the "action",
// modified with POST (a partial PUT would replace the object and wipe its
// port list):
//
//	| AdminState    | action                    |
//	|---------------|---------------------------|
//	| Enabled       | enable                    |
//	| Disabled      | disable-with-health-check |
//	| ForcedOffline | disable                   |
//
// Mapping Disabled to disable-with-health-check is a judgement: ACOS has no
// equivalent of F5's persistence-only disabled state. The oper state
// (/oper: Up, Down, Disabled) is reported as the availability.
// Service-group members are not supported.
//
// # Connections
//
// [Client.Connections] reads curr-conn from /stats, accepting curr_conn
// too (ACOS spells it both ways, by version and level). When the server
// or port has stats-data-action "stats-data-disable", every counter reads
// 0 whatever the traffic: it then returns an [*lb.APIError] of Kind
// [lb.KindStatsDisabled] rather than a 0 that would pass for drained.
//
// # Errors
//
// Failures are [*lb.APIError]s classified by ACOS error code first, then
// by HTTP status: not-found codes (1023460352, ...) and 404 not found;
// 419545856 and 403 no privilege; 1023464192/1023464193 (not ready,
// busy) and 503 busy; other 5xx unavailable; other 4xx rejected. The
// password and the signature are redacted from every message.
package a10
