package main

import (
	"fmt"
	"os"

	"github.com/holdfast-db/holdfast/internal/storm"
)

// detailTables runs, at the main rate, the budgets without the hold with
// admission limits (storm.AdmissionStrategies), and holdfast's defaults
// with one parameter of the hold changed at a time (storm.HoldVariants),
// through both outages, and prints them with the median pod's figures.
func detailTables(pods int, seed uint64, rate float64) error {
	tables := []struct {
		title  string
		strats []storm.Strategy
	}{
		{"The budgets without the hold, with an admission limit per pod (holdfast.WithConnectLimit)",
			append([]storm.Strategy{storm.Named(storm.PlainBudget)}, storm.AdmissionStrategies()...)},
		{"holdfast's defaults with one parameter of the outage hold changed (storm.HoldVariants; defaults: " + storm.DefaultHold().String() + ")",
			append([]storm.Strategy{storm.Named(storm.Holdfast)}, storm.HoldVariants()...)},
	}
	for _, t := range tables {
		var configs []storm.Config
		for _, d := range []storm.Dependency{storm.Database, storm.TokenAPI} {
			for _, s := range t.strats {
				c := storm.Default(d, s)
				c.Pods, c.Seed, c.RequestRate = pods, seed, rate
				configs = append(configs, c)
			}
		}
		results, err := runAll(configs)
		if err != nil {
			return err
		}
		fmt.Printf("\n%s, %g requests/s per pod:\n\n", t.title, rate)
		if err := storm.DetailTable(os.Stdout, results); err != nil {
			return err
		}
	}
	return nil
}

func detailsIf(on bool, pods int, seed uint64, rate float64) error {
	if !on {
		return nil
	}
	return detailTables(pods, seed, rate)
}
