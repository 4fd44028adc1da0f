package cfgerr

import (
	"testing"
	"time"
)

func TestSetDefaults(t *testing.T) {
	a, b, c := time.Duration(0), 2*time.Second, time.Duration(0)
	ds := []Duration{{"A", &a, time.Second}, {"B", &b, time.Minute}, {"C", &c, time.Hour}}
	if d := SetDefaults(ds); d != nil || a != time.Second || b != 2*time.Second || c != time.Hour {
		t.Errorf("SetDefaults = %v; a, b, c = %v, %v, %v; want nil; 1s, 2s, 1h", d, a, b, c)
	}
	a, b, c = 0, -time.Second, 0
	if d := SetDefaults(ds); d == nil || d.Name != "B" || a != time.Second || c != 0 {
		t.Errorf("SetDefaults = %v; a, c = %v, %v; want B; 1s (before it), 0 (after it)", d, a, c)
	}
}
