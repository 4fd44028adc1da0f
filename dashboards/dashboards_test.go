package dashboards_test

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/holdfast-db/holdfast/dashboards"
)

// One run of the fault scenario serves the tests of this package: the
// exported names and labels, the list of docs/telemetry.md, and the
// dashboard's queries.
func TestPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("plays incidents on real servers and scrapes every panel's series: skipped with -short")
	}
	s, body := scrapeRun(t)
	if os.Getenv("HOLDFAST_PRINT_SCRAPE") != "" {
		t.Log(body)
	}
	t.Run("names and labels", func(t *testing.T) { checkNames(t, s) })
	t.Run("docs", func(t *testing.T) { checkDoc(t, s) })
	t.Run("dashboard", func(t *testing.T) { checkDashboard(t, s) })
	if strings.Contains(body, "password") {
		t.Errorf("a scrape mentions a password:\n%s", body)
	}
}

// target are the labels of every holdfast_* series of a pool.
var target = []string{"db_client_connection_pool_name", "server_address", "server_port", "db_namespace"}

func checkNames(t *testing.T, s scrape) {
	for _, tc := range []struct {
		name   string
		labels []string
	}{
		{"holdfast_connect_attempts_total", append([]string{"holdfast_stage", "holdfast_outcome"}, target...)},
		{"holdfast_retries_total", append([]string{"holdfast_layer", "holdfast_stage", "error_type"}, target...)},
		{"holdfast_recoveries_total", append([]string{"holdfast_layer", "holdfast_stage", "error_type"}, target...)},
		{"holdfast_retry_exhausted_total", append([]string{"holdfast_layer", "holdfast_stage", "error_type", "holdfast_retry_stop"}, target...)},
		{"holdfast_retry_budget_rejections_total", append([]string{"holdfast_layer", "holdfast_stage", "error_type"}, target...)},
		{"holdfast_bluegreen_phase", append([]string{"holdfast_bluegreen_id"}, target...)},
		{"holdfast_connect_queued_total", append([]string{"holdfast_outcome"}, target...)},
		{"holdfast_connect_queue_duration_seconds_count", append([]string{"holdfast_outcome"}, target...)},
		{"holdfast_failover_events_total", []string{"holdfast_failover_event", "server_address", "server_port"}},
		{"holdfast_readiness_ready_ratio", nil},
		{"holdfast_readiness_transitions_total", []string{"holdfast_readiness_health", "holdfast_readiness_reason"}},
		{"holdfast_readiness_drain_duration_seconds_count", []string{"holdfast_outcome"}},
		{"holdfast_readiness_check_ready_ratio", append([]string{"holdfast_readiness_check"}, target...)},
		{"holdfast_readiness_check_transitions_total", append([]string{"holdfast_readiness_check", "holdfast_readiness_health", "holdfast_readiness_reason"}, target...)},
		{"holdfast_readiness_check_duration_seconds_count", append([]string{"holdfast_readiness_check", "holdfast_outcome"}, target...)},
		{"db_client_connection_count", []string{"db_client_connection_pool_name", "db_client_connection_state"}},
		{"db_client_connection_max", []string{"db_client_connection_pool_name"}},
		{"db_client_connection_pending_requests", []string{"db_client_connection_pool_name"}},
		{"db_client_connection_timeouts_total", []string{"db_client_connection_pool_name"}},
		{"db_client_connection_wait_time_seconds_bucket", []string{"db_client_connection_pool_name", "le"}},
		{"db_client_connection_use_time_seconds_bucket", []string{"db_client_connection_pool_name", "le"}},
		{"db_client_connection_create_time_seconds_bucket", []string{"db_client_connection_pool_name", "le"}},
		{"db_client_operation_duration_seconds_bucket", []string{"db_system_name", "db_namespace", "server_address", "server_port", "le"}},
	} {
		if !s.has(tc.name) {
			t.Errorf("%s: not scraped", tc.name)
			continue
		}
		for _, ser := range s[tc.name] {
			for _, l := range tc.labels {
				if _, ok := ser.labels[l]; !ok {
					t.Errorf("%s%v lacks label %s", tc.name, ser.labels, l)
				}
			}
			if strings.HasPrefix(tc.name, "holdfast_") {
				for l, v := range ser.labels {
					if strings.Contains(v, "127.0.0.") {
						t.Errorf("%s: label %s=%s is an address per connection, not the pool's target", tc.name, l, v)
					}
				}
			}
		}
	}
	// Each pool has its own name: two pools on one database are apart.
	pools := map[string]bool{}
	for _, ser := range s["db_client_connection_max"] {
		pools[ser.labels["db_client_connection_pool_name"]] = true
	}
	for _, want := range []string{"orders", "reports", "limited", "blip", "stingy", "small"} {
		if !pools[want] {
			t.Errorf("no db_client_connection_max for pool %q (have %v)", want, pools)
		}
	}
}

