// Package alertmanager silences a group's alerts in Prometheus
// Alertmanager (API v2) for the window of a deploy: a drained node's
// health checks and error rates would otherwise page the on-call during
// every deploy.
//
// [Client] creates (POST /api/v2/silences), reads (GET
// /api/v2/silence/{id}) and expires (DELETE /api/v2/silence/{id})
// silences, retrying an unreachable or failing (5xx) Alertmanager three
// times; failures are [*Error]s that say whether they are retryable.
// [Silencer] holds the matchers of each group, from the configuration
// file:
//
//	"alertmanager": {
//	  "url": "http://alertmanager:9093",
//	  "max_duration": "1h",
//	  "matchers": {
//	    "payments": [{"name": "service", "value": "payments"},
//	                 {"name": "env", "value": "prod"}]
//	  }
//	}
//
// holdfast-lb deploy creates the silence before the drain and expires it
// when the group is enabled again, or on any failure. Every silence ends
// by itself after max_duration (default 1h, at most 24h), so a deploy
// that crashed cannot silence the group for ever. Alertmanager refuses a
// silence whose matchers all match the empty value (it would silence
// everything); so does the configuration check.
package alertmanager
