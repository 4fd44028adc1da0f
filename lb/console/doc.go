// Package console is the web console of holdfast-lb (holdfast-lb serve):
// every configured group at a glance, with each member's phase (Enabled,
// Disabling, Disabled), admin state and current connections, the group's
// lock holder and since when, the request in progress and the last
// audited requests; and, for the groups the operator may control, the
// controls (disable, forced offline, drain, enable), which run through
// [lb.Controller] like the command line: permission checked, the group's
// lock taken, audited.
//
// The pages are rendered on the server (html/template); a small script
// reloads their content every few seconds, shows times in the browser's
// time zone and asks for confirmation before a change. There is no build
// step. The same paths answer JSON (Accept: application/json, or
// ?format=json):
//
//	| Method and path              | Page / JSON                                             |
//	|------------------------------|---------------------------------------------------------|
//	| GET /                        | every group                                             |
//	| GET /groups/{group}          | one group, its last 50 requests, per-node controls      |
//	| POST /groups/{group}/{action}| action: enable, disable, forced-offline, drain          |
//	| GET /audit/{id}              | one audited request, member by member                   |
//	| GET /metrics                 | Prometheus exposition (when configured)                 |
//	| GET /healthz                 | "ok"                                                    |
//
// A control posts a form (node=NAME, repeatable, restricts it to nodes of
// the group) or JSON ({"nodes": [...], "wait": true}). The page is
// redirected (303) to the group's page with ?audit=ID, which shows the
// request from the audit trail. The JSON answer is
// {"audit_id", "result", "error", "holder", "location", "entry"} with the
// status of the result:
//
//	| result      | HTTP | meaning                                                |
//	|-------------|------|--------------------------------------------------------|
//	| ok          | 200  | done                                                   |
//	| running     | 202  | started (a drain goes on after the answer)             |
//	| invalid     | 400  | unknown node                                           |
//	| refused     | 403  | the operator may not control the group                 |
//	| locked      | 409  | someone else holds the group's lock ("holder")         |
//	| not-drained | 412  | connections remained at the drain bound: do not deploy |
//	| failed      | 502  | a balancer, database or state error                    |
//	| canceled    | 503  | the console shut down during the request               |
//
// # State
//
// Nothing of the console's state lives in memory only: the lock holders
// and the requests come from the PostgreSQL store on every page, and the
// members from the balancers, read by one poller for all viewers every
// [Config].Poll (through an [lb.Monitor], which keeps its sessions open:
// a page view makes no balancer call). Several consoles, the command line
// and deploy pipelines see the same locks and audit trail.
//
// # Who the operator is
//
// Behind the organisation's authenticating proxy (oauth2-proxy, an
// identity-aware proxy, Apache or nginx with SSO), set
// [Identity].Header to the header the proxy sets to the signed-in user,
// such as X-Forwarded-User. The header is trusted only on requests from
// [Identity].TrustedProxies (default: loopback, a proxy on the same
// machine), so the console must listen where only the proxy reaches it,
// and the proxy must overwrite any copy of the header the client sends: a
// header with several values (or a comma) is not believed, as a proxy
// that appends its own would leave the client's first. A control records
// how its operator was established (the header and the proxy's address,
// or the fixed operator) in its audit entry ([lb.Origin]), and the
// request's page shows it beside the operator, as asserted.
// [Identity].Fixed makes every request one operator, for a console on
// one's own machine. Without either, or when the header is missing, the
// console is read-only. Controls are shown only for the groups the
// operator may control, and the Controller checks the permission again.
//
// Forms are protected against cross-site posts (http.CrossOriginProtection),
// and pages may not be framed.
//
// # Concurrency
//
// A Console is safe for concurrent use. It owns the poller's goroutine and
// one goroutine per control in progress; [Console.Close] joins them all.
package console
