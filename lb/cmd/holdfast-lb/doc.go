// Command holdfast-lb drains and controls groups of L4 load-balancer
// members (F5 BIG-IP, A10 ACOS) around a deploy, from a shell or a
// pipeline. Install it with
//
//	go install github.com/holdfast-db/holdfast/lb/cmd/holdfast-lb@latest
//
//	holdfast-lb [-config FILE] [-operator NAME] COMMAND [flags] GROUP
//
// Commands:
//
//	status GROUP          each member: Enabled / Disabling / Disabled,
//	                      admin state, connections, and the lock holder
//	enable GROUP          accept new connections again (after the deploy)
//	disable GROUP         no new connections; persistent ones still served
//	forced-offline GROUP  no new connections at all; do not wait
//	drain GROUP           forced-offline, then wait until no connection is
//	                      left, printing a progress line; exit 1 if some
//	                      remain at the timeout
//	check-config          validate the configuration file
//	serve                 the web console, its JSON API and /metrics
//	deploy GROUP -- COMMAND [ARGS]
//	                      the whole deploy, under the group's lock:
//	                      silence, drain, COMMAND, enable, expire
//	version               the module version this program was built from
//
// Command flags: -node NAME (repeatable) acts on some nodes of the group;
// -interval, -timeout and -concurrency override the configuration's drain
// settings; -restore-on-failure puts the members back as they were when a
// drain fails (by default they stay forced offline, for someone to look
// at).
//
// The configuration is a JSON file (see [github.com/holdfast-db/holdfast/lb.Config]),
// from -config or $HOLDFAST_LB_CONFIG:
//
//	{
//	  "database": {"dsn_env": "HOLDFAST_LB_DSN"},
//	  "balancers": {
//	    "f5-prod": {
//	      "vendor": "f5",
//	      "endpoint": "https://bigip.example.net",
//	      "username": "deploy",
//	      "password_env": "F5_PASSWORD",
//	      "partition": "Common",
//	      "ca_file": "/etc/holdfast/bigip-ca.pem"
//	    },
//	    "a10-prod": {
//	      "vendor": "a10",
//	      "endpoint": "https://thunder.example.net",
//	      "username": "deploy",
//	      "password_env": "A10_PASSWORD",
//	      "partition": "payments"
//	    }
//	  },
//	  "groups": {
//	    "payments": [
//	      {"balancer": "f5-prod", "pool": "payments_443", "node": "pay-1", "port": 443},
//	      {"balancer": "f5-prod", "pool": "payments_443", "node": "pay-2", "port": 443},
//	      {"balancer": "a10-prod", "node": "pay-batch-1", "port": 8443}
//	    ]
//	  },
//	  "operators": {
//	    "alice": ["payments"],
//	    "sre-oncall": ["*"]
//	  },
//	  "drain": {"interval": "1s", "timeout": "2m", "concurrency": 4}
//	}
//
// Give passwords through password_env (or password, never both) and the
// DSN through dsn_env or dsn. An A10 member's port may name a protocol
// ("protocol", default "tcp"). Unknown keys are errors. "operators" maps
// who may control which groups; "*" is every group.
//
// Endpoints are https://: an http:// endpoint is refused unless the
// balancer says "allow_insecure_http": true (the login sends the
// password). "insecure_skip_verify": true turns certificate verification
// off (not with ca_file). Either makes every command warn in its log when
// it starts and note it in the audit entry of every request reaching the
// balancer. drain.interval (and -interval) is at least 100ms,
// drain.timeout (and -timeout) at most 1h.
//
// Groups may overlap: a group's lock also locks its members, so that
// while alice holds "payments", a request on an "all-web" group sharing
// one of its members is refused, naming alice, "payments" and the
// member. To drive every web member at once, list them all in one group.
//
// The operator comes from -operator, $HOLDFAST_LB_OPERATOR or $USER, and
// must be allowed the group. It is asserted, not authenticated: whoever
// runs the command chooses it. The audit records beside it how it was
// given, the OS user of the process (by user ID) and the CI's identity
// variables when present (GITHUB_ACTOR, GITHUB_WORKFLOW, GITHUB_RUN_ID;
// BUILD_USER_ID, BUILD_TAG; GITLAB_USER_LOGIN, CI_JOB_ID; ...). See
// lb/SECURITY.md. Every control request takes the group's lock in
// PostgreSQL and is audited there and as a JSON log line on standard
// error. The lock is a PostgreSQL advisory lock held by the command's own
// session: if the command dies, its session ends and the lock with it.
// Passwords and DSNs are never printed.
//
// While it waits, drain prints a progress line, rewritten in place on a
// terminal and one line per change in CI logs:
//
//	drain payments: 1 of 3 members in use, 4 current connections [12s of 2m0s]
//
// status shows each member as Enabled, Disabling (no new connections, some
// left) or Disabled, with its connections and the lock holder:
//
//	group payments: locked by alice@ci-7 since 2025-06-02T09:14:03Z
//	BALANCER  MEMBER                   STATUS     ADMIN           CONNS  AVAILABILITY  ERROR
//	f5-prod   payments_443/pay-1:443   Disabled   forced-offline  0      user-down
//	f5-prod   payments_443/pay-2:443   Disabling  forced-offline  3      user-down
//	a10-prod  pay-batch-1:8443         Enabled    enabled         12     Up
//
// Pooled clients never reach zero connections by themselves: pgxpool,
// HTTP keep-alive and F5 OneConnect keep idle connections open. Give
// pgxpool a MaxConnLifetime and MaxConnIdleTime shorter than the drain
// timeout, or drain the service from the inside first (package readiness
// of github.com/holdfast-db/holdfast).
//
// # Console
//
// serve runs the web console (package
// [github.com/holdfast-db/holdfast/lb/console]): every group with each
// member's phase, admin state and connections, the lock holder and since
// when, the request in progress and the last audited requests, and the
// controls for the groups the operator may control. Put it behind the
// organisation's authenticating proxy and name the header the proxy sets
// to the signed-in user:
//
//	holdfast-lb serve -listen 127.0.0.1:8080 -operator-header X-Forwarded-User
//
// The header is trusted only from -trusted-proxy addresses (default
// loopback: a proxy on the same machine, and so every local user of it),
// and the proxy must overwrite any copy the client sends: a header with
// two values, or a comma, is not believed. Controls record the header and
// the proxy's address in the audit. For example, with oauth2-proxy in front
// (--upstream=http://127.0.0.1:8080 --pass-user-headers, which sets
// X-Forwarded-User), or nginx:
//
//	location / {
//	    auth_request /oauth2/auth;
//	    auth_request_set $user $upstream_http_x_auth_request_user;
//	    proxy_set_header X-Forwarded-User $user;   # overwrites the client's
//	    proxy_pass http://127.0.0.1:8080;
//	}
//
// serve -operator NAME makes every request NAME, for a console on your own
// machine; with neither flag the console is read-only. The members are
// read every -poll (2s) by one poller for every viewer; locks and
// requests come from PostgreSQL on every page. /metrics serves the
// controller's metrics (members by phase, drain durations, timeouts, lock
// waits, API errors by vendor) in the Prometheus exposition format. On
// SIGINT or SIGTERM serve stops taking requests and waits up to 30s for
// the drains it started before it cancels them.
//
// # Deploy
//
// deploy runs the whole workflow with the group's lock held from the
// first step to the last, so that no one else drives the group meanwhile
// and a failed drain cannot be followed by a deploy:
//
//	holdfast-lb -operator "$BUILD_USER" deploy -lock-wait 10m payments -- ./deploy.sh payments
//
// In order:
//
//  1. check the permission and take the lock (-lock-wait waits for it);
//  2. silence the group's alerts in Alertmanager (the configuration's
//     alertmanager section: its matchers for the group), for at most
//     max_duration (default 1h): a silence ends by itself then;
//  3. drain: forced offline, then wait for zero connections; if some
//     remain at the timeout, stop with exit 1: COMMAND never runs;
//  4. run COMMAND, with HOLDFAST_LB_GROUP, HOLDFAST_LB_OPERATOR,
//     HOLDFAST_LB_NODES, HOLDFAST_LB_AUDIT_ID and HOLDFAST_LB_SILENCE_ID in
//     its environment;
//  5. enable the members; if COMMAND failed (exit 5), enable them too,
//     unless -leave-offline-on-failure leaves them forced offline, which
//     the command says;
//  6. expire the silence (on every path once it is made), release the
//     lock, and send the notifications.
//
// Example pipelines: lb/examples/Jenkinsfile and
// lb/examples/github-actions-deploy.yml.
//
// # Notifications
//
// Every command that changes a group notifies the configuration's
// webhooks (Microsoft Teams, Slack, JSON; package
// [github.com/holdfast-db/holdfast/lb/notify]): drain started, drained,
// timed out (with the members still holding connections), enabled,
// disabled, forced offline, lock refused, failed, deploy failed. Delivery
// is retried with backoff and never blocks a drain; a command waits up to
// 30s at its end for its notifications to go out. Webhook URLs are
// secrets: give them through url_env.
//
//	"notify": {"webhooks": [
//	  {"name": "ops-teams", "format": "teams", "url_env": "TEAMS_WEBHOOK_URL"},
//	  {"name": "ops-slack", "format": "slack", "url_env": "SLACK_WEBHOOK_URL",
//	   "events": ["timed-out", "failed", "deploy-failed", "lock-refused"]}
//	]},
//	"alertmanager": {"url": "http://alertmanager:9093", "max_duration": "1h",
//	  "matchers": {"payments": [{"name": "service", "value": "payments"}]}}
//
// Exit codes:
//
//	0  done
//	1  not drained: connections remained at the timeout; abort the deploy
//	   (deploy: COMMAND was not run)
//	2  usage or configuration error
//	3  refused: not permitted, or the group is locked by someone else
//	4  failed: balancer, database, Alertmanager or state error, or interrupted
//	5  deploy: COMMAND failed
//
// A pipeline without deploy:
//
//	holdfast-lb -operator "$BUILD_USER" drain payments || exit 1
//	./deploy.sh payments
//	holdfast-lb -operator "$BUILD_USER" enable payments
package main
