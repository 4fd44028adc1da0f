// Package notify sends holdfast-lb's control events ([lb.Event]: drain
// started, drained, timed out with the members still holding connections,
// enabled, disabled, forced offline, lock refused, failed, deploy failed)
// to webhooks: Microsoft Teams (a message with an Adaptive Card, which
// Teams Workflows and incoming webhooks take), Slack (an incoming
// webhook's text and blocks) and any receiver of JSON.
//
// A [Dispatcher] is an [lb.Notifier]: give it to
// lb.ControllerConfig.Notifier. Notify never blocks and never fails a
// request: each webhook has a queue (100 events) and a goroutine that
// posts them in order, retrying a failed post (no answer, 408, 429 or
// 5xx) with a backoff from 1 s doubling to 30 s, ±20% jitter, 6 attempts
// in all; a 4xx other than 408 and 429 is not retried. An event that does
// not fit the queue is dropped and logged. [Dispatcher.Close] delivers
// what is queued within its context and joins the goroutines.
//
// Webhook URLs hold tokens: they are [lb.Secret]s, and logs and errors
// ([*DeliveryError]) name the webhook, never its URL.
//
// In the configuration file:
//
//	"notify": {"webhooks": [
//	  {"name": "ops-teams", "format": "teams", "url_env": "TEAMS_WEBHOOK_URL"},
//	  {"name": "ops-slack", "format": "slack", "url_env": "SLACK_WEBHOOK_URL",
//	   "events": ["timed-out", "failed", "deploy-failed", "lock-refused"]},
//	  {"name": "audit", "format": "json", "url_env": "AUDIT_WEBHOOK_URL", "groups": ["payments"]}
//	]}
package notify
