package lb_test

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/holdfast-db/holdfast/lb"
)

// FuzzParseConfig: any input gives a *Config or an error, never a panic, and
// a Config that parses never echoes a secret in its error text.
func FuzzParseConfig(f *testing.F) {
	if b, err := os.ReadFile("testdata/example.json"); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"balancers": {"x": {"vendor": "f5", "password": "s3cr3t-fuzz"}}}`))
	f.Add([]byte(`{"groups": {"g": {"balancer": "nope", "members": [{"pool": "", "node": ""}]}}}`))
	f.Add([]byte(`[1,2,3]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := lb.ParseConfig(bytes.NewReader(data))
		if err == nil && c == nil {
			t.Fatal("ParseConfig returned neither a config nor an error")
		}
		if err != nil && strings.Contains(err.Error(), "s3cr3t-fuzz") {
			t.Fatalf("error echoes a password: %v", err)
		}
	})
}

// FuzzParseAdminState: a state that parses prints back to itself.
func FuzzParseAdminState(f *testing.F) {
	for _, s := range []string{"enabled", "disabled", "forced-offline", "Forced-Offline", "", "up"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		st, err := lb.ParseAdminState(s)
		if err != nil {
			return
		}
		back, err := lb.ParseAdminState(st.String())
		if err != nil || back != st {
			t.Fatalf("ParseAdminState(%q) = %v, but its String %q parses to %v, %v", s, st, st.String(), back, err)
		}
	})
}
