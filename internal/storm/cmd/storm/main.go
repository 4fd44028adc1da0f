// Command storm runs the fleet-scale reconnect storm simulation of package
// storm: four retry strategies through a 30 s outage of the database and
// of the token API, 10,000 pods each. It prints the Markdown table of
// RESULTS.md and writes the plot:
//
//	go run ./internal/storm/cmd/storm                # from the module root
//	go run ./internal/storm/cmd/storm -pods 1000 -png /tmp/storm.png
//
// The runs are deterministic for a seed; they share the machine's cores.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"image/png"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/holdfast-db/holdfast/internal/storm"
)

func main() {
	pods := flag.Int("pods", 10000, "pods in the fleet")
	seed := flag.Uint64("seed", 1, "seed of every random draw")
	out := flag.String("png", "internal/storm/storm.png", "where to write the plot (empty: nowhere)")
	rates := flag.String("rates", "2,5,20", "request rates per pod (per second) for holdfast's sensitivity table (empty: none)")
	admission := flag.Bool("admission", true, "also print holdfast's defaults with admission limits (admission.go)")
	flag.Parse()
	if err := run(*pods, *seed, *out, *rates); err != nil {
		fmt.Fprintln(os.Stderr, "storm:", err)
		os.Exit(1)
	}
	if err := admissionIf(*admission, *pods, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "storm:", err)
		os.Exit(1)
	}
}

func run(pods int, seed uint64, out, rates string) error {
	var configs []storm.Config
	for _, d := range []storm.Dependency{storm.Database, storm.TokenAPI} {
		for _, s := range storm.Strategies() {
			c := storm.Default(d, s)
			c.Pods, c.Seed = pods, seed
			configs = append(configs, c)
		}
	}
	holdfast := storm.Strategies()[3]
	// A token function (IAM) during a database outage: each attempt fetches
	// a token first, from a token API that is up. Refunding each fetched
	// token, as the factory did before, voids the budget.
	before := holdfast
	before.Name, before.TokenRefund = "holdfast, token refunds (before)", true
	c := storm.Default(storm.Database, before)
	c.Pods, c.Seed = pods, seed
	configs = append(configs, c)
	main := len(configs)
	for f := range strings.SplitSeq(rates, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		rate, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return fmt.Errorf("-rates: %w", err)
		}
		for _, d := range []storm.Dependency{storm.Database, storm.TokenAPI} {
			c := storm.Default(d, holdfast)
			c.Pods, c.Seed, c.RequestRate = pods, seed, rate
			configs = append(configs, c)
		}
	}
	results, err := runAll(configs)
	if err != nil {
		return err
	}
	r0 := results[0]
	fmt.Printf("%d pods, seed %d; steady state: %.0f connect attempts per second (%s), %.0f (%s)\n\n",
		pods, seed, r0.Steady, r0.Config.Dependency, results[main/2].Steady, results[main/2].Config.Dependency)
	if err := storm.Table(os.Stdout, results[:main]); err != nil {
		return err
	}
	if len(results) > main {
		fmt.Printf("\nholdfast defaults at other request rates (requests per second per pod; the table above: %g):\n\n", r0.Config.RequestRate)
		fmt.Println("| dependency down | requests/s per pod | peak during outage ×steady | peak after recovery ×steady | total load ×steady | retries % of first attempts | time to recovery |")
		fmt.Println("|---|--:|--:|--:|--:|--:|--:|")
		for _, r := range results[main:] {
			fmt.Printf("| %s | %g | %.1f× | %.1f× | %.1f× | %.1f%% | %.2f s |\n", r.Config.Dependency, r.Config.RequestRate,
				r.PeakOutage, r.PeakAfter, r.Total, 100*r.RetryShare, r.Recovery.Seconds())
		}
	}
	if out == "" {
		return nil
	}
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	if err := enc.Encode(&buf, storm.Plot(results[:main-1])); err != nil { // the plot: the four strategies of each dependency
		return err
	}
	if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Printf("\nwrote %s\n", out)
	return nil
}

// runAll runs configs on as many goroutines as there are cores, and
// returns their results in order.
func runAll(configs []storm.Config) ([]*storm.Result, error) {
	results := make([]*storm.Result, len(configs))
	errs := make([]error, len(configs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				results[i], errs[i] = storm.Run(configs[i])
			}
		}()
	}
	for i := range configs {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return results, nil
}
