package outage

import (
	"slices"
	"testing"
)

// Which failed addresses the database left, when a check connects: only
// those whose host the name no longer resolves to, and only when the
// server that answered is at an address the name resolves to (a dial
// function that ignores the address, as the Cloud SQL connector does,
// says nothing of a move).
func TestLeft(t *testing.T) {
	tests := []struct {
		name     string
		failed   []string
		addr     string
		resolved []string
		want     []string
	}{
		{"DNS moved (Multi-AZ)", []string{"10.0.0.11:5432"}, "10.0.0.21:5432", []string{"10.0.0.21"}, []string{"10.0.0.11:5432"}},
		{"same address (a restart)", []string{"10.0.0.11:5432"}, "10.0.0.11:5432", []string{"10.0.0.11"}, nil},
		{"two addresses, one failed, still resolved", []string{"10.0.0.12:5432"}, "10.0.0.11:5432", []string{"10.0.0.11", "10.0.0.12"}, nil},
		{"two failed, one left", []string{"10.0.0.11:5432", "10.0.0.12:5432"}, "10.0.0.13:5432", []string{"10.0.0.12", "10.0.0.13"}, []string{"10.0.0.11:5432"}},
		{"a connector that ignores the address", []string{"localhost:5432"}, "127.0.0.1:41319", []string{"localhost"}, nil},
		{"a connector, the name resolved to IPs", []string{"127.0.0.1:5432"}, "127.0.0.1:41319", []string{"127.0.0.1"}, nil},
		{"IPv6 moved", []string{"[fd00::11]:5432"}, "[fd00::21]:5432", []string{"fd00::21"}, []string{"[fd00::11]:5432"}},
		{"nothing resolved (a Unix socket)", []string{"/tmp/.s.PGSQL.5432"}, "/tmp/.s.PGSQL.5432", nil, nil},
		{"a lookup that returns host:port, moved", []string{"10.0.0.1:5432"}, "127.0.0.1:40001", []string{"127.0.0.1:40001"}, []string{"10.0.0.1:5432"}},
		{"a lookup that returns host:port, same", []string{"127.0.0.1:40001"}, "127.0.0.1:40001", []string{"127.0.0.1:40001"}, nil},
		{"no answer's address", []string{"10.0.0.11:5432"}, "", []string{"10.0.0.21"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := left(tt.failed, tt.addr, tt.resolved); !slices.Equal(got, tt.want) {
				t.Errorf("left(%q, %q, %q) = %q, want %q", tt.failed, tt.addr, tt.resolved, got, tt.want)
			}
		})
	}
}
