package meta

import "testing"

func TestCorrespond(t *testing.T) {
	t.Parallel()
	const (
		c1, r1         = "a.cluster-x.r.rds.amazonaws.com", "a.cluster-ro-x.r.rds.amazonaws.com"
		i1, i2, i3     = "a-1.x.r.rds.amazonaws.com", "a-2.x.r.rds.amazonaws.com", "a-3.x.r.rds.amazonaws.com"
		gc, gr         = "a-green-q1w2e3.cluster-x.r.rds.amazonaws.com", "a-green-q1w2e3.cluster-ro-x.r.rds.amazonaws.com"
		g1, g2         = "a-1-green-q1w2e3.x.r.rds.amazonaws.com", "a-2-green-q1w2e3.x.r.rds.amazonaws.com"
		cust, gcust    = "rep.cluster-custom-x.r.rds.amazonaws.com", "rep-green-q1w2e3.cluster-custom-x.r.rds.amazonaws.com"
		single, gsingl = "orders.x.r.rds.amazonaws.com", "orders-green-q1w2e3.x.r.rds.amazonaws.com"
	)
	tests := []struct {
		name        string
		blue, green []string
		ips         map[string]string
		writers     map[string]bool
		want        map[string]string
	}{
		{
			name: "RDS instance", blue: []string{single}, green: []string{gsingl},
			want: map[string]string{single: gsingl},
		},
		{
			name: "cluster endpoints by kind, writer by address, readers round robin",
			blue: []string{c1, r1, i1, i2, i3}, green: []string{gc, gr, g1, g2},
			// The blue writer is a-2 (the cluster endpoint's address); green's is a-1.
			ips:  map[string]string{c1: "1", i2: "1", i1: "2", i3: "3", gc: "9", g1: "9", g2: "8"},
			want: map[string]string{c1: gc, r1: gr, i2: g1, i1: g2, i3: g2},
		},
		{
			name: "the topology's writers win over addresses",
			blue: []string{c1, r1, i1, i2, i3}, green: []string{gc, gr, g1, g2},
			// One server per side answers every name (as in the simulator):
			// addresses cannot tell the writer; the topology does.
			ips:     map[string]string{c1: "1", i1: "1", i2: "1", i3: "1", gc: "9", g1: "9", g2: "9"},
			writers: map[string]bool{i3: true, g2: true},
			want:    map[string]string{c1: gc, r1: gr, i3: g2, i1: g1, i2: g1},
		},
		{
			name: "readers map to the green writer when green has none",
			blue: []string{c1, i1, i2}, green: []string{gc, g1},
			ips:  map[string]string{c1: "1", i1: "1", gc: "9", g1: "9"},
			want: map[string]string{c1: gc, i1: g1, i2: g1},
		},
		{
			name: "reader endpoint falls back to the green writer endpoint",
			blue: []string{c1, r1}, green: []string{gc},
			want: map[string]string{c1: gc, r1: gc},
		},
		{
			name: "custom endpoints by name",
			blue: []string{cust}, green: []string{gcust},
			want: map[string]string{cust: gcust},
		},
		{
			name: "no green side",
			blue: []string{c1, i1}, green: nil,
			want: map[string]string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Correspond(tt.blue, tt.green, tt.ips, tt.writers)
			if len(got) != len(tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
			for b, g := range tt.want {
				if got[b] != g {
					t.Errorf("%s -> %q, want %q", b, got[b], g)
				}
			}
		})
	}
}
