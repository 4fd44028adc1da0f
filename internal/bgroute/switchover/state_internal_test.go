package switchover

import (
	"fmt"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/internal/bgroute/meta"
	"github.com/holdfast-db/holdfast/internal/topology"
)

// TestNamesPruned: the addresses, lookups and ports the state keeps by
// host name are those of the generation's current rows (and its start
// snapshot): metadata whose names keep changing — 500 polls, each with
// 64 new names per role — leaves no more than the last poll's names.
// Before the fix (checked on main) every name ever read stayed until the
// generation ended: 160,000 entries here.
func TestNamesPruned(t *testing.T) {
	t.Parallel()
	st := New("1", time.Minute, 0, false)
	now := time.Date(2026, 2, 15, 14, 30, 0, 0, time.UTC)
	const polls = 500
	for i := range polls {
		for _, role := range []meta.Role{meta.RoleSource, meta.RoleTarget} {
			v := meta.View{Found: true, Known: true, Phase: meta.Created, Status: "AVAILABLE", Ports: map[string]int{}}
			dns := map[string]DNSResult{}
			for j := range topology.MaxRows {
				h := fmt.Sprintf("db%d-%d-%d.x1.us-east-1.rds.amazonaws.com", role, i, j)
				v.Endpoints = append(v.Endpoints, h)
				v.Ports[h] = 5432
				if j%2 == 0 {
					dns[h] = DNSResult{IP: fmt.Sprintf("10.0.%d.%d", j, i%250)}
				} else {
					dns[h] = DNSResult{Gone: true}
				}
			}
			v.Endpoint = v.Endpoints[0]
			st.Apply(Observation{Role: role, Kind: KindRows, Engine: meta.EngineAurora, View: v, DNS: dns}, now)
			now = now.Add(time.Second)
		}
	}
	kept := len(st.ips) + len(st.gone) + len(st.ports)
	if limit := 3 * 2 * topology.MaxRows; kept > limit { // an address, a lookup and a port per current host
		t.Errorf("the state keeps %d entries by host after %d polls of changing names; want at most %d (the last poll's)", kept, polls, limit)
	}
	if st.Phase != meta.Created {
		t.Errorf("phase %v, want CREATED", st.Phase)
	}
}