// documented returns the names that the table "Prometheus names" of
// the repository's docs/telemetry.md lists: the first cell of each row.
func documented(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../docs/telemetry.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n## Prometheus names\n")
	if !ok {
		t.Fatal("docs/telemetry.md has no section \"Prometheus names\"")
	}
	rest, _, _ = strings.Cut(rest, "\n## ")
	var out []string
	for _, line := range strings.Split(rest, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || cells[0] != "" {
			continue // not a table row
		}
		name := strings.Trim(strings.TrimSpace(cells[1]), "`")
		if strings.HasPrefix(name, "holdfast_") || strings.HasPrefix(name, "db_client_") {
			out = append(out, name)
		}
	}
	if len(out) < 10 {
		t.Fatalf("found %d names in docs/telemetry.md's Prometheus names: %q", len(out), out)
	}
	sort.Strings(out)
	return out
}

// onlyDuringSwitchover is documented but recorded only while a blue/green
// switchover holds work, which the scenario does not play.
const onlyDuringSwitchover = "holdfast_bluegreen_suspended_duration_seconds"

func checkDoc(t *testing.T, s scrape) {
	var scraped []string
	for _, n := range append(s.names("holdfast_"), s.names("db_client_")...) {
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(n, suf); ok && strings.HasSuffix(base, "_seconds") {
				n = base
			}
		}
		if !slices.Contains(scraped, n) {
			scraped = append(scraped, n)
		}
	}
	sort.Strings(scraped)
	doc := documented(t)
	for _, n := range scraped {
		if !slices.Contains(doc, n) {
			t.Errorf("%s is exported but not in docs/telemetry.md's Prometheus names", n)
		}
	}
	for _, n := range doc {
		if !slices.Contains(scraped, n) && n != onlyDuringSwitchover {
			t.Errorf("docs/telemetry.md lists %s, which the scenario did not export", n)
		}
	}
}

var (
	selector = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}`)
	matcher  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!=|!~|=)`)
	by       = regexp.MustCompile(`by \(([^)]*)\)`)
)

// checkDashboard checks every query of the dashboard: each names a series
// that exists, and each label it matches or groups by is a label of it.
func checkDashboard(t *testing.T, s scrape) {
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(dashboards.Grafana, &dash); err != nil {
		t.Fatal(err)
	}
	queries := 0
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			queries++
			sels := selector.FindAllStringSubmatch(q.Expr, -1)
			if len(sels) != 1 {
				t.Errorf("panel %q: %d selectors in %q, want one (name{…})", p.Title, len(sels), q.Expr)
				continue
			}
			name := sels[0][1]
			if !s.has(name) {
				t.Errorf("panel %q: %s names no scraped series", p.Title, name)
				continue
			}
			var labels []string
			for _, m := range matcher.FindAllStringSubmatch(sels[0][2], -1) {
				labels = append(labels, m[1])
			}
			for _, m := range by.FindAllStringSubmatch(q.Expr, -1) {
				for _, l := range strings.Split(m[1], ",") {
					labels = append(labels, strings.TrimSpace(l))
				}
			}
			for _, l := range labels {
				found := false
				for _, ser := range s[name] {
					_, found = ser.labels[l]
					if found {
						break
					}
				}
				if !found {
					t.Errorf("panel %q: %s has no label %s", p.Title, name, l)
				}
			}
		}
	}
	for _, v := range dash.Templating.List {
		if v.Definition == "" {
			continue
		}
		m := regexp.MustCompile(`label_values\(([a-z_]+), ([a-z_]+)\)`).FindStringSubmatch(v.Definition)
		if m == nil || !s.has(m[1]) || s[m[1]][0].labels[m[2]] == "" {
			t.Errorf("variable %s: %q names no scraped series and label", v.Name, v.Definition)
		}
	}
	if queries < 15 {
		t.Errorf("%d queries, want the dashboard's 15 or more", queries)
	}
}
