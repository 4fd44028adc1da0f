package a10_test

import (
	"testing"

	"github.com/holdfast-db/holdfast/lb/a10"
)

// FuzzParseCurrConn: any /stats body gives a count or an error, never a
// panic, and never a negative count.
func FuzzParseCurrConn(f *testing.F) {
	f.Add([]byte(`{"server":{"stats":{"curr-conn":4}}}`), "server")
	f.Add([]byte(`{"port":{"stats":{"curr_conn":2}}}`), "port")
	f.Add([]byte(`{"server":{"stats":{}}}`), "server")
	f.Add([]byte(`{"server":{"stats":{"curr-conn":-1}}}`), "server")
	f.Add([]byte(`[]`), "port")
	f.Fuzz(func(t *testing.T, body []byte, key string) {
		n, err := a10.ParseCurrConn(body, key)
		if err == nil && n < 0 {
			t.Fatalf("ParseCurrConn = %d, want no negative count", n)
		}
	})
}
