// Command storm runs the fleet-scale reconnect storm simulation of package
// storm: the retry strategies of storm.Strategies (holdfast's defaults,
// with the outage hold, among them) through a 30 s outage of the database
// and of the token API, 10,000 pods each, at several request rates. It
// prints the Markdown tables of RESULTS.md and writes the plot:
//
//	go run ./internal/storm/cmd/storm                # from the module root
//	go run ./internal/storm/cmd/storm -json          # every run, as {"rows": [...]}
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
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/holdfast-db/holdfast/internal/storm"
)

func main() {
	pods := flag.Int("pods", 10000, "pods in the fleet")
	seed := flag.Uint64("seed", 1, "seed of every random draw")
	out := flag.String("png", "internal/storm/storm.png", "where to write the plot (empty: nowhere; with -json, only when given)")
	rates := flag.String("rates", "2,5,10,20", "request rates per pod (per second): every strategy runs at each")
	main := flag.Float64("rate", 10, "the request rate of the main table and of the plot (one of -rates)")
	asJSON := flag.Bool("json", false, "print every run as one JSON object, {\"rows\": [...]}, instead of the tables")
	details := flag.Bool("admission", true, "also print the budgets with admission limits and the hold's variants, at -rate (not with -json)")
	flag.Parse()
	if *asJSON {
		set := false
		flag.Visit(func(f *flag.Flag) { set = set || f.Name == "png" })
		if !set {
			*out = ""
		}
	}
	if err := run(*pods, *seed, *out, *rates, *main, *asJSON); err != nil {
		fmt.Fprintln(os.Stderr, "storm:", err)
		os.Exit(1)
	}
	if err := detailsIf(*details && !*asJSON, *pods, *seed, *main); err != nil {
		fmt.Fprintln(os.Stderr, "storm:", err)
		os.Exit(1)
	}
}

func run(pods int, seed uint64, out, rateList string, mainRate float64, asJSON bool) error {
	var rates []float64
	for f := range strings.SplitSeq(rateList, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		rate, err := strconv.ParseFloat(f, 64)
		if err != nil || rate <= 0 {
			return fmt.Errorf("-rates: %q is not a positive number", f)
		}
		rates = append(rates, rate)
	}
	if !slices.Contains(rates, mainRate) {
		return fmt.Errorf("-rate %g is not one of -rates %q", mainRate, rateList)
	}
	// Every strategy at every rate, dependency by dependency.
	var configs []storm.Config
	for _, d := range []storm.Dependency{storm.Database, storm.TokenAPI} {
		for _, rate := range rates {
			for _, s := range storm.Strategies() {
				c := storm.Default(d, s)
				c.Pods, c.Seed, c.RequestRate = pods, seed, rate
				configs = append(configs, c)
			}
		}
	}
	// A token function (IAM) during a database outage: each attempt fetches
	// a token first, from a token API that is up. Refunding each fetched
	// token, as the factory did before, voids the budget.
	before := storm.Named(storm.PlainBudget)
	before.Name, before.TokenRefund = "holdfast, token refunds (before)", true
	c := storm.Default(storm.Database, before)
	c.Pods, c.Seed, c.RequestRate = pods, seed, mainRate
	configs = append(configs, c)
	results, err := runAll(configs)
	if err != nil {
		return err
	}
	if out != "" {
		if err := plot(out, results, mainRate); err != nil {
			return err
		}
	}
	if asJSON {
		return storm.JSON(os.Stdout, results)
	}
	var main, byRate []*storm.Result
	for _, r := range results {
		if r.Config.RequestRate == mainRate {
			main = append(main, r)
		}
		if !r.Config.Strategy.TokenRefund && r.Config.Strategy.Name != storm.Naive {
			byRate = append(byRate, r)
		}
	}
	fmt.Printf("%d pods, seed %d, %g requests/s per pod; steady state: %.0f connect attempts per second (%s), %.0f (%s)\n\n",
		pods, seed, mainRate, main[0].Steady, main[0].Config.Dependency, main[len(main)/2].Steady, main[len(main)/2].Config.Dependency)
	if err := storm.Table(os.Stdout, main); err != nil {
		return err
	}
	fmt.Printf("\nAt each request rate (requests per second per pod), every strategy but naive (%s: %s):\n\n", storm.Holdfast, storm.DefaultHold())
	if err := storm.RateTable(os.Stdout, byRate); err != nil {
		return err
	}
	if out != "" {
		fmt.Printf("\nwrote %s\n", out)
	}
	return nil
}

// plot writes the plot of the strategies at rate to out.
func plot(out string, results []*storm.Result, rate float64) error {
	var rs []*storm.Result
	for _, r := range results {
		if r.Config.RequestRate == rate && !r.Config.Strategy.TokenRefund {
			rs = append(rs, r)
		}
	}
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	if err := enc.Encode(&buf, storm.Plot(rs)); err != nil {
		return err
	}
	return os.WriteFile(out, buf.Bytes(), 0o644)
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
