package fakes

import (
	"bytes"
	"sync"
)

// LogBuffer keeps what is written to it and is safe for concurrent use:
// give it to a log handler (slog.NewTextHandler(b, nil)) to assert on the
// lines of code that logs from several goroutines. The zero value is
// ready to use.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
