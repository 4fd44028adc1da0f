package main

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/holdfast-db/holdfast/fakes/pgtest"
)

// TestDemo runs the README's first command in-process and checks the story
// it tells: plain pgxpool fails on the 503, holdfast absorbs it with one
// connection, real mistakes fail after one attempt.
func TestDemo(t *testing.T) {
	if _, err := pgtest.BinDir(); errors.Is(err, pgtest.ErrNotFound) && os.Getenv(pgtest.EnvRequire) != "1" {
		t.Skip(err)
	}
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatalf("demo failed: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		"request: FAILED (transient/token-fetch-503)",
		"request: OK",
		"dial attempts: 2, connections created: 1",
		"stage=connect attempt=1",
		"fatal/permission-denied after 1 dial attempt(s)",
		"fatal/sqlstate-28000 after 1 dial attempt(s)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out.String())
		}
	}
}
