package f5_test

import (
	"testing"

	"github.com/holdfast-db/holdfast/lb/f5"
)

// FuzzParseCurConns: any /stats body gives a count or an error, never a
// panic, and never a negative count.
func FuzzParseCurConns(f *testing.F) {
	f.Add([]byte(`{"entries":{"x":{"nestedStats":{"entries":{"serverside.curConns":{"value":3}}}}}}`))
	f.Add([]byte(`{"entries":{"x":{"nestedStats":{"entries":{"serverside.curConns":{"high":1,"low":5}}}}}}`))
	f.Add([]byte(`{"entries":{"x":{"nestedStats":{"entries":{"serverside.curConns.high":{"value":0},"serverside.curConns.low":{"value":7}}}}}}`))
	f.Add([]byte(`{"entries":{}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, body []byte) {
		n, err := f5.ParseCurConns(body)
		if err == nil && n < 0 {
			t.Fatalf("ParseCurConns = %d, want no negative count", n)
		}
	})
}
