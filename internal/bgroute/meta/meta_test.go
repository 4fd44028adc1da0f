package meta

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/holdfast-db/holdfast/internal/topology"
)

func TestParseStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in    string
		want  Phase
		known bool
	}{
		{"", NotCreated, true},
		{"  ", NotCreated, true},
		{"AVAILABLE", Created, true},
		{"available", Created, true},
		{"Switchover_Initiated", Preparation, true},
		{" SWITCHOVER_IN_PROGRESS\n", InProgress, true},
		{"switchover_in_post_processing", Post, true},
		{"SWITCHOVER_COMPLETED", Completed, true},
		{"SWITCHOVER_FAILED", NotCreated, false},
		{"CREATED", NotCreated, false},
	}
	for _, tt := range tests {
		t.Run(strings.TrimSpace(tt.in)+"|", func(t *testing.T) {
			t.Parallel()
			got, ok := ParseStatus(tt.in)
			if got != tt.want || ok != tt.known {
				t.Errorf("ParseStatus(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.known)
			}
		})
	}
}

func TestParseRole(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want Role
	}{
		{"BLUE_GREEN_DEPLOYMENT_SOURCE", RoleSource},
		{"blue_green_deployment_target", RoleTarget},
		{" Blue_Green_Deployment_Source ", RoleSource},
		{"SOURCE", RoleUnknown},
		{"", RoleUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.in+"|", func(t *testing.T) {
			t.Parallel()
			if got := ParseRole(tt.in); got != tt.want {
				t.Errorf("ParseRole(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func raw(vals ...any) [][]byte {
	out := make([][]byte, len(vals))
	for i, v := range vals {
		if s, ok := v.(string); ok {
			out[i] = []byte(s)
		}
	}
	return out
}

func TestParseRow(t *testing.T) {
	t.Parallel()
	rdsCols := []string{"id", "endpoint", "port", "role", "status", "version"}
	auroraCols := []string{"version", "endpoint", "port", "role", "status"}
	tests := []struct {
		name    string
		cols    []string
		raw     [][]byte
		want    Row
		wantErr string
	}{
		{
			name: "aurora row",
			cols: auroraCols,
			raw:  raw("1.0", "DB.Cluster-X.us-east-1.rds.amazonaws.com.", "5432", "BLUE_GREEN_DEPLOYMENT_SOURCE", "AVAILABLE"),
			want: Row{Version: "1.0", Endpoint: "db.cluster-x.us-east-1.rds.amazonaws.com", Port: 5432, Role: RoleSource,
				Status: "AVAILABLE", Phase: Created, KnownStatus: true},
		},
		{
			name: "rds row, columns in another order, id read",
			cols: rdsCols,
			raw:  raw("7", "db.x.rds.amazonaws.com", "5433", "blue_green_deployment_target", "switchover_in_progress", "1.0"),
			want: Row{ID: "7", Version: "1.0", Endpoint: "db.x.rds.amazonaws.com", Port: 5433, Role: RoleTarget,
				Status: "switchover_in_progress", Phase: InProgress, KnownStatus: true},
		},
		{
			name: "unknown status, role and version are flagged, not errors",
			cols: auroraCols,
			raw:  raw("2.0", "h", "1", "WHO", "NEW_STATUS"),
			want: Row{Version: "2.0", Endpoint: "h", Port: 1, Role: RoleUnknown, Status: "NEW_STATUS"},
		},
		{
			name: "NULL status and port",
			cols: auroraCols,
			raw:  raw("1.0", "h", nil, "BLUE_GREEN_DEPLOYMENT_SOURCE", nil),
			want: Row{Version: "1.0", Endpoint: "h", Role: RoleSource, Phase: NotCreated, KnownStatus: true},
		},
		{name: "no endpoint", cols: auroraCols, raw: raw("1.0", nil, "5432", "x", "y"), wantErr: "without an endpoint"},
		{name: "bad endpoint", cols: auroraCols, raw: raw("1.0", "a b", "5432", "x", "y"), wantErr: "invalid endpoint"},
		{name: "bad port", cols: auroraCols, raw: raw("1.0", "h", "54x", "x", "y"), wantErr: "invalid port"},
		{name: "port out of range", cols: auroraCols, raw: raw("1.0", "h", "70000", "x", "y"), wantErr: "invalid port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			idx, err := ColumnIndex(tt.cols)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseRow(idx, tt.raw)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("ParseRow = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestColumnIndex(t *testing.T) {
	t.Parallel()
	if _, err := ColumnIndex([]string{"VERSION", "Endpoint", "port", "role", "status"}); err != nil {
		t.Errorf("columns in upper case: %v", err)
	}
	_, err := ColumnIndex([]string{"version", "endpoint", "port", "role"})
	if err == nil || !strings.Contains(err.Error(), `"status"`) {
		t.Errorf("missing status column: err = %v", err)
	}
}

// FuzzParseRow feeds arbitrary strings to the row parser: it must not
// panic, and whatever it accepts must be consistent.
func FuzzParseRow(f *testing.F) {
	f.Add("1.0", "db.cluster-x.us-east-1.rds.amazonaws.com", "5432", "BLUE_GREEN_DEPLOYMENT_SOURCE", "SWITCHOVER_INITIATED")
	f.Add("", "", "", "", "")
	f.Add("9.9", "a", "-1", "blue_green_deployment_target", "switchover_completed")
	f.Add("1.0", "x\x00y", "0x10", "BLUE_GREEN_DEPLOYMENT_TARGET ", " AVAILABLE")
	idx, err := ColumnIndex(RequiredColumns)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, version, endpoint, port, role, status string) {
		r, err := ParseRow(idx, raw(version, endpoint, port, role, status))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "bluegreen: ") {
				t.Errorf("error without the package prefix: %v", err)
			}
			return
		}
		if r.Endpoint == "" || r.Endpoint != topology.NormHost(r.Endpoint) {
			t.Errorf("accepted endpoint %q", r.Endpoint)
		}
		if r.Port < 0 || r.Port > 65535 {
			t.Errorf("accepted port %d", r.Port)
		}
		p, ok := ParseStatus(status)
		if r.Phase != p || r.KnownStatus != ok || (!ok && r.Phase != NotCreated) {
			t.Errorf("status %q → %v %v", status, r.Phase, r.KnownStatus)
		}
		if ok && !utf8.ValidString(status) {
			t.Errorf("non-UTF-8 status %q accepted as known", status)
		}
		if r.Role != ParseRole(role) {
			t.Errorf("role %q → %v", role, r.Role)
		}
		_ = VersionKnown(r.Version)
		// viewOf must cope with whatever the parser accepted.
		_ = ViewOf([]Row{r, r}, r.Role)
	})
}
