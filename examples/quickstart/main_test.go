package main

import (
	"os"
	"strings"
	"testing"
)

// The README's quick start is this program, verbatim: the program is
// compiled (and vetted) with every test run, and this test fails when the
// two drift apart.
func TestREADMEQuickStartIsThisProgram(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	prog, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```go\n"+string(prog)+"```") {
		t.Fatal("README.md's quick start differs from examples/quickstart/main.go; update one from the other")
	}
}
