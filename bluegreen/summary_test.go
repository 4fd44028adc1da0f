package bluegreen_test

import (
	"strings"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/internal/bgroute/switchover"
)

// Each summary row has the wrappers' layout: timestamp, offset from
// IN_PROGRESS in ms, event; columns are the wrappers' widths at least, and
// wider for a longer cell, so that every row lines up.
func TestSummaryString(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 2, 15, 14, 30, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	tests := []struct {
		name   string
		events []bluegreen.Event
		want   []string
	}{
		{
			name:   "the wrappers' widths",
			events: []bluegreen.Event{{Time: at(-4050), Name: "PREPARATION"}, {Time: at(0), Name: "IN_PROGRESS"}, {Time: at(4053), Name: "POST"}, {Time: at(11988), Name: "COMPLETED"}},
			want: []string{
				"[bgdId: '1'] Blue/Green Deployment switchover COMPLETED",
				"timestamp                         time offset (ms)                           event",
				strings.Repeat("-", 82),
				"    2026-02-15T14:29:55.950Z              -4050 ms                     PREPARATION",
				"    2026-02-15T14:30:00.000Z                  0 ms                     IN_PROGRESS",
				"    2026-02-15T14:30:04.053Z               4053 ms                            POST",
				"    2026-02-15T14:30:11.988Z              11988 ms                       COMPLETED",
				strings.Repeat("-", 82),
			},
		},
		{
			name: "longer cells widen their column",
			events: []bluegreen.Event{{Time: at(0), Name: "IN_PROGRESS"}, {Time: at(700), Name: "Traffic released on blue DNS update"},
				{Time: at(30000), Name: "Routing normal"}},
			want: []string{
				"[bgdId: '1'] Blue/Green Deployment switchover COMPLETED",
				"timestamp                         time offset (ms)                               event",
				strings.Repeat("-", 86),
				"    2026-02-15T14:30:00.000Z                  0 ms                         IN_PROGRESS",
				"    2026-02-15T14:30:00.700Z                700 ms Traffic released on blue DNS update",
				"    2026-02-15T14:30:30.000Z              30000 ms                      Routing normal",
				strings.Repeat("-", 86),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := bluegreen.Summary{ID: "1", Outcome: bluegreen.OutcomeCompleted, Anchor: at(0), Events: tt.events}.String()
			if got != strings.Join(tt.want, "\n") {
				t.Errorf("summary:\n%s\nwant:\n%s", got, strings.Join(tt.want, "\n"))
			}
			// Every row is as wide as the rule.
			lines := strings.Split(got, "\n")
			for _, l := range lines[1:] {
				if len(l) != len(lines[2]) {
					t.Errorf("row %q is %d wide, the rule %d", l, len(l), len(lines[2]))
				}
			}
		})
	}
	// Every event name this package emits fits its column.
	var events []bluegreen.Event
	for _, name := range []string{switchover.EventBlueDNSUpdated, switchover.EventGreenDNSRemoved, switchover.EventGreenTopologyChanged,
		switchover.EventBlueConnsDropped, switchover.EventReleasedOnBlueDNS, switchover.EventTimerExpired, switchover.EventRolledBack,
		switchover.EventRoutingNormal, "CREATED (rollback)", "NOT_CREATED"} {
		events = append(events, bluegreen.Event{Time: at(len(events)), Name: name})
	}
	lines := strings.Split(bluegreen.Summary{ID: "1", Outcome: bluegreen.OutcomeCompleted, Anchor: at(0), Events: events}.String(), "\n")
	for _, l := range lines[1:] {
		if len(l) != len(lines[2]) {
			t.Errorf("row %q overflows the table (rule %d wide)", l, len(lines[2]))
		}
	}
}
