package main

import (
	"context"
	"fmt"
	"os"
)

// check-config validates a configuration file without calling a balancer
// or the database: a cheap first step for a pipeline. A misspelt key is an
// error, not a silent default.
func Example_checkConfig() {
	getenv := func(string) string { return "" }
	code := run(context.Background(), []string{"-config", "testdata/lb.json", "check-config"}, getenv, os.Stdout, os.Stdout)
	fmt.Println("exit", code)
	code = run(context.Background(), []string{"-config", "testdata/typo.json", "check-config"}, getenv, os.Stdout, os.Stdout)
	fmt.Println("exit", code)
	// Output:
	// testdata/lb.json: ok: 2 balancers, 2 groups, 3 operators
	// exit 0
	// holdfast-lb: testdata/typo.json: lb: invalid configuration: bad JSON: json: unknown field "databse"
	// exit 2
}
